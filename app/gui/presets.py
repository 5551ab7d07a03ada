"""Which preset a panel opens with on its engine, and how long a preset will take there.

``resources/presets/roles.yaml`` names, per domain, the preset for the CPU engine, for CUDA,
the paper-scale run and a lesson. A run's *work* is a domain's size measure of its config
(realization-seconds, cell-steps, ...); a finished run records work per wall second for its
domain and engine, and :func:`estimate_seconds` divides another config's work by that rate.
Before any run the rates measured for this module (below) stand in. No Qt here.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

from app.sims.common.config import load_yaml
from app.sims.common.simulation import PRESETS, load_run_config, presets

ROLES = ("cpu", "cuda", "paper", "lesson")


def _cardiac_cells(cfg: Any) -> int:
    mesh = cfg.mesh
    if mesh.kind == "sheet":
        return mesh.nx * mesh.ny
    if mesh.kind == "sphere":
        return 10 * 4 ** mesh.level + 2       # geodesic sphere vertices
    if mesh.kind == "file":
        from app.sims.cardiac.config import n_cells
        return n_cells(mesh)
    return 1


# domain -> (work of a config, its unit). Rough by design: a guide to minutes vs hours.
WORK: dict[str, tuple[Callable[[Any], float], str]] = {
    "ssa": (lambda c: c.ensemble.realizations * c.ensemble.t_end, "realization·time units"),
    "channel": (lambda c: c.ga.population * c.ga.generations, "evaluations"),
    "cardiac": (lambda c: _cardiac_cells(c) * c.protocol.t_end / c.solver.dt, "cell-steps"),
    "network": (lambda c: c.culture.width * c.culture.height * c.run.epochs * c.run.epoch_seconds,
                "neuron-seconds"),
    "epidermis": (lambda c: c.tissue.cells * c.tissue.elements * c.run.steps, "element-steps"),
}

# Work per wall second measured with `python -m app run PRESET --backend cpu` (CPU: the compiled
# engines on the 2-core VM; cardiac, network and epidermis again on 2026-11-24 after their
# engines and OMP_WAIT_POLICY sped them up 1.6-19x; cardiac and epidermis on their resized CPU
# defaults, where a growing tissue costs more per step late in a long run) and from the
# README's H100 tables (CUDA), used until a run here measures its own.
MEASURED_RATES: dict[tuple[str, str], float] = {
    ("ssa", "cpu"): 740.0,                  # decay-dimerization, 512 x 10 in 6.9 s (8.1 s loaded)
    ("ssa", "cuda"): 2.8e6,                 # 65,536 x 10 in 0.235 s
    ("channel", "cpu"): 1.9e4,              # Model B, 12,500 points (12.5 s: 2.7e4)
    ("channel", "cuda"): 1.1e6 * 62.2,      # 1.12e6 individuals at 62 generations/s
    ("cardiac", "cpu"): 10000 * 15000 / 10.2,  # 100 x 100 sheet, 15,000 steps in 10.2 s (was 1.9e6)
    ("cardiac", "cuda"): 163842 * 6000 / 0.185,
    ("network", "cpu"): 100 * 1000 / 8.1,   # 10 x 10 culture, 1,000 s in 8.1 s (was 46)
    ("network", "cuda"): 10000 * 58.0,      # 100 x 100 at 58 x real time through the app
    ("epidermis", "cpu"): 16 * 20 * 38000 / 12.3,  # the lesson, 16 -> 160 cells, in 12.3 s
    ("epidermis", "cuda"): 100 * 20 * 130000 / 23.0,
}


def engine_kind(backend: str) -> str:
    """'cuda' or 'cpu' (every CPU engine name counts as the CPU for sizing)."""
    return "cuda" if backend == "cuda" else "cpu"


def roles(domain: str) -> dict[str, str]:
    """{role: preset stem} of ``domain`` from roles.yaml ({} when it names none)."""
    data = load_yaml(PRESETS / "roles.yaml").data
    entry = data.get(domain, {}) if isinstance(data, dict) else {}
    return {k: str(v) for k, v in entry.items() if k in ROLES}


def preset_for(domain: str, role: str) -> Path | None:
    """The shipped preset file of ``domain`` for ``role`` (None if not named or missing)."""
    stem = roles(domain).get(role)
    if stem is None:
        return None
    found = [p for p in presets(domain) if p.stem == stem]
    return found[0] if found else None


def preset_config(path: Path) -> Any:
    """The run config of the preset file ``path``, read once per version of the file (the
    estimates after every run and every load ask for the paper-scale preset's)."""
    return _config_of(str(path), path.stat().st_mtime_ns)


@lru_cache(maxsize=32)
def _config_of(path: str, version: int) -> Any:
    return load_run_config(path)[1]


def default_for_engine(domain: str, backend: str) -> Path:
    """The preset a panel opens with on ``backend``: its role's file, else the domain's first."""
    chosen = preset_for(domain, engine_kind(backend))
    return chosen if chosen is not None else presets(domain)[0]


def work(domain: str, cfg: Any) -> float:
    """The size of ``cfg`` in its domain's work unit (0 when the domain has no measure)."""
    entry = WORK.get(domain)
    if entry is None:
        return 0.0
    try:
        return float(entry[0](cfg))
    except (AttributeError, TypeError, ValueError):
        return 0.0


def estimate_seconds(domain: str, cfg: Any, backend: str,
                     rates: dict[tuple[str, str], float] | None = None) -> float | None:
    """Expected wall seconds of ``cfg`` on ``backend`` from a measured rate, or None."""
    key = (domain, engine_kind(backend))
    rate = (rates or {}).get(key) or MEASURED_RATES.get(key)
    amount = work(domain, cfg)
    if not rate or amount <= 0:
        return None
    return amount / rate


def format_duration(seconds: float) -> str:
    """'about 40 s', 'about 7 min', 'about 3.5 h', 'about 2 days'."""
    if seconds < 90:
        return f"about {max(seconds, 1):.0f} s"
    if seconds < 90 * 60:
        return f"about {seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"about {seconds / 3600:.1f} h"
    return f"about {seconds / 86400:.0f} days"
