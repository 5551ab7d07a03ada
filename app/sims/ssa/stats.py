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


# ---- verdicts with a stated false-alarm rate ---------------------------------------------------
#
# One rule everywhere: a family of m statistics that are standard normal under the null (Z of a
# mean, standardized Y of a variance, at every output time and species of one run) passes when
# max |Z| <= c(m, alpha), with c Sidak's threshold. Statistics taken at several times of one
# ensemble share trajectories and are correlated; by Sidak's inequality (Sidak 1967, JASA 62:626)
# P(|Z_1| <= c, ..., |Z_m| <= c) >= prod_i P(|Z_i| <= c) for a centred Gaussian vector with ANY
# correlation matrix, so the family's false-alarm rate is at most alpha whatever the correlation
# (no independence or positive dependence is assumed; only the statistics' joint normality, which
# the central limit theorem gives for large ensembles). p-values of other kinds (chi-square) join
# a family by Bonferroni's union bound, valid under any dependence.

def sidak_threshold(tests: int, alpha: float) -> float:
    """c with P(max of ``tests`` |N(0, 1)| > c) <= ``alpha`` for any correlation (Sidak)."""
    from scipy.special import ndtri

    if tests < 1:
        return float("inf")
    per_test = -np.expm1(np.log1p(-alpha) / tests)      # 1 - (1 - alpha)^(1/m), without cancellation
    return float(-ndtri(per_test / 2))


@dataclass(frozen=True)
class Verdict:
    """A family's verdict: pass when ``statistic`` (max |Z|) <= ``threshold`` and every p-value
    is above its Bonferroni share; false-alarm rate at most ``alpha``."""

    statistic: float
    threshold: float
    tests: int
    alpha: float
    min_p: float = 1.0          # smallest p-value of the non-Gaussian members (1: none)
    p_tests: int = 0

    @property
    def passed(self) -> bool:
        return self.statistic <= self.threshold and self.min_p > self.p_threshold

    @property
    def p_threshold(self) -> float:
        return self.alpha / 2 / self.p_tests if self.p_tests else 0.0

    def describe(self) -> str:
        text = (f"max |Z| {self.statistic:.2f} {'<=' if self.statistic <= self.threshold else '>'} "
                f"{self.threshold:.2f} ({self.tests} tests")
        if self.p_tests:
            text += f"; min p {self.min_p:.2g} vs {self.p_threshold:.2g} over {self.p_tests} chi-square tests"
        return text + f"; false-alarm rate <= {self.alpha:g}): {'pass' if self.passed else 'FAIL'}"


def family_verdict(z: np.ndarray, alpha: float, p_values: np.ndarray | None = None) -> Verdict:
    """The verdict on Gaussian statistics ``z`` (NaN entries are not tests) and, optionally,
    ``p_values`` of other tests: alpha (or half of it when there are p-values) by Sidak to the
    max |Z|, the other half by Bonferroni to the p-values."""
    z = np.asarray(z, float)
    z = z[np.isfinite(z)]
    p = np.asarray([] if p_values is None else p_values, float).ravel()
    share = alpha / 2 if p.size else alpha
    return Verdict(float(np.abs(z).max()) if z.size else 0.0, sidak_threshold(z.size, share), int(z.size),
                   alpha, float(p.min()) if p.size else 1.0, int(p.size))


def variance_z(sample_var: float | np.ndarray, sigma2: float | np.ndarray, mu4: float | np.ndarray,
               n: int) -> np.ndarray:
    """Standardized sample variance (ddof 1) against the exact sigma^2, with the exact
    Var(s^2) = mu4 / n - sigma^4 (n - 3) / (n (n - 1)) (mu4 the fourth central moment)."""
    var_s2 = np.asarray(mu4) / n - np.asarray(sigma2) ** 2 * (n - 3) / (n * (n - 1.0))
    return (np.asarray(sample_var) - sigma2) / np.sqrt(np.maximum(var_s2, 1e-300))


def pooled_cells(expected: np.ndarray, min_expected: float = 5.0) -> np.ndarray:
    """Cell index of each value 0..K-1: adjacent values merged from the left until a cell
    expects at least ``min_expected``; a short remainder joins the last full cell."""
    cell = np.zeros(len(expected), np.int64)
    current, acc = 0, 0.0
    for k, e in enumerate(expected):
        cell[k] = current
        acc += e
        if acc >= min_expected:
            current, acc = current + 1, 0.0
    if acc < min_expected and current > 0:      # the tail's remainder is too small alone
        cell[cell == current] = current - 1
    return cell


def chi_square_test(values: np.ndarray, pmf: np.ndarray, min_expected: float = 5.0) -> tuple[float, int, float]:
    """Pearson's chi-square of integer samples ``values`` against the law ``pmf`` of the values
    0..K-1 (its missing mass, a truncation's, and any value above K-1 join the last cell), cells
    pooled so each expects >= ``min_expected``: (statistic, degrees of freedom, p-value)."""
    from scipy.stats import chi2

    pmf = np.asarray(pmf, float)
    values = np.asarray(values, np.int64)
    if values.size and values.min() < 0:
        raise ValueError("counts must be >= 0")
    counts = np.bincount(np.minimum(values, len(pmf) - 1), minlength=len(pmf)).astype(float)
    n = counts.sum()
    expected = n * pmf
    expected[-1] += n * max(0.0, 1.0 - pmf.sum())
    cell = pooled_cells(expected, min_expected)
    obs = np.bincount(cell, counts)
    exp = np.bincount(cell, expected)
    stat = float(((obs - exp) ** 2 / exp).sum())
    df = len(obs) - 1
    return stat, df, float(chi2.sf(stat, df)) if df > 0 else 1.0
