"""Exact laws and statistical checks shared by the CPU and CUDA SSA tests."""

from __future__ import annotations

from math import comb, exp, lgamma, log

import numpy as np

from app.sims.common.config import parse_yaml
from app.sims.ssa.config import load_config
from app.sims.ssa.stats import distance, null_band

DECAY = """
domain: ssa
model:
  species: {X: 100}
  parameters: {c: 0.5}
  reactions: [{reactants: {X: 1}, rate: c}]
ensemble: {realizations: 4000, t_end: 2.0, samples: 5, seed: %d, algorithm: %s}
"""

BIRTH_DEATH = """
domain: ssa
model:
  species: {X: 0}
  parameters: {k: 10.0, g: 0.2}
  reactions: [{reactants: {}, products: {X: 1}, rate: k}, {reactants: {X: 1}, rate: g}]
ensemble: {realizations: 4000, t_end: 20.0, samples: 5, seed: %d, algorithm: %s}
"""


def config(template: str, seed: int = 1, algorithm: str = "direct", **ensemble):
    cfg = load_config(parse_yaml(template % (seed, algorithm)))
    if ensemble:
        from dataclasses import replace
        cfg = replace(cfg, ensemble=replace(cfg.ensemble, **ensemble))
    return cfg


def binomial_pmf(n: int, p: float) -> np.ndarray:
    return np.array([comb(n, k) * p**k * (1 - p) ** (n - k) for k in range(n + 1)])


def poisson_pmf(mean: float, kmax: int) -> np.ndarray:
    k = np.arange(kmax + 1)
    return np.exp(k * log(mean) - mean - np.array([lgamma(i + 1) for i in k]))


def assert_law(samples: np.ndarray, pmf: np.ndarray, z: float = 4.0) -> None:
    """Mean and variance within z standard errors of the exact law's, and the histogram
    distance to the exact pmf inside the 99.9% band of a sample of this size."""
    k = np.arange(len(pmf))
    pmf = pmf / pmf.sum()
    mu = (k * pmf).sum()
    var = ((k - mu) ** 2 * pmf).sum()
    mu4 = ((k - mu) ** 4 * pmf).sum()
    n = len(samples)
    se_mean = np.sqrt(var / n)
    se_var = np.sqrt((mu4 - var**2 * (n - 3) / (n - 1)) / n)
    assert abs(samples.mean() - mu) < z * se_mean, (samples.mean(), mu, se_mean)
    assert abs(samples.var(ddof=1) - var) < z * se_var, (samples.var(ddof=1), var, se_var)
    counts = np.bincount(samples, minlength=len(pmf))[: len(pmf)]
    assert counts.sum() == n                          # nothing outside the law's support
    d = distance(counts, pmf)
    band = null_band(pmf, n, 10**9, quantile=0.999)
    assert d < band, (d, band)


def assert_poisson_streams(samples: np.ndarray, lam: float, streams: int, per: int) -> None:
    """``per`` Poisson draws in turn from each of ``streams`` streams: the law of the float32
    mean ``lam`` (:func:`assert_law`), and successive draws of a stream uncorrelated."""
    mean = float(np.float32(lam))
    assert_law(samples, poisson_pmf(mean, int(mean + 12 * np.sqrt(mean) + 20)))
    pairs = samples.reshape(streams, per)
    r = np.corrcoef(pairs[:, :-1].ravel(), pairs[:, 1:].ravel())[0, 1]
    assert abs(r) < 4 / np.sqrt(streams * (per - 1)), r


def decay_pmf(t: float, x0: int = 100, c: float = 0.5) -> np.ndarray:
    return binomial_pmf(x0, exp(-c * t))


def birth_death_pmf(t: float, k: float = 10.0, g: float = 0.2) -> np.ndarray:
    return poisson_pmf(k / g * (1 - exp(-g * t)), 200)
