"""SSA sweep metrics: ensemble mean and SD of every species at chosen times, and histograms."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

SEED_KEY = "ensemble.seed"
DEFAULT_METRICS = ("mean", "std")


def _time_rows(arrays: Mapping[str, np.ndarray], options: Mapping[str, Any]) -> list[tuple[float, int]]:
    """(time, sample row) for each ``options['at']`` time (default: the last sample)."""
    times = np.asarray(arrays["times"], dtype=float)
    at = options.get("at") or [float(times[-1])]
    return [(float(t), int(np.argmin(np.abs(times - float(t))))) for t in at]


def _per_species(key: str, arrays, options) -> dict[str, float]:
    values = np.asarray(arrays[key], dtype=float)
    return {f"{key}_{name}_t{t:g}": float(values[row, j])
            for t, row in _time_rows(arrays, options)
            for j, name in enumerate(np.asarray(arrays["species"]).tolist())}


def mean(arrays, summary, options) -> dict[str, float]:
    """Ensemble mean of each species at ``metric_options.at`` (default t_end)."""
    return _per_species("mean", arrays, options)


def std(arrays, summary, options) -> dict[str, float]:
    """Ensemble standard deviation of each species at ``metric_options.at`` (default t_end)."""
    return _per_species("std", arrays, options)


def histogram(arrays, summary, options) -> dict[str, float]:
    """Quartiles of the final counts of each histogram species (the whole law is in results.npz)."""
    final = np.asarray(arrays["final"], dtype=float)
    species = np.asarray(arrays["species"]).tolist()
    out = {}
    for name in np.asarray(arrays["hist_species"]).tolist():
        col = final[:, species.index(name)]
        for q in (25, 50, 75):
            out[f"final_{name}_q{q}"] = float(np.percentile(col, q))
    return out


def throughput(arrays, summary, options) -> dict[str, float]:
    """Reactions per wall second of the run."""
    return {"reactions_per_second": float(summary.get("reactions_per_second", 0.0))}


METRICS = {"mean": mean, "std": std, "histogram": histogram, "throughput": throughput}
