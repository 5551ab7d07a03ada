"""Per-point summary metrics: each domain offers a few in ``app.sims.<domain>.sweep_metrics``.

A domain's module defines ``SEED_KEY`` (the dotted config key replicates vary, or ``None`` for a
deterministic model), ``DEFAULT_METRICS`` and ``METRICS``: name -> ``fn(arrays, summary, options)``
returning a mapping of column name -> number for the tidy table. ``options`` holds the sweep's
``metric_options`` and, under ``"config"``, the point's validated config.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any, Callable, Mapping

import numpy as np

from app.sims.common.config import ConfigError

MetricFn = Callable[[Mapping[str, np.ndarray], Mapping[str, Any], Mapping[str, Any]], dict[str, float]]


def domain_metrics(domain_module: str) -> ModuleType:
    """The ``sweep_metrics`` module of a domain package (e.g. ``app.sims.ssa``)."""
    try:
        return importlib.import_module(f"{domain_module}.sweep_metrics")
    except ModuleNotFoundError as exc:
        raise ConfigError(f"the domain {domain_module} offers no sweep metrics") from exc


def check_metrics(module: ModuleType, names: tuple[str, ...]) -> tuple[str, ...]:
    """The metric names to compute (the domain's defaults when none are named)."""
    names = names or tuple(module.DEFAULT_METRICS)
    unknown = [n for n in names if n not in module.METRICS]
    if unknown:
        raise ConfigError(f"sweep.metrics: unknown metric {unknown[0]!r}; this domain offers: "
                          f"{', '.join(module.METRICS)}")
    return names


def compute(module: ModuleType, names: tuple[str, ...], arrays: Mapping[str, np.ndarray],
            summary: Mapping[str, Any], options: Mapping[str, Any]) -> dict[str, float]:
    """One row of metric columns for a finished run."""
    row: dict[str, float] = {}
    for name in names:
        row.update({k: float(v) for k, v in module.METRICS[name](arrays, summary, options).items()})
    return row
