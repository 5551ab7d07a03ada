"""What a checkpoint's arrays must look like, checked on load before any array is used.

Each domain lists its arrays next to its ``state()``/``restore()`` as :class:`ArraySpec` rows
whose shapes and ranges come from the config the checkpoint carries (neurons, cells, species,
realizations). :func:`check_arrays` refuses a missing array, a wrong rank or shape, text where
numbers belong, NaN or infinity, fractional values in an integer array and values out of range,
each with a :class:`~app.sims.common.checkpoint.CheckpointError` naming the file and the array.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from app.sims.common.checkpoint import CheckpointError
from app.sims.common.config import ConfigError, Document, parse_yaml

KINDS = {"int": "iu", "float": "fiu", "bool": "b"}


@dataclass(frozen=True)
class ArraySpec:
    """One checkpoint array: its ``kind`` (int, float or bool), its ``shape`` (None: any
    length along that axis) and the inclusive range of its values."""

    name: str
    kind: str
    shape: tuple[int | None, ...] | None = ()     # None: any rank
    lo: float | None = None
    hi: float | None = None
    optional: bool = False
    finite: bool = True          # False: NaN and infinities are states (e.g. "not activated yet")


def check_arrays(state: Mapping[str, Any], specs: Sequence[ArraySpec], path: str | Path | None) -> None:
    """Raise :class:`CheckpointError` for the first array of ``state`` that breaks its spec."""
    where = path or "<state>"
    for spec in specs:
        if spec.name not in state:
            if spec.optional:
                continue
            raise CheckpointError(where, f"the array '{spec.name}' is missing (the checkpoint is "
                                  "damaged or was edited)")
        problem = _problem(np.asarray(state[spec.name]), spec)
        if problem:
            raise CheckpointError(where, f"the array '{spec.name}' {problem} (the checkpoint is "
                                  "damaged or was edited)")


def _problem(a: np.ndarray, spec: ArraySpec) -> str | None:
    if spec.shape is not None and (a.ndim != len(spec.shape) or any(
            d is not None and d != n for d, n in zip(spec.shape, a.shape))):
        want = "x".join("any" if d is None else str(d) for d in spec.shape) or "a single value"
        return f"has shape {a.shape or 'a single value'}; expected {want}"
    if a.dtype.kind not in "biuf":             # text, objects, complex numbers
        return f"holds {a.dtype} values; expected {spec.kind} values"
    if a.dtype.kind not in KINDS[spec.kind]:
        if spec.kind == "int" and a.dtype.kind == "f":
            finite = np.isfinite(a)
            if not finite.all():
                return f"holds {a[~finite].flat[0].item()} in an integer array"
            frac = a != np.round(a)
            if frac.any():
                return f"holds the fractional value {a[frac].flat[0].item()!r} in an integer array"
            if a.size and (abs(a).max() >= 2.0**63):
                return f"holds {abs(a).max():.3g}, beyond 64-bit integers"
        else:
            return f"holds {a.dtype} values; expected {spec.kind} values"
    if a.dtype.kind == "f" and spec.finite:
        bad = ~np.isfinite(a)
        if bad.any():
            index = tuple(int(i) for i in np.argwhere(bad)[0])
            return f"holds {a[index].item()} at index {index}"
    if a.size and a.dtype.kind != "b":
        values = a[np.isfinite(a)] if a.dtype.kind == "f" else a
        if values.size and spec.lo is not None and values.min() < spec.lo:
            return f"holds {values.min().item()!r}, below its least allowed value {spec.lo:g}"
        if values.size and spec.hi is not None and values.max() > spec.hi:
            return f"holds {values.max().item()!r}, above its largest allowed value {spec.hi:g}"
    return None


def checked_config(state: Mapping[str, Any], load_config: Callable[[Document], Any],
                   path: str | Path | None) -> Any:
    """The config embedded in a checkpoint, validated like a user's file; its errors name the
    checkpoint (and the line inside its ``config_yaml`` entry)."""
    where = f"checkpoint {path or '<state>'} (its embedded config)"
    if "config_yaml" not in state:
        raise CheckpointError(path or "<state>", "the embedded config (array 'config_yaml') is missing")
    raw = np.asarray(state["config_yaml"])
    if raw.shape != () or raw.dtype.kind not in "US":
        raise CheckpointError(path or "<state>", f"the embedded config 'config_yaml' is {raw.dtype} "
                              f"of shape {raw.shape}, not text")
    try:
        return load_config(parse_yaml(str(raw), where))
    except CheckpointError:
        raise
    except ConfigError as exc:
        if exc.source is None or exc.source.startswith("<"):
            exc.source = where
        raise


def like(reference: Mapping[str, Any], prefix: str = "", free: tuple[str, ...] = (),
         nonfinite: tuple[str, ...] = ()) -> list[ArraySpec]:
    """Specs from a freshly built engine's own ``state()`` (same names, kinds and shapes);
    ``free`` arrays may differ in their first axis (recordings that grow), ``nonfinite`` ones
    may hold NaN or infinities."""
    out = []
    for name, value in reference.items():
        a = np.asarray(value)
        kind = "bool" if a.dtype.kind == "b" else "int" if a.dtype.kind in "iu" else "float"
        shape = None if name in free else a.shape
        out.append(ArraySpec(prefix + name, kind, shape, finite=name not in nonfinite))
    return out
