"""Live steering: what a domain lets a user change while it runs, and the record of each change.

A domain declares its steerable keys once, in its config module, as ``steerables(cfg)``: a
tuple of :class:`Steerable` (a parameter with its type, range and scale, or a gesture that
takes a region). :meth:`Session.steer <app.sims.common.session.Session.steer>` checks a change
against them at once (:func:`check_change`), the simulation applies it at its next step
boundary and records it as a :class:`SteeringEvent` whose ``at`` is that boundary in the
domain's own step counter. The run's ``config.yaml`` carries the events as its ``steering:``
list; running that file applies each event exactly at its ``at`` and so reproduces the run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from app.sims.common.config import ConfigError, Document, dump_yaml, parse_yaml, spec

REGION_KINDS = ("brush", "indices")
MAX_REGION_INDICES = 1 << 24


@dataclass(frozen=True)
class SteeringEvent:
    """One change of a running simulation.

    ``at`` is the step boundary where it takes effect, in the domain's counter (SSA: sample
    index; cardiac: time step; network: step; epidermis: step; channel: generation); ``old``
    is the value it replaced (None for a gesture); ``region`` the painted region of a gesture:
    ``{'kind': 'brush', 'centre': [x, y(, z)], 'radius': r}`` or ``{'kind': 'indices',
    'indices': [...]}`` (nodes, cells or neurons)."""

    at: int = field(metadata=spec(range=(0, 2**62), doc="step boundary where the change takes effect"))
    key: str
    value: Any = None
    old: Any = None
    region: dict[str, Any] | None = None
    t: float | None = None


@dataclass(frozen=True)
class Steerable:
    """A key a running simulation takes: ``kind`` is float, int, bool, text, choice or gesture (a
    gesture's value is a number or None, and it needs a ``region`` when ``region`` is set);
    ``live`` False: the change needs a restart, so it is refused while running."""

    key: str
    kind: str
    range: tuple[float, float] | None = None
    log: bool = False
    choices: tuple[str, ...] = ()
    live: bool = True
    region: bool = False
    doc: str = ""
    unit: str = ""


def config_steerables(obj: Any, prefix: str, live: bool = True) -> list[Steerable]:
    """A :class:`Steerable` per leaf field of config dataclass ``obj`` (numbers, flags, text and
    choices), its range and doc from the field's :func:`~app.sims.common.config.spec`, keyed by
    dotted path under ``prefix``."""
    import dataclasses
    import typing

    out: list[Steerable] = []
    hints = typing.get_type_hints(type(obj))
    for f in dataclasses.fields(obj):
        value, tp, meta = getattr(obj, f.name), hints[f.name], f.metadata
        key = f"{prefix}.{f.name}"
        if dataclasses.is_dataclass(value):
            out += config_steerables(value, key, live)
            continue
        kind = ("choice" if meta.get("choices") else "bool" if tp is bool else "int" if tp is int
                else "float" if tp is float else "text" if tp is str else None)
        if kind is None:
            continue
        rng = meta.get("range")
        out.append(Steerable(key, kind, rng, log=bool(rng and rng[0] > 0 and rng[1] / rng[0] >= 1e3),
                             choices=tuple(meta.get("choices") or ()), live=live,
                             doc=meta.get("doc", ""), unit=meta.get("unit", "")))
    return out


def by_key(steerables: Iterable[Steerable]) -> dict[str, Steerable]:
    """The declared keys as a mapping."""
    return {s.key: s for s in steerables}


def check_change(specs: Mapping[str, Steerable], key: Any, value: Any,
                 region: Mapping[str, Any] | None = None) -> tuple[Any, dict[str, Any] | None]:
    """``(value, region)`` checked and normalised against the declared ``specs``; ConfigError
    naming the key and the value otherwise."""
    if not isinstance(key, str) or key not in specs:
        valid = ", ".join(specs) or "none (this run takes no changes while it runs)"
        raise ConfigError(f"'{key}' cannot be steered; steerable keys: {valid}", path=("steering",))
    s = specs[key]
    if not s.live:
        raise ConfigError(f"'{key}' needs a restart (it changes compiled code or array sizes); "
                          "stop the run, edit it and run again", path=("steering", key))
    value = _checked_value(s, value)
    if s.region:
        if region is None:
            raise ConfigError(f"'{key}' needs a region (a brush or a list of indices)",
                              path=("steering", key))
        region = check_region(region, key)
    elif region is not None:
        raise ConfigError(f"'{key}' takes no region", path=("steering", key))
    return value, region


def _checked_value(s: Steerable, value: Any) -> Any:
    where = ("steering", s.key)
    if s.kind == "bool":
        if not isinstance(value, bool):
            raise ConfigError(f"'{s.key}' is true or false, not {value!r}", path=where)
        return value
    if s.kind == "text":
        if not isinstance(value, str):
            raise ConfigError(f"'{s.key}' is text, not {value!r}", path=where)
        return value
    if s.kind == "choice":
        if value not in s.choices:
            raise ConfigError(f"'{s.key}': {value!r} is not one of {', '.join(s.choices)}", path=where)
        return value
    if s.kind == "gesture" and value is None:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ConfigError(f"'{s.key}' is a number, not {value!r}", path=where)
    if s.kind == "int":
        if float(value) != int(value):
            raise ConfigError(f"'{s.key}' is a whole number, not {value!r}", path=where)
        value = int(value)
    else:
        value = float(value)
        if not math.isfinite(value):
            raise ConfigError(f"'{s.key}' must be finite, not {value!r}", path=where)
    if s.range is not None and not s.range[0] <= value <= s.range[1]:
        raise ConfigError(f"'{s.key}' = {value!r} is out of range; valid range is "
                          f"[{s.range[0]:g}, {s.range[1]:g}]", path=where)
    return value


def check_region(region: Any, key: str) -> dict[str, Any]:
    """A region as plain data: a brush (centre of 2 or 3 finite numbers, radius > 0) or a list
    of non-negative indices; ConfigError otherwise."""
    where = ("steering", key, "region")
    if not isinstance(region, Mapping) or region.get("kind") not in REGION_KINDS:
        raise ConfigError(f"a region is a mapping with kind one of {', '.join(REGION_KINDS)}, "
                          f"not {region!r}"[:200], path=where)
    if region["kind"] == "brush":
        extra = set(region) - {"kind", "centre", "radius"}
        centre: Any = region.get("centre")
        radius: Any = region.get("radius")
        ok = (not extra and isinstance(centre, (list, tuple)) and len(centre) in (2, 3)
              and all(_finite(c) for c in centre) and _finite(radius) and radius > 0)
        if not ok:
            raise ConfigError("a brush is {kind: brush, centre: [x, y] or [x, y, z], radius: r > 0}, "
                              f"not {dict(region)!r}"[:200], path=where)
        return {"kind": "brush", "centre": [float(c) for c in centre], "radius": float(radius)}
    indices = region.get("indices")
    if (set(region) - {"kind", "indices"} or not isinstance(indices, (list, tuple, np.ndarray))
            or len(indices) > MAX_REGION_INDICES
            or not all(isinstance(i, (int, np.integer)) and not isinstance(i, bool) and i >= 0
                       for i in indices)):
        raise ConfigError("an index region is {kind: indices, indices: [non-negative whole "
                          f"numbers]}}, not {dict(region)!r}"[:200], path=where)
    return {"kind": "indices", "indices": [int(i) for i in indices]}


def _finite(x: Any) -> bool:
    return (isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool)
            and math.isfinite(float(x)))


def check_steering(events: Sequence[SteeringEvent], specs: Mapping[str, Steerable],
                   doc: Document) -> tuple[SteeringEvent, ...]:
    """A config's ``steering:`` list checked against the domain's keys; errors point at the
    event's line."""
    out = []
    for i, event in enumerate(events):
        try:
            value, region = check_change(specs, event.key, event.value, event.region)
        except ConfigError as exc:
            field_name = "region" if "region" in exc.path else "value" if event.key in specs else "key"
            raise doc.error(exc.message, ("steering", i, field_name)) from None
        out.append(SteeringEvent(event.at, event.key, value, event.old, region, event.t))
    return tuple(out)


def region_mask(region: Mapping[str, Any], points: np.ndarray) -> np.ndarray:
    """Boolean mask of the rows of ``points`` (N, 2 or 3) inside ``region`` (indices out of
    range: ConfigError naming the largest)."""
    n = len(points)
    if region["kind"] == "indices":
        idx = np.asarray(region["indices"], np.int64)
        if idx.size and idx.max() >= n:
            raise ConfigError(f"region index {int(idx.max())} is out of range: there are {n}",
                              path=("steering", "region"))
        mask = np.zeros(n, bool)
        mask[idx] = True
        return mask
    centre = np.asarray(region["centre"], np.float64)
    pts = np.asarray(points, np.float64)
    d = min(len(centre), pts.shape[1])
    return ((pts[:, :d] - centre[:d]) ** 2).sum(axis=1) <= region["radius"] ** 2


def steering_state(events: Sequence[SteeringEvent]) -> dict[str, np.ndarray]:
    """The applied events' part of a checkpoint (YAML text)."""
    return {"steering_yaml": np.array(dump_yaml(list(events)))}


def steering_from_state(state: Mapping[str, Any]) -> tuple[SteeringEvent, ...]:
    """The applied events a checkpoint carries (none in one written before steering existed)."""
    from app.sims.common.config import convert

    if "steering_yaml" not in state:
        return ()
    doc = parse_yaml(str(state["steering_yaml"]), "<checkpoint steering>")
    return tuple(convert(tuple[SteeringEvent, ...], doc.data or [], doc, ()))
