"""How long a run will take here: work of the config / this machine's measured rate for the
same domain, engine and model class, as a range, plus the compile when the engine is cold.

A run's *work* is its domain's size measure (realization·time units, cell-steps, ...). Its
*model class* is everything in the config but its sizes, seeds, names and checkpoint settings:
a rate is only ever used for configs of the same class (an SBML model's rate says nothing about
decay-dimerization's). Rates come from finished runs on this machine (the caller's store: the
GUI's settings) or, for the shipped presets' classes, from :data:`MEASURED` (the 2-core VM).
No Qt here.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from typing import Any

from app.sims.common.config import to_plain


def _cardiac_cells(cfg: Any) -> int:
    mesh = cfg.mesh
    if mesh.kind == "sheet":
        return mesh.nx * mesh.ny
    if mesh.kind == "sphere":
        return 10 * 4 ** mesh.level + 2       # geodesic sphere vertices
    if mesh.kind == "file":
        return 0                              # known only once the file is read: no estimate
    return 1


# domain -> (work of a config, its unit, the config keys that only size the work)
WORK: dict[str, tuple[Callable[[Any], float], str, tuple[str, ...]]] = {
    "ssa": (lambda c: c.ensemble.realizations * c.ensemble.t_end, "realization·time units",
            ("ensemble.realizations", "ensemble.t_end", "ensemble.samples", "ensemble.snapshot_times")),
    "channel": (lambda c: c.ga.population * c.ga.generations, "evaluations",
                ("ga.population", "ga.generations")),
    "cardiac": (lambda c: _cardiac_cells(c) * c.protocol.t_end / c.solver.dt, "cell-steps",
                ("protocol.t_end", "mesh.nx", "mesh.ny", "mesh.level")),
    "network": (lambda c: c.culture.width * c.culture.height * c.run.epochs * c.run.epoch_seconds,
                "neuron-seconds", ("culture.width", "culture.height", "run.epochs")),
    "epidermis": (lambda c: c.tissue.cells * c.tissue.elements * c.run.steps, "element-steps",
                  ("run.steps", "tissue.cells")),
}
IGNORED = ("name", "description", "checkpoint", "resume", "seed")   # never change the rate

# Work per wall second of whole runs (`python -m app run PRESET --backend cpu`: setup included,
# compiled engine warm) on the 2-core VM, and from the README's H100 tables (CUDA), for the
# model class of the preset named; keyed (domain, engine, preset stem).
MEASURED: dict[tuple[str, str, str], float] = {
    ("ssa", "cpu", "00-decay-dimerization"): 740.0,       # 512 x 10 in 6.9 s
    ("ssa", "cuda", "decay-dimerization-paper"): 2.8e6,   # 65,536 x 10 in 0.235 s
    ("channel", "cpu", "00-model-b-surrogate"): 1.9e4,    # Model B, 12,500 points
    ("channel", "cuda", "00-model-b-surrogate"): 1.1e6 * 62.2,
    ("cardiac", "cpu", "03-sheet-spiral-s1s2-ach-small"): 10000 * 15000 / 10.2,
    ("cardiac", "cuda", "01-sphere-paper"): 163842 * 6000 / 0.185,
    ("network", "cpu", "00-development-10x10-fast"): 100 * 1000 / 8.1,
    ("network", "cuda", "development-100x100"): 10000 * 58.0,
    ("epidermis", "cpu", "lesson-first-divisions"): 16 * 20 * 38000 / 12.3,
    ("epidermis", "cuda", "00-full-100-cells"): 100 * 20 * 130000 / 23.0,
}
# First-use compile of the compiled CPU engine with an empty cache (seconds, 2-core VM, loaded:
# the upper end of the range while the engine is cold; the run goes on meanwhile, slower).
COLD_COMPILE: dict[str, float] = {"ssa": 25.0, "channel": 60.0, "cardiac": 40.0, "network": 30.0,
                                  "epidermis": 100.0}
SPREAD = (0.6, 1.6)        # the range around work / rate: run-to-run and load scatter


def engine_kind(backend: str) -> str:
    """'cuda' or 'cpu' (every CPU engine name counts as the CPU for sizing)."""
    return "cuda" if backend == "cuda" else "cpu"


def work(domain: str, cfg: Any) -> float:
    """The size of ``cfg`` in its domain's work unit (0 when the domain has no measure)."""
    entry = WORK.get(domain)
    if entry is None:
        return 0.0
    try:
        return float(entry[0](cfg))
    except (AttributeError, TypeError, ValueError):
        return 0.0


def _drop(data: Any, path: list[str]) -> None:
    if isinstance(data, dict) and path:
        if len(path) == 1:
            data.pop(path[0], None)
        else:
            _drop(data.get(path[0]), path[1:])


def _strip(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: _strip(v) for k, v in data.items() if not any(k.endswith(i) for i in IGNORED)}
    if isinstance(data, list):
        return [_strip(v) for v in data]
    return data


def model_class(domain: str, cfg: Any) -> str:
    """A short key for everything in ``cfg`` but its sizes, seeds, names and checkpoints."""
    data = to_plain(cfg)
    for key in WORK.get(domain, (None, None, ()))[2]:
        _drop(data, key.split("."))
    text = json.dumps(_strip(data), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def rate_key(domain: str, cfg: Any, backend: str) -> str:
    """'domain.engine.class': where a finished run's rate is kept."""
    return f"{domain}.{engine_kind(backend)}.{model_class(domain, cfg)}"


def shipped_rates(domain: str) -> dict[str, float]:
    """:data:`MEASURED` of ``domain``, keyed by :func:`rate_key` of the presets named there. A
    preset this install cannot load (a CellML model without Myokit, as in the desktop bundle)
    gives no rate; only the asked domain's presets are read."""
    from app.sims.common.config import ConfigError
    from app.sims.common.simulation import load_run_config, presets

    out = {}
    for (name, engine, stem), rate in MEASURED.items():
        found = [p for p in presets(name) if p.stem == stem] if name == domain else []
        if found:
            try:
                out[rate_key(domain, load_run_config(found[0])[1], engine)] = rate
            except ConfigError:
                continue
    return out


_shipped: dict[str, dict[str, float]] = {}


def rate_for(domain: str, cfg: Any, backend: str, rates: Mapping[str, float] | None = None) -> float | None:
    """This machine's measured rate for ``cfg``'s class on ``backend`` (``rates``: by
    :func:`rate_key`), else the shipped one for that class, else None."""
    key = rate_key(domain, cfg, backend)
    if rates and rates.get(key):
        return float(rates[key])
    if domain not in _shipped:
        _shipped[domain] = shipped_rates(domain)
    return _shipped[domain].get(key)


def estimate_range(domain: str, cfg: Any, backend: str, rates: Mapping[str, float] | None = None,
                   cold: bool = False) -> tuple[float, float] | None:
    """(low, high) expected wall seconds of ``cfg`` on ``backend``; ``cold``: the compiled CPU
    engine still has to compile (its time is added to the high end). None: no rate measured
    for this model class yet."""
    rate = rate_for(domain, cfg, backend, rates)
    amount = work(domain, cfg)
    if not rate or amount <= 0:
        return None
    seconds = amount / rate
    extra = COLD_COMPILE.get(domain, 0.0) if cold and engine_kind(backend) == "cpu" else 0.0
    return SPREAD[0] * seconds, SPREAD[1] * seconds + extra


def estimate_seconds(domain: str, cfg: Any, backend: str,
                     rates: Mapping[str, float] | None = None) -> float | None:
    """The middle of :func:`estimate_range` (warm engine): work / measured rate, or None."""
    rate = rate_for(domain, cfg, backend, rates)
    amount = work(domain, cfg)
    return amount / rate if rate and amount > 0 else None


def sweep_seconds(domain: str, configs: list[Any], backend: str,
                  rates: Mapping[str, float] | None = None) -> tuple[float, int]:
    """(seconds, unmeasured): the sum of :func:`estimate_seconds` over a sweep's point configs
    run one after another here, and how many points have no estimate (not in the sum)."""
    total, unmeasured = 0.0, 0
    for cfg in configs:
        seconds = estimate_seconds(domain, cfg, backend, rates)
        if seconds is None:
            unmeasured += 1
        else:
            total += seconds
    return total, unmeasured


def format_duration(seconds: float) -> str:
    """'about 40 s', 'about 7 min', 'about 3.5 h', 'about 2 days'."""
    return "about " + _short(seconds)


def _short(seconds: float) -> str:
    if seconds < 90:
        return f"{max(seconds, 1):.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.0f} days"


def format_range(low: float, high: float) -> str:
    """'5-14 s', '2 min-1.1 h' (one unit where both share it)."""
    a, b = _short(low), _short(high)
    ua, ub = a.split(" ", 1)[1], b.split(" ", 1)[1]
    if a == b:
        return a
    return f"{a.split(' ')[0]}-{b}" if ua == ub else f"{a}-{b}"
