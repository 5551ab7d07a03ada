"""Which preset a panel opens with on its engine, and how long a preset will take there.

``resources/presets/roles.yaml`` names, per domain, the preset for the CPU engine, for CUDA,
the paper-scale run and a lesson. Estimates: :mod:`app.sims.common.estimate` (re-exported here). No Qt here.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from app.sims.common.config import load_yaml
from app.sims.common.estimate import (engine_kind, estimate_range, estimate_seconds, format_duration,  # noqa: F401
                                      format_range, work)
from app.sims.common.simulation import PRESETS, load_run_config, presets

ROLES = ("cpu", "cuda", "paper", "lesson")


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
