"""Workbench sessions: every panel's run config, and optionally its latest frame, in one file.

A session file is a ZIP archive (suffix ``.biogpu``) holding ``session.json`` (format version,
the current panel, each panel's config as YAML text) and, per panel with results saved,
``frames/<domain>.npz`` (the frame's arrays) plus the frame's plain fields in ``session.json``.
Opening one validates every config through the domain's loader (the same checks as a file) and
rebuilds frames only as dataclasses of ``app.sims`` frame classes; nothing is unpickled.
"""

from __future__ import annotations

import dataclasses
import importlib
import io
import json
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from app.fileio import atomic_write_bytes
from app.sims.common.config import ConfigError
from app.sims.common.simulation import Frame

FORMAT = "biogpu-session"
VERSION = 1
SUFFIX = ".biogpu"
MAX_MEMBER_BYTES = 1 << 31        # a member larger than this is refused (zip bombs)


@dataclass
class PanelState:
    """One panel in a session: its config (YAML text) and, optionally, its latest frame."""

    config_yaml: str
    frame: Frame | None = None


@dataclass
class WorkbenchSession:
    current: str = ""
    panels: dict[str, PanelState] = field(default_factory=dict)


# ---- frames <-> plain data ----------------------------------------------------------------
def _encode_frame(frame: Frame, prefix: str, arrays: dict[str, np.ndarray]) -> dict[str, Any]:
    """The frame's plain fields as JSON values; its arrays go into ``arrays`` under ``prefix``."""
    cls = type(frame)
    plain: dict[str, Any] = {"class": f"{cls.__module__}:{cls.__qualname__}", "fields": {}}
    for f in dataclasses.fields(frame):
        value = getattr(frame, f.name)
        if isinstance(value, np.ndarray):
            arrays[f"{prefix}{f.name}"] = value
            plain["fields"][f.name] = {"array": f"{prefix}{f.name}"}
        elif isinstance(value, dict) and all(isinstance(v, np.ndarray) for v in value.values()):
            keys = {}
            for key, item in value.items():
                arrays[f"{prefix}{f.name}.{key}"] = item
                keys[str(key)] = f"{prefix}{f.name}.{key}"
            plain["fields"][f.name] = {"arrays": keys}
        elif value is None or isinstance(value, (bool, int, float, str)):
            plain["fields"][f.name] = {"value": value}
        elif isinstance(value, (tuple, list)) and all(
                isinstance(v, (bool, int, float, str)) for v in value):
            plain["fields"][f.name] = {"tuple": list(value)}
        elif isinstance(value, (np.integer, np.floating, np.bool_)):
            plain["fields"][f.name] = {"value": value.item()}
        else:
            raise TypeError(f"frame field {f.name!r} of type {type(value).__name__} cannot be saved")
    return plain


def _frame_class(name: str) -> type[Frame]:
    module, _, qualname = name.partition(":")
    if not module.startswith("app.sims.") or not qualname.isidentifier():
        raise ConfigError(f"session: {name!r} is not a frame class of app.sims")
    cls = getattr(importlib.import_module(module), qualname, None)
    if not (isinstance(cls, type) and issubclass(cls, Frame) and dataclasses.is_dataclass(cls)):
        raise ConfigError(f"session: {name!r} is not a frame class of app.sims")
    return cls


def _decode_frame(plain: dict[str, Any], arrays: dict[str, np.ndarray]) -> Frame:
    cls = _frame_class(str(plain.get("class", "")))
    known = {f.name for f in dataclasses.fields(cls)}
    values: dict[str, Any] = {}
    for name, item in dict(plain.get("fields", {})).items():
        if name not in known:
            raise ConfigError(f"session: {cls.__name__} has no field {name!r}")
        if "array" in item:
            values[name] = _frozen(arrays[item["array"]])
        elif "arrays" in item:
            values[name] = {k: _frozen(arrays[v]) for k, v in item["arrays"].items()}
        elif "tuple" in item:
            values[name] = tuple(item["tuple"])
        else:
            values[name] = item.get("value")
    return cls(**values)


def _frozen(array: np.ndarray) -> np.ndarray:
    array = np.array(array, copy=True)
    array.flags.writeable = False
    return array


# ---- files --------------------------------------------------------------------------------
def save_session(path: str | Path, session: WorkbenchSession) -> Path:
    """Write ``session`` as one ZIP file, atomically."""
    doc: dict[str, Any] = {"format": FORMAT, "version": VERSION, "current": session.current,
                           "panels": {}}
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, state in session.panels.items():
            entry: dict[str, Any] = {"config_yaml": state.config_yaml}
            if state.frame is not None:
                arrays: dict[str, np.ndarray] = {}
                entry["frame"] = _encode_frame(state.frame, "", arrays)
                npz = io.BytesIO()
                np.savez_compressed(npz, **arrays)
                archive.writestr(f"frames/{name}.npz", npz.getvalue())
            doc["panels"][name] = entry
        archive.writestr("session.json", json.dumps(doc, indent=1))
    return atomic_write_bytes(path, buf.getvalue())


def load_session(path: str | Path) -> WorkbenchSession:
    """Read a session file; raises ConfigError naming the file on anything malformed."""
    where = str(path)
    try:
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                if info.file_size > MAX_MEMBER_BYTES:
                    raise ConfigError(f"session member {info.filename} is too large", where)
            doc = json.loads(archive.read("session.json").decode("utf-8"))
            if not isinstance(doc, dict) or doc.get("format") != FORMAT:
                raise ConfigError("not a BioGPU Studio session file", where)
            if doc.get("version") != VERSION:
                raise ConfigError(f"session format version {doc.get('version')!r} is not {VERSION}", where)
            session = WorkbenchSession(current=str(doc.get("current", "")))
            for name, entry in dict(doc.get("panels", {})).items():
                frame = None
                if entry.get("frame") is not None:
                    _frame_class(str(entry["frame"].get("class", "")))   # before reading arrays
                    with np.load(io.BytesIO(archive.read(f"frames/{name}.npz")),
                                 allow_pickle=False) as data:
                        arrays = {k: data[k] for k in data.files}
                    frame = _decode_frame(entry["frame"], arrays)
                session.panels[str(name)] = PanelState(str(entry["config_yaml"]), frame)
            return session
    except ConfigError:
        raise
    except (OSError, EOFError, KeyError, ValueError, TypeError, AttributeError,
            zipfile.BadZipFile) as exc:
        raise ConfigError(f"cannot read the session: {type(exc).__name__}: {exc}", where) from exc
