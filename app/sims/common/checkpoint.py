"""Checkpoint files: one NPZ with a marker entry, read and written with messages, not tracebacks.

A checkpoint is an NPZ (a zip of ``.npy`` arrays) holding the simulation's :meth:`state` and
the entry ``biogpu_checkpoint`` (JSON text: format and domain). Only a file that is recognisably
a checkpoint (the marker, or the ``config_yaml`` entry of files written before the marker) is
ever overwritten; a folder, an unwritable place, random bytes, an empty or truncated file give
a :class:`CheckpointError` naming the file and the reason. Checkpoints are not signed: they
are loaded without pickle (``allow_pickle=False``), so a file can hold only arrays.
"""

from __future__ import annotations

import io
import json
import tempfile
import zipfile
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from app.fileio import atomic_write_bytes
from app.sims.common.config import ConfigError, dotted_items, to_plain

MARKER = "biogpu_checkpoint"
FORMAT = 1


class CheckpointError(ConfigError):
    """A checkpoint file that cannot be read, written or used: ``file: reason``."""

    def __init__(self, path: str | Path, reason: str):
        super().__init__(reason, f"checkpoint {path}")


def _open(path: Path) -> zipfile.ZipFile:
    if path.is_dir():
        raise CheckpointError(path, "this is a folder; run.checkpoint names a file")
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise CheckpointError(path, f"cannot read it: {exc.strerror}") from None
    if size == 0:
        raise CheckpointError(path, "the file is empty (a run killed while writing it?)")
    try:
        return zipfile.ZipFile(path)
    except zipfile.BadZipFile:
        raise CheckpointError(path, "not a checkpoint: not an NPZ (zip) file, or truncated") from None
    except OSError as exc:
        raise CheckpointError(path, f"cannot read it: {exc.strerror}") from None


def is_checkpoint(path: str | Path) -> bool:
    """True when ``path`` is an NPZ holding the marker (or the ``config_yaml`` of older files)."""
    try:
        with _open(Path(path)) as zf:
            names = set(zf.namelist())
    except CheckpointError:
        return False
    return f"{MARKER}.npy" in names or "config_yaml.npy" in names


def read_checkpoint(path: str | Path, domain: str | None = None) -> dict[str, Any]:
    """The arrays of checkpoint ``path`` (the marker removed); :class:`CheckpointError` if it is
    not one, is damaged, or belongs to another domain."""
    path = Path(path)
    with _open(path) as zf:
        bad = _first_bad_member(zf)
    if bad:
        raise CheckpointError(path, f"the file is damaged ({bad}); it was probably cut short")
    try:
        with np.load(path, allow_pickle=False) as data:
            state = {k: data[k] for k in data.files}
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        raise CheckpointError(path, f"the file is damaged or not a checkpoint ({exc})") from None
    marker = state.pop(MARKER, None)
    if marker is None and "config_yaml" not in state:
        raise CheckpointError(path, "an NPZ file, but not a checkpoint of this app "
                                    f"(no '{MARKER}' or 'config_yaml' entry)")
    if marker is not None:
        try:
            info = json.loads(str(marker))
            saved_domain, fmt = info.get("domain"), int(info.get("format", 0))
        except (ValueError, AttributeError, TypeError):
            raise CheckpointError(path, "the checkpoint's marker entry is damaged") from None
        if fmt > FORMAT:
            raise CheckpointError(path, f"written by a newer version (format {fmt}; this one reads {FORMAT})")
        if domain is not None and saved_domain != domain:
            raise CheckpointError(path, f"a {saved_domain} checkpoint, not a {domain} one")
    return state


def _first_bad_member(zf: zipfile.ZipFile) -> str | None:
    try:
        return zf.testzip()
    except (zipfile.BadZipFile, EOFError, OSError, RuntimeError, ValueError) as exc:
        return str(exc) or type(exc).__name__


def check_target(path: str | Path) -> Path:
    """Before a run: ``path`` can take a checkpoint (its folder exists or can be made and is
    writable; it is not a folder; an existing file there is one of our checkpoints)."""
    path = Path(path)
    if path.is_dir():
        raise CheckpointError(path, "this is a folder; run.checkpoint names a file")
    if path.exists() and not is_checkpoint(path):
        raise CheckpointError(path, "a file that is not a checkpoint of this app is there; it is "
                                    "not overwritten (remove it or choose another name)")
    folder = path.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CheckpointError(path, f"cannot create its folder: {exc.strerror}") from None
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-check-"):
            pass
    except OSError as exc:
        raise CheckpointError(path, f"cannot write into its folder {folder}: {exc.strerror or exc}") from None
    return path


def write_checkpoint(path: str | Path, state: Mapping[str, Any], domain: str,
                     compressed: bool = False) -> Path:
    """Write ``state`` with the marker, atomically, only over a file that is a checkpoint."""
    path = Path(path)
    check_target(path)
    arrays = {k: np.asarray(v) for k, v in state.items()}
    arrays[MARKER] = np.array(json.dumps({"format": FORMAT, "domain": domain}))
    buf = io.BytesIO()
    writer: Any = np.savez_compressed if compressed else np.savez
    writer(buf, **arrays)
    try:
        return atomic_write_bytes(path, buf.getvalue())
    except OSError as exc:
        raise CheckpointError(path, f"cannot write it: {exc.strerror or exc}") from None


def config_differences(saved: Any, now: Any, fixed: tuple[str, ...]) -> list[str]:
    """``key: saved -> now`` for every leaf under one of the dotted prefixes ``fixed`` that
    differs between two configs."""
    a = dict(dotted_items(to_plain(saved)))
    b = dict(dotted_items(to_plain(now)))
    out = []
    for key in list(a) + [k for k in b if k not in a]:
        if not any(key == p or key.startswith(p + ".") for p in fixed):
            continue
        if a.get(key) != b.get(key):
            out.append(f"{key} is {a.get(key)!r} in the checkpoint, {b.get(key)!r} now")
    return out


def refuse_mismatch(path: str | Path | None, saved: Any, now: Any, fixed: tuple[str, ...],
                    what: str) -> None:
    """Raise :class:`CheckpointError` listing the differences under ``fixed`` (what a resumed
    run may not change)."""
    diff = config_differences(saved, now, fixed)
    if diff:
        shown = "; ".join(diff[:4]) + (f"; and {len(diff) - 4} more" if len(diff) > 4 else "")
        raise CheckpointError(path or "<state>", f"the checkpoint belongs to a different {what}: {shown}. "
                              f"{', '.join(fixed)} may not change on resume (set run.resume: false or "
                              "name another checkpoint file to start afresh)")


def refuse_past_end(path: str | Path | None, done: float, end: float, key: str, unit: str) -> None:
    """A checkpoint further than the config's end: refuse rather than return a longer run than
    the written config says."""
    if done > end * (1 + 1e-12):
        raise CheckpointError(path or "<state>", f"the checkpoint has already run {done:g} {unit}, "
                              f"past {key} = {end:g}; raise {key} to at least {done:g} or set "
                              "run.resume: false to start afresh")
