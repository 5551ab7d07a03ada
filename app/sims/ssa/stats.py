"""Ensemble statistics: integer histograms and the Cao-Petzold histogram distance.

Convention used everywhere in the app: D = sum_k |p_k - q_k| over a common bin set, so
0 <= D <= 2 (StochKit2R's "Manhattan" value; Cain reports D/2).

Histograms have integer-aligned bins: ``lo`` (the ensemble minimum) and a whole-number
``width`` = ceil((max - min + 1) / bins), so every bin holds the same number of integers.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil, pi

import numpy as np

DISTANCE_CONVENTION = "D = sum|p-q| (0..2)"


@dataclass(frozen=True)
class Histogram:
    """Counts of integer values in bins [lo + k*width, lo + (k+1)*width)."""

    lo: int
    width: int
    counts: np.ndarray

    @property
    def edges(self) -> np.ndarray:
        return self.lo + self.width * np.arange(len(self.counts) + 1) - 0.5

    @property
    def total(self) -> int:
        return int(self.counts.sum())

    def probabilities(self) -> np.ndarray:
        return self.counts / max(self.total, 1)


def bin_layout(lo: int, hi: int, bins: int) -> tuple[int, int]:
    """(lo, width) of ``bins`` integer-aligned bins that cover [lo, hi]."""
    return int(lo), max(1, ceil((int(hi) - int(lo) + 1) / bins))


def histogram(values: np.ndarray, bins: int, lo: int | None = None, width: int | None = None) -> Histogram:
    """Histogram of integer ``values``; bins span their range unless (lo, width) are given."""
    values = np.asarray(values, np.int64)
    if lo is None or width is None:
        lo, width = bin_layout(values.min(), values.max(), bins)
    index = (values - lo) // width
    inside = (index >= 0) & (index < bins)
    return Histogram(lo, width, np.bincount(index[inside], minlength=bins)[:bins].astype(np.int64))


def common_histograms(a: np.ndarray, b: np.ndarray, bins: int) -> tuple[Histogram, Histogram]:
    """Histograms of two samples on one bin set spanning their pooled range."""
    lo, width = bin_layout(min(a.min(), b.min()), max(a.max(), b.max()), bins)
    return histogram(a, bins, lo, width), histogram(b, bins, lo, width)


def rebin(h: Histogram, lo: int, width: int, bins: int) -> np.ndarray:
    """Counts of ``h`` moved onto another integer bin set, each bin's mass spread evenly over
    its integers (exact when the new bins are unions of the old ones)."""
    values = h.lo + np.arange(len(h.counts) * h.width)
    mass = np.repeat(h.counts / h.width, h.width)
    index = (values - lo) // width
    inside = (index >= 0) & (index < bins)
    return np.bincount(index[inside], weights=mass[inside], minlength=bins)[:bins]


def distance(p: np.ndarray, q: np.ndarray) -> float:
    """Histogram distance sum |p - q| of two count or probability vectors on the same bins."""
    p = np.asarray(p, float)
    q = np.asarray(q, float)
    return float(np.abs(p / p.sum() - q / q.sum()).sum())


def histogram_distance(a: Histogram, b: Histogram) -> tuple[float, float]:
    """(distance, expected self-distance) of two histograms on the coarser common bin set."""
    lo = min(a.lo, b.lo)
    width = max(a.width, b.width)
    hi = max(a.lo + a.width * len(a.counts), b.lo + b.width * len(b.counts))
    bins = max(1, ceil((hi - lo) / width))
    pa, pb = rebin(a, lo, width, bins), rebin(b, lo, width, bins)
    return distance(pa, pb), expected_self_distance((pa + pb) / (pa.sum() + pb.sum()), a.total, b.total)


def sample_distance(a: np.ndarray, b: np.ndarray, bins: int) -> tuple[float, float]:
    """(distance, expected self-distance) of two integer samples on ``bins`` common bins."""
    ha, hb = common_histograms(a, b, bins)
    pooled = (ha.counts + hb.counts) / (ha.total + hb.total)
    return distance(ha.counts, hb.counts), expected_self_distance(pooled, ha.total, hb.total)


def expected_self_distance(p: np.ndarray, n: int, m: int) -> float:
    """Expected D between two independent ensembles of sizes n and m drawn from law ``p``.

    Each bin difference p_k - q_k is nearly normal with variance p_k(1-p_k)(1/n + 1/m), and
    E|N(0, s^2)| = s sqrt(2/pi); summing over bins gives the expected distance.
    """
    p = np.asarray(p, float)
    return float(np.sum(np.sqrt(2.0 / pi * p * (1.0 - p) * (1.0 / n + 1.0 / m))))


def null_band(p: np.ndarray, n: int, m: int, quantile: float = 0.99, rounds: int = 2000,
              seed: int = 0) -> float:
    """The ``quantile`` of D between two ensembles of sizes n and m drawn from one law ``p``
    (parametric bootstrap: multinomial counts on the common bins)."""
    p = np.asarray(p, float) / np.sum(p)
    rng = np.random.default_rng(seed)
    a = rng.multinomial(n, p, size=rounds) / n
    b = rng.multinomial(m, p, size=rounds) / m
    return float(np.quantile(np.abs(a - b).sum(axis=1), quantile))


def moments(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mean, variance) per species of states (R, S), computed in float64."""
    x = np.asarray(x, np.float64)
    return x.mean(axis=0), x.var(axis=0)
