"""How long a run will take here: work of the config / this machine's measured rate for the
same domain, engine and model class (plus its setup), as a range, plus the compile when the
engine is cold.

A run's *work* is its domain's measure of it (reaction events from a model of the run,
cell-steps, ...); where the work could only be extrapolated the range is wider. Its
*model class* is everything in the config but its sizes, seeds, names and checkpoint settings:
a rate is only ever used for configs of the same class (an SBML model's rate says nothing about
decay-dimerization's). Rates come from finished runs on this machine (the caller's store: the
GUI's settings) or, for the shipped presets' classes, from :func:`measured_table` (the 2-core VM).
No Qt here.
"""

from __future__ import annotations

import hashlib
import importlib
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


# domain -> (work of a config, its unit, the config keys that only size the work); a work of
# None: the config module's estimated_work(cfg) measures it (see :func:`sized`)
WORK: dict[str, tuple[Callable[[Any], float] | None, str, tuple[str, ...]]] = {
    "ssa": (None, "reaction events",
            ("ensemble.realizations", "ensemble.t_end", "ensemble.samples", "ensemble.snapshot_times")),
    "channel": (lambda c: c.ga.population * c.ga.generations, "evaluations",
                ("ga.population", "ga.generations")),
    "cardiac": (lambda c: _cardiac_cells(c) * c.protocol.t_end / c.solver.dt, "cell-steps",
                ("protocol.t_end", "mesh.nx", "mesh.ny", "mesh.level", "restitution.s2_intervals",
                 "restitution.periods", "restitution.s1_count", "restitution.beats")),
    "network": (lambda c: c.culture.width * c.culture.height * c.run.epochs * c.run.epoch_seconds,
                "neuron-seconds", ("culture.width", "culture.height", "run.epochs", "run.epoch_seconds")),
    "epidermis": (None, "element-steps", ("run.steps", "tissue.cells")),
}
# per domain, config keys a run derives from its size keys (dropped with them where present):
# a restitution protocol writes the pacing stimuli from its intervals
DERIVED: dict[str, dict[str, str]] = {"cardiac": {"restitution.kind": "protocol.stimuli"}}
IGNORED = ("name", "description", "checkpoint", "resume", "seed")   # never change the rate

def measured_table() -> dict[tuple[str, str, str], float]:
    """Work per wall second of whole runs (setup included, compiled engine warm) for the model
    class of each preset named, keyed (domain, engine, preset stem): ``rates.json`` in the
    presets folder (cpu: written by ``scripts/check_estimates.py --calibrate``; cuda: from the
    README's H100 tables)."""
    return _read_table("rates")


def setup_table() -> dict[tuple[str, str, str], float]:
    """Seconds a run of each class takes whatever its size (setup: a model's import, an initial
    relaxation), keyed as :func:`measured_table`; a class not named has none."""
    return _read_table("setup_s")


def _read_table(part: str) -> dict[tuple[str, str, str], float]:
    if part not in _tables:
        from app.sims.common.simulation import PRESETS

        doc = json.loads((PRESETS / RATES_FILE).read_text(encoding="utf-8"))
        _tables[part] = {(key.partition("/")[0], engine, key.partition("/")[2]): float(value)
                         for engine in ("cpu", "cuda") for key, value in doc.get(engine, {}).get(part, {}).items()}
    return _tables[part]


RATES_FILE = "rates.json"
_tables: dict[str, dict[tuple[str, str, str], float]] = {}

# First-use compile of the compiled CPU engine with an empty cache (seconds, 2-core VM, loaded:
# the upper end of the range while the engine is cold; the run goes on meanwhile, slower).
COLD_COMPILE: dict[str, float] = {"ssa": 25.0, "channel": 60.0, "cardiac": 40.0, "network": 30.0,
                                  "epidermis": 100.0}
SPREAD = (0.6, 1.6)        # the range around work / rate: run-to-run and load scatter
EXTRAPOLATED = (0.3, 3.0)  # the range where the work itself was extrapolated (see :func:`sized`)


def engine_kind(backend: str) -> str:
    """'cuda' or 'cpu' (every CPU engine name counts as the CPU for sizing)."""
    return "cuda" if backend == "cuda" else "cpu"


def sized(domain: str, cfg: Any) -> tuple[float, bool]:
    """(the size of ``cfg`` in its domain's work unit, whether it was measured rather than
    extrapolated): the config module's ``estimated_work(cfg)`` where it defines one (a model
    of the work, e.g. the SSA's reaction events), else :data:`WORK`'s formula; 0 when the
    domain has no measure."""
    entry = WORK.get(domain)
    if entry is None:
        return 0.0, True
    try:
        formula = entry[0]
        if formula is None:
            amount, measured = importlib.import_module(type(cfg).__module__).estimated_work(cfg)
            return float(amount), bool(measured)
        return float(formula(cfg)), True
    except Exception:  # noqa: BLE001  (a model the work model cannot run, e.g. an SSA pilot that
        return 0.0, True  # meets a NaN propensity, has no estimate: the run itself says what is wrong)


def work(domain: str, cfg: Any) -> float:
    """The size of ``cfg`` in its domain's work unit (see :func:`sized`)."""
    return sized(domain, cfg)[0]


def _drop(data: Any, path: list[str]) -> None:
    if isinstance(data, dict) and path:
        if len(path) == 1:
            data.pop(path[0], None)
        else:
            _drop(data.get(path[0]), path[1:])


def _get(data: Any, path: list[str]) -> Any:
    for part in path:
        data = data.get(part) if isinstance(data, dict) else None
    return data


def _strip(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: _strip(v) for k, v in data.items() if not any(k.endswith(i) for i in IGNORED)}
    if isinstance(data, list):
        return [_strip(v) for v in data]
    return data


def model_class(domain: str, cfg: Any) -> str:
    """A short key for everything in ``cfg`` but its sizes, seeds, names and checkpoints."""
    data = to_plain(cfg)
    for key, derived in DERIVED.get(domain, {}).items():
        if _get(data, key.split(".")) not in (None, "none"):
            _drop(data, derived.split("."))
    for key in WORK.get(domain, (None, None, ()))[2]:
        _drop(data, key.split("."))
    unit = WORK.get(domain, (None, "", ()))[1]      # a rate in another unit is another rate
    text = json.dumps({"work": unit, "config": _strip(data)}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def rate_key(domain: str, cfg: Any, backend: str) -> str:
    """'domain.engine.class': where a finished run's rate is kept."""
    return f"{domain}.{engine_kind(backend)}.{model_class(domain, cfg)}"


def shipped_rates(domain: str) -> dict[str, tuple[float, float]]:
    """:func:`measured_table` and :func:`setup_table` of ``domain``, (rate, setup seconds) keyed
    by :func:`rate_key` of the presets named there. A preset this install cannot load (a CellML
    model without Myokit, as in the desktop bundle) gives no rate; only the asked domain's
    presets are read."""
    from app.sims.common.config import ConfigError
    from app.sims.common.simulation import load_run_config, presets

    out = {}
    setups = setup_table()
    for (name, engine, stem), rate in measured_table().items():
        found = [p for p in presets(name) if p.stem == stem] if name == domain else []
        if found:
            try:
                key = rate_key(domain, load_run_config(found[0])[1], engine)
            except ConfigError:
                continue
            out[key] = (rate, setups.get((name, engine, stem), 0.0))
    return out


_shipped: dict[str, dict[str, tuple[float, float]]] = {}


def rate_for(domain: str, cfg: Any, backend: str,
             rates: Mapping[str, float] | None = None) -> tuple[float, float] | None:
    """(rate, setup seconds) for ``cfg``'s class on ``backend``: this machine's measured rate
    (``rates``: by :func:`rate_key`; of whole runs, so no separate setup), else the shipped
    one for that class, else None."""
    key = rate_key(domain, cfg, backend)
    if rates and rates.get(key):
        return float(rates[key]), 0.0
    if domain not in _shipped:
        _shipped[domain] = shipped_rates(domain)
    return _shipped[domain].get(key)


def estimate_range(domain: str, cfg: Any, backend: str, rates: Mapping[str, float] | None = None,
                   cold: bool = False) -> tuple[float, float] | None:
    """(low, high) expected wall seconds of ``cfg`` on ``backend``; ``cold``: the compiled CPU
    engine still has to compile (its time is added to the high end). None: no rate measured
    for this model class yet."""
    found = rate_for(domain, cfg, backend, rates)
    amount, measured = sized(domain, cfg)
    if not found or not found[0] or amount <= 0:
        return None
    seconds = found[1] + amount / found[0]
    extra = COLD_COMPILE.get(domain, 0.0) if cold and engine_kind(backend) == "cpu" else 0.0
    low, high = SPREAD if measured else EXTRAPOLATED
    return low * seconds, high * seconds + extra


def estimate_seconds(domain: str, cfg: Any, backend: str,
                     rates: Mapping[str, float] | None = None) -> float | None:
    """The middle of :func:`estimate_range` (warm engine): setup + work / rate, or None."""
    found = rate_for(domain, cfg, backend, rates)
    amount = work(domain, cfg)
    return found[1] + amount / found[0] if found and found[0] and amount > 0 else None


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
