"""Cultured-network sweep metrics: firing rate, bursts per minute and synapses."""

from __future__ import annotations

import numpy as np

SEED_KEY = "run.seed"
DEFAULT_METRICS = ("rate", "bursts", "synapses")


def _last(arrays, key: str) -> float:
    values = np.asarray(arrays.get(key, []), dtype=float)
    return float(values[-1]) if values.size else float("nan")


def rate(arrays, summary, options) -> dict[str, float]:
    """Mean firing rate (Hz) over the last epoch."""
    return {"mean_rate_hz": _last(arrays, "epoch_mean_rate")}


def bursts(arrays, summary, options) -> dict[str, float]:
    """Network bursts per minute in the last epoch."""
    return {"bursts_per_minute": _last(arrays, "epoch_bursts_per_minute")}


def synapses(arrays, summary, options) -> dict[str, float]:
    """Synapses at the end, and the mean neurite radius."""
    return {"synapses": float(summary["synapses"]),
            "mean_radius": float(np.mean(arrays["final_radius"]))}


METRICS = {"rate": rate, "bursts": bursts, "synapses": synapses}
