"""Atomic result files: write to a temporary file in the same folder, then rename."""

from __future__ import annotations

import io
import json
import logging
import os
import time
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from app.fileio import atomic_write_bytes
from app.sims.common.provenance import METADATA as CRATE, write_crate

__all__ = ["RunFolder", "atomic_write_bytes", "save_csv", "save_json", "save_npz", "save_text"]

#: files a run writes into its folder (all replaced together; MANIFEST last)
RUN_FILES = ("config.yaml", "results.npz", "summary.json", "plot.png", CRATE)
MANIFEST = "manifest.json"


def save_npz(path: str | Path, arrays: Mapping[str, Any]) -> Path:
    buf = io.BytesIO()
    np.savez_compressed(buf, **{k: np.asarray(v) for k, v in arrays.items()})  # type: ignore[arg-type]
    return atomic_write_bytes(path, buf.getvalue())


def save_json(path: str | Path, values: Mapping[str, Any]) -> Path:
    text = json.dumps(_jsonable(values), indent=2, sort_keys=False)
    return atomic_write_bytes(path, (text + "\n").encode())


def save_text(path: str | Path, text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def save_csv(path: str | Path, header: list[str], columns: list[np.ndarray]) -> Path:
    """Columns of equal length as CSV with a header row."""
    table = np.column_stack([np.asarray(c, dtype=float) for c in columns])
    buf = io.StringIO()
    np.savetxt(buf, table, delimiter=",", header=",".join(header), comments="", fmt="%.10g")
    return save_text(path, buf.getvalue())


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


def check_output_dir(out: str | Path, what: str = "--out") -> Path:
    """Make sure results can be written to ``out`` before a run starts (ConfigError if not)."""
    import tempfile

    from app.sims.common.config import ConfigError

    path = Path(out)
    try:
        if path.exists() and not path.is_dir():
            raise ConfigError(f"{what} {path} is a file, not a folder")
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".write-check-"):
            pass
    except ConfigError:
        raise
    except OSError as exc:
        raise ConfigError(f"cannot write results to {what} {path}: {exc.strerror or exc}") from None
    return path


class RunFolder:
    """A run's result files written as one unit.

    Files are written into a staging folder ``OUT/.run-PID-XXXX.tmp``; on success the old
    ``manifest.json`` goes first, every file of an earlier run this one does not write again
    is removed, the new files are renamed into ``OUT`` and ``manifest.json`` (run id, file
    names, sizes) is written last. A folder with no manifest is one a run was interrupted
    in; what a killed run left (staging folders, temporary files of a dead process) is
    removed by the next run into the same folder. A new ``config.yaml`` therefore never sits
    next to an old ``results.npz``.
    """

    def __init__(self, out: str | Path):
        import tempfile
        import uuid

        from app.fileio import stale_temporaries

        self.out = Path(out)
        self.out.mkdir(parents=True, exist_ok=True)
        for old in stale_temporaries(self.out):
            _remove(old)
        self.run_id = uuid.uuid4().hex
        self.stage = Path(tempfile.mkdtemp(prefix=f".run-{os.getpid()}-", suffix=".tmp", dir=self.out))
        self.files: list[str] = []
        #: what the RO-Crate says of the run: name, started (epoch seconds), summary
        self.provenance: dict[str, Any] = {}
        self.started = time.time()

    def path(self, name: str) -> Path:
        self.files.append(name)
        return self.stage / name

    def save_text(self, name: str, text: str) -> None:
        save_text(self.path(name), text)

    def save_npz(self, name: str, arrays: Mapping[str, Any]) -> None:
        save_npz(self.path(name), arrays)

    def save_json(self, name: str, values: Mapping[str, Any]) -> None:
        save_json(self.path(name), values)

    def commit(self) -> None:
        names = sorted({p.name for p in self.stage.iterdir() if p.is_file() and not p.name.startswith(".")})
        (self.out / MANIFEST).unlink(missing_ok=True)
        for old in RUN_FILES:
            if old not in names:
                (self.out / old).unlink(missing_ok=True)
        for name in names:
            os.replace(self.stage / name, self.out / name)
        try:
            names.append(write_crate(self.out, files=names, **self._crate_fields()).name)
        except (ImportError, OSError, ValueError) as exc:     # the results count more than their crate
            logging.getLogger(__name__).warning("no RO-Crate written in %s: %s", self.out, exc)
        manifest = {"run_id": self.run_id, "files": {n: (self.out / n).stat().st_size for n in names}}
        save_json(self.out / MANIFEST, manifest)

    def _crate_fields(self) -> dict[str, Any]:
        return {"name": self.out.name, "started": self.started, "ended": time.time(), **self.provenance}

    def __enter__(self) -> "RunFolder":
        return self

    def __exit__(self, kind, exc, tb) -> None:
        try:
            if kind is None:
                self.commit()
        finally:
            _remove(self.stage)


def _remove(path: Path) -> None:
    import shutil

    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)
