"""The ``sweep:`` block of a run config, and its expansion into points.

A sweep varies numeric config keys (dotted paths, as ``--set`` takes them)::

    sweep:
      parameters:
        - {key: model.parameters.c2, values: [0.001, 0.002, 0.004]}
        - {key: model.parameters.c3, range: {start: 0.1, stop: 1.0, num: 5, scale: log}}
      combine: grid          # grid (every combination) or zip (element by element)
      replicates: 3          # each point run with seeds seed, seed+1, ...
      metrics: [mean, std]   # names offered by the domain (see ``app.sweep.metrics``)
      metric_options: {at: [5.0, 10.0]}

or samples a box instead of listing values::

    sweep:
      sample: {method: sobol, n: 64, seed: 1}     # lhs or sobol (scipy.stats.qmc)
      parameters:
        - {key: model.parameters.c2, bounds: [0.001, 0.004], scale: log}

Every point is a complete run config; each is validated by its domain before anything runs.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from app.sims.common.config import ConfigError, Document

COMBINES = ("grid", "zip")
SAMPLERS = ("lhs", "sobol")
SCALES = ("linear", "log")
MAX_POINTS = 100_000        # each point is a run and a folder of results; validated one by one before any runs


@dataclass(frozen=True)
class Axis:
    """One swept key and its values (or, when sampling, its bounds)."""

    key: str
    values: tuple[float, ...] = ()
    bounds: tuple[float, float] | None = None
    scale: str = "linear"


@dataclass(frozen=True)
class Point:
    """One run of the sweep: the swept values, the replicate, and its stable identifier."""

    index: int
    replicate: int
    values: Mapping[str, float]
    seed: int | None = None

    @property
    def name(self) -> str:
        return f"p{self.index:05d}-r{self.replicate:02d}"

    def fingerprint(self) -> str:
        """Hash of what decides the run; a finished point is reused only when it matches."""
        text = json.dumps({"values": dict(self.values), "replicate": self.replicate,
                           "seed": self.seed}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class SweepSpec:
    """A validated ``sweep:`` block."""

    axes: tuple[Axis, ...]
    combine: str = "grid"
    sample: Mapping[str, Any] | None = None
    replicates: int = 1
    metrics: tuple[str, ...] = ()
    metric_options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def keys(self) -> list[str]:
        return [a.key for a in self.axes]

    def value_rows(self) -> list[dict[str, float]]:
        """The swept values of every point (before replicates), in a stable order."""
        if self.sample is not None:
            return self._sampled_rows()
        if self.combine == "zip":
            return [dict(zip(self.keys, combo)) for combo in zip(*(a.values for a in self.axes))]
        grids = np.meshgrid(*[np.asarray(a.values) for a in self.axes], indexing="ij")
        flat = [g.ravel() for g in grids]
        return [{k: float(col[i]) for k, col in zip(self.keys, flat)} for i in range(flat[0].size)]

    def _sampled_rows(self) -> list[dict[str, float]]:
        from scipy.stats import qmc

        method, n, seed = self.sample["method"], int(self.sample["n"]), self.sample.get("seed", 0)
        d = len(self.axes)
        sampler = qmc.LatinHypercube(d=d, seed=seed) if method == "lhs" else \
            qmc.Sobol(d=d, scramble=True, seed=seed)
        unit = sampler.random(n)
        rows = []
        for u in unit:
            row = {}
            for a, x in zip(self.axes, u):
                lo, hi = a.bounds
                if a.scale == "log":
                    row[a.key] = float(math.exp(math.log(lo) + x * (math.log(hi) - math.log(lo))))
                else:
                    row[a.key] = float(lo + x * (hi - lo))
            rows.append(row)
        return rows

    def points(self, base_seed: int | None) -> list[Point]:
        """Every (value row, replicate); replicate r runs with ``base_seed + r``."""
        out = []
        for i, row in enumerate(self.value_rows()):
            for r in range(self.replicates):
                seed = None if base_seed is None else (base_seed + r) % (1 << 63)
                out.append(Point(i, r, row, seed))
        return out


def parse_sweep(data: Any, doc: Document, path: tuple = ("sweep",)) -> SweepSpec:
    """Validate the ``sweep:`` mapping; errors name the file, the line and the key."""
    if not isinstance(data, Mapping):
        raise doc.error("'sweep' is a mapping with 'parameters' (and combine, sample, replicates, "
                        "metrics)", path)
    known = {"parameters", "combine", "sample", "replicates", "metrics", "metric_options"}
    for key in data:
        if key not in known:
            raise doc.error(f"unknown key '{key}'; valid keys: {', '.join(sorted(known))}",
                            path + (key,))
    sample = _parse_sample(data.get("sample"), doc, path + ("sample",))
    params = data.get("parameters")
    if not isinstance(params, list) or not params:
        raise doc.error("'parameters' is a non-empty list of {key: ..., values|range|bounds: ...}",
                        path + ("parameters",))
    axes = tuple(_parse_axis(p, doc, path + ("parameters", i), sampling=sample is not None)
                 for i, p in enumerate(params))
    keys = [a.key for a in axes]
    if len(set(keys)) != len(keys):
        raise doc.error("a key is swept twice", path + ("parameters",))
    combine = data.get("combine", "grid")
    if combine not in COMBINES:
        raise doc.error(f"{combine!r} is not one of: {', '.join(COMBINES)}", path + ("combine",))
    if combine == "zip" and sample is None and len({len(a.values) for a in axes}) > 1:
        raise doc.error("combine: zip needs the same number of values for every key",
                        path + ("combine",))
    replicates = data.get("replicates", 1)
    if isinstance(replicates, bool) or not isinstance(replicates, int) or not 1 <= replicates <= 10_000:
        raise doc.error(f"replicates must be a whole number in [1, 10000], got {replicates!r}",
                        path + ("replicates",))
    metrics = data.get("metrics", [])
    if not isinstance(metrics, list) or not all(isinstance(m, str) for m in metrics):
        raise doc.error("'metrics' is a list of metric names", path + ("metrics",))
    options = data.get("metric_options", {})
    if not isinstance(options, Mapping):
        raise doc.error("'metric_options' is a mapping", path + ("metric_options",))
    spec = SweepSpec(axes, combine, sample, replicates, tuple(metrics), dict(options))
    n_rows = sample["n"] if sample is not None else (
        len(axes[0].values) if combine == "zip" else math.prod(len(a.values) for a in axes))
    if n_rows * replicates > MAX_POINTS:
        raise doc.error(f"{n_rows * replicates:,} runs is more than the limit of {MAX_POINTS:,}", path)
    return spec


def _parse_sample(data: Any, doc: Document, path: tuple) -> Mapping[str, Any] | None:
    if data is None:
        return None
    if not isinstance(data, Mapping) or data.get("method") not in SAMPLERS:
        raise doc.error(f"'sample' is {{method: {' | '.join(SAMPLERS)}, n: N, seed: S}}", path)
    n = data.get("n")
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_POINTS:
        raise doc.error(f"sample.n must be a whole number in [1, {MAX_POINTS}], got {n!r}", path + ("n",))
    seed = data.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise doc.error(f"sample.seed must be a whole number >= 0, got {seed!r}", path + ("seed",))
    return {"method": data["method"], "n": n, "seed": seed}


def _number(value: Any, doc: Document, path: tuple) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise doc.error(f"expected a finite number, got {value!r}", path)
    return float(value)


def _parse_axis(data: Any, doc: Document, path: tuple, sampling: bool) -> Axis:
    if not isinstance(data, Mapping) or not isinstance(data.get("key"), str):
        raise doc.error("each swept parameter is a mapping with 'key' (a dotted config path)", path)
    key = data["key"]
    if not all(part.isidentifier() or part.isdigit() for part in key.split(".")):
        raise doc.error(f"{key!r} is not a dotted config path", path + ("key",))
    if key.split(".")[0] in ("domain", "sweep"):
        raise doc.error(f"'{key}' cannot be swept", path + ("key",))
    scale = data.get("scale", data.get("range", {}).get("scale", "linear")
                     if isinstance(data.get("range"), Mapping) else "linear")
    if scale not in SCALES:
        raise doc.error(f"scale {scale!r} is not one of: {', '.join(SCALES)}", path + ("scale",))
    given = [k for k in ("values", "range", "bounds") if k in data]
    wanted = "bounds" if sampling else "values or range"
    if len(given) != 1 or (sampling != (given[0] == "bounds")):
        raise doc.error(f"give exactly one of {wanted} for '{key}'", path)
    extra = set(data) - {"key", "values", "range", "bounds", "scale"}
    if extra:
        raise doc.error(f"unknown key '{sorted(extra)[0]}'", path + (sorted(extra)[0],))
    if sampling:
        b = data["bounds"]
        if not isinstance(b, list) or len(b) != 2:
            raise doc.error("bounds is [low, high]", path + ("bounds",))
        lo, hi = (_number(v, doc, path + ("bounds", i)) for i, v in enumerate(b))
        if not lo < hi or (scale == "log" and lo <= 0):
            raise doc.error(f"bounds [{lo:g}, {hi:g}] need low < high (and low > 0 on a log scale)",
                            path + ("bounds",))
        return Axis(key, (), (lo, hi), scale)
    if "values" in data:
        vals = data["values"]
        if not isinstance(vals, list) or not vals:
            raise doc.error("values is a non-empty list of numbers", path + ("values",))
        return Axis(key, tuple(_number(v, doc, path + ("values", i)) for i, v in enumerate(vals)))
    rng = data["range"]
    if not isinstance(rng, Mapping) or set(rng) - {"start", "stop", "num", "scale"}:
        raise doc.error("range is {start: A, stop: B, num: N, scale: linear|log}", path + ("range",))
    start = _number(rng.get("start"), doc, path + ("range", "start"))
    stop = _number(rng.get("stop"), doc, path + ("range", "stop"))
    num = rng.get("num")
    if isinstance(num, bool) or not isinstance(num, int) or not 1 <= num <= MAX_POINTS:
        raise doc.error(f"range.num must be a whole number in [1, {MAX_POINTS}], got {num!r}",
                        path + ("range", "num"))
    if scale == "log":
        if start <= 0 or stop <= 0:
            raise doc.error("a log range needs start > 0 and stop > 0", path + ("range",))
        values = np.geomspace(start, stop, num)
    else:
        values = np.linspace(start, stop, num)
    return Axis(key, tuple(float(v) for v in values), None, scale)


def apply_point(data: Mapping[str, Any], point: Point, seed_key: str | None) -> dict:
    """A deep copy of the plain config ``data`` with the point's values (and seed) set."""
    out = copy.deepcopy(dict(data))
    items = dict(point.values)
    if seed_key is not None and point.seed is not None:
        items[seed_key] = point.seed
    for dotted, value in items.items():
        target = out
        keys = dotted.split(".")
        for k in keys[:-1]:
            target = target.setdefault(k, {})
            if not isinstance(target, dict):
                raise ConfigError(f"cannot set '{dotted}': '{k}' is not a mapping")
        old = target.get(keys[-1])
        # whole numbers stay whole where the config holds an integer (sizes, counts, seeds)
        if isinstance(old, int) and not isinstance(old, bool) and float(value).is_integer():
            value = int(value)
        target[keys[-1]] = value
    return out


def get_path(data: Mapping[str, Any], dotted: str, default: Any = None) -> Any:
    """The value at a dotted path of plain data, or ``default``."""
    target: Any = data
    for k in dotted.split("."):
        if not isinstance(target, Mapping) or k not in target:
            return default
        target = target[k]
    return target
