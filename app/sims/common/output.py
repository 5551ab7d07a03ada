"""Atomic result files: write to a temporary file in the same folder, then rename."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from app.fileio import atomic_write_bytes

__all__ = ["atomic_write_bytes", "save_csv", "save_json", "save_npz", "save_text"]


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
