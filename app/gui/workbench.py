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
import os
import stat
import typing
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from app.fileio import atomic_write_bytes
from app.sims.common.config import ConfigError, dump_yaml
from app.sims.common.simulation import Frame
from app.sims.common.steering import SteeringEvent, steering_from_state

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
        elif isinstance(value, tuple) and value and all(isinstance(v, SteeringEvent) for v in value):
            plain["fields"][f.name] = {"steering": dump_yaml(list(value))}    # checked YAML on reading
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
        raise ConfigError(f"{name!r} is not a frame class of app.sims")
    try:
        cls = getattr(importlib.import_module(module), qualname, None)
    except ImportError:
        cls = None
    if not (isinstance(cls, type) and issubclass(cls, Frame) and dataclasses.is_dataclass(cls)):
        raise ConfigError(f"{name!r} is not a frame class of app.sims")
    return cls


def _decode_frame(plain: dict[str, Any], arrays: dict[str, np.ndarray]) -> Frame:
    cls = _frame_class(str(plain.get("class", "")))
    fields = {f.name: f for f in dataclasses.fields(cls)}
    values: dict[str, Any] = {}
    items = plain.get("fields", {})
    if not isinstance(items, dict):
        raise ConfigError(f"the fields of {cls.__name__} are {type(items).__name__}, not a mapping")
    for name, item in items.items():
        if name not in fields:
            raise ConfigError(f"{cls.__name__} has no field {name!r}")
        if not isinstance(item, dict) or len(item) != 1:
            raise ConfigError(f"field {cls.__name__}.{name} is not one of array, arrays, "
                              "tuple or value")
        values[name] = _field_value(cls, fields[name], item, arrays)
    missing = [n for n, f in fields.items() if f.init and n not in values
               and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    if missing:
        raise ConfigError(f"the frame {cls.__name__} lacks the fields {', '.join(missing)}")
    return cls(**values)


def _field_value(cls: type, f: dataclasses.Field, item: dict[str, Any], arrays: dict[str, np.ndarray]) -> Any:
    """One frame field from its session entry, its type checked against the field's default
    (a number where a number is, text where text is, arrays only of numbers)."""
    where = f"field {cls.__name__}.{f.name}"
    (kind, raw), = item.items()
    if kind == "array":
        return _frozen(_member_array(arrays, raw, where))
    if kind == "arrays":
        if not isinstance(raw, dict):
            raise ConfigError(f"{where}: 'arrays' is not a mapping")
        return {str(k): _frozen(_member_array(arrays, v, where)) for k, v in raw.items()}
    if kind == "tuple":
        if not isinstance(raw, list) or not all(isinstance(v, (bool, int, float, str)) for v in raw):
            raise ConfigError(f"{where}: 'tuple' is not a list of plain values")
        return tuple(raw)
    if kind == "steering":
        if not isinstance(raw, str):
            raise ConfigError(f"{where}: 'steering' is not YAML text")
        return steering_from_state({"steering_yaml": raw})
    if kind != "value":
        raise ConfigError(f"{where}: unknown entry {kind!r}")
    if raw is not None and not isinstance(raw, (bool, int, float, str)):
        raise ConfigError(f"{where}: {type(raw).__name__} is not a plain value")
    hint = typing.get_type_hints(cls).get(f.name)
    if raw is None or hint not in (bool, int, float, str):
        return raw
    want = (int, float) if hint is float else hint
    if isinstance(raw, bool) != (hint is bool) or not isinstance(raw, want):
        raise ConfigError(f"{where} is {type(raw).__name__} {raw!r:.40}; expected {hint.__name__}")
    return raw


def _member_array(arrays: dict[str, np.ndarray], key: Any, where: str) -> np.ndarray:
    if not isinstance(key, str) or key not in arrays:
        raise ConfigError(f"{where}: the array {key!r:.60} is not in the session file")
    array = arrays[key]
    if array.dtype.kind not in "biuf":
        raise ConfigError(f"{where}: the array {key!r:.60} holds {array.dtype}, not numbers")
    return array


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


MAX_JSON_BYTES = 64 << 20       # session.json: configs as text and a frame's plain fields
MAX_SESSION_BYTES = 8 << 30      # the whole file (frames included)


def load_session(path: str | Path) -> WorkbenchSession:
    """Read a session file; raises ConfigError naming the file on anything malformed: not a
    regular file (a FIFO would block), too large, not a ZIP, members outside ``frames/``,
    deeply nested or mistyped JSON, panel configs that fail the config checks (named
    ``session FILE (panel NAME)``), frames whose fields have the wrong types."""
    where = f"session {path}"
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError("not a regular file (a folder, a pipe or a device); a session is a "
                              f"{SUFFIX} file", where)
        if info.st_size > MAX_SESSION_BYTES:
            raise ConfigError(f"the file is {info.st_size:,} bytes; a session may have at most "
                              f"{MAX_SESSION_BYTES:,}", where)
        with zipfile.ZipFile(path) as archive:
            for member in archive.infolist():
                name = member.filename
                if name.startswith("/") or "\\" in name or ".." in name.split("/"):
                    raise ConfigError(f"the member {name!r} names a path outside the session", where)
                if member.file_size > MAX_MEMBER_BYTES:
                    raise ConfigError(f"session member {name} is too large", where)
            if archive.getinfo("session.json").file_size > MAX_JSON_BYTES:
                raise ConfigError(f"session.json is larger than {MAX_JSON_BYTES:,} bytes", where)
            try:
                doc = json.loads(archive.read("session.json").decode("utf-8"))
            except RecursionError:
                raise ConfigError("session.json is nested too deeply", where) from None
            session = _read_doc(doc, archive, where)
            return session
    except ConfigError as exc:
        if exc.source is None:
            exc.source = where
        elif not exc.source.startswith("session"):
            exc.source = f"{where}: {exc.source}"
        raise
    except (OSError, EOFError, KeyError, ValueError, TypeError, AttributeError, RecursionError,
            zipfile.BadZipFile) as exc:
        raise ConfigError(f"cannot read the session: {type(exc).__name__}: {exc}", where) from exc


def _read_doc(doc: Any, archive: zipfile.ZipFile, where: str) -> WorkbenchSession:
    from app.sims.common.simulation import DOMAINS, load_run_config

    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ConfigError("not a BioGPU Studio session file", where)
    if doc.get("version") != VERSION:
        raise ConfigError(f"session format version {doc.get('version')!r} is not {VERSION}", where)
    panels, current = doc.get("panels", {}), doc.get("current", "")
    if not isinstance(panels, dict):
        raise ConfigError(f"'panels' is {type(panels).__name__}, not a mapping", where)
    if not isinstance(current, str):
        raise ConfigError(f"'current' is {type(current).__name__}, not a panel name", where)
    session = WorkbenchSession(current=current)
    for name, entry in panels.items():
        if name not in DOMAINS:
            raise ConfigError(f"panel {name!r:.60} is not a domain ({', '.join(DOMAINS)})", where)
        if not isinstance(entry, dict) or not isinstance(entry.get("config_yaml"), str):
            raise ConfigError(f"panel {name}: 'config_yaml' is missing or not text", where)
        load_run_config(entry["config_yaml"], text=True, source=f"{where} (panel {name})")
        frame = None
        if entry.get("frame") is not None:
            if not isinstance(entry["frame"], dict):
                raise ConfigError(f"panel {name}: 'frame' is not a mapping", where)
            _frame_class(str(entry["frame"].get("class", "")))   # before reading arrays
            with np.load(io.BytesIO(archive.read(f"frames/{name}.npz")), allow_pickle=False) as data:
                arrays = {k: data[k] for k in data.files}
            frame = _decode_frame(entry["frame"], arrays)
        session.panels[name] = PanelState(entry["config_yaml"], frame)
    return session
