"""Uncertainty at the optimum: Gauss-Newton confidence intervals and an adaptive-Metropolis
posterior from many parallel chains.

Noise model: y_i = I_i(theta) + e_i with e_i ~ N(0, s^2 / w_i), independent. Then the
weighted least-squares estimate has covariance s^2 (J^T W J)^-1 near the optimum, with s^2
estimated by sum w r^2 / (n - P) over the n points of nonzero weight, and the
log-likelihood is -sum w r^2 / (2 s^2) = -(n - P) chi2 / (2 chi2_min). Recorded currents are
filtered, so neighbouring residuals are correlated and these intervals are too narrow by
about the square root of the correlation length in samples: a lower bound on the uncertainty.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

Z95 = 1.959963984540054
MAX_CONDITION = 1e10       # of the correlation-scaled J^T W J: beyond it, not identifiable
MAX_RELATIVE_CI = 0.5      # a 95% half-width beyond half the value: poorly identified


@dataclass
class Intervals:
    """Gauss-Newton intervals: sd, 95% bounds, correlation and identifiability warnings."""

    names: tuple[str, ...]
    best: np.ndarray
    sd: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    correlation: np.ndarray
    covariance: np.ndarray
    condition: float
    noise_variance: float
    points: int
    warnings: list[str] = field(default_factory=list)

    def summary(self) -> dict:
        return {"parameters": {n: {"value": float(b), "sd": float(s), "ci95": [float(lo), float(hi)]}
                               for n, b, s, lo, hi in zip(self.names, self.best, self.sd, self.lower, self.upper)},
                "condition": self.condition, "noise_variance_pA2": self.noise_variance,
                "warnings": list(self.warnings)}


def gauss_newton_intervals(names, best: np.ndarray, jacobian: np.ndarray, residual: np.ndarray,
                           points: int, weight_total: float | None = None) -> Intervals:
    """Intervals from the Jacobian (n, P) of the weighted residuals with respect to the
    parameters (physical units) and the residuals (n,) at ``best``; ``points``: data points of
    nonzero weight. Residuals may carry a common factor (LM's 1/sqrt(sum w)): the covariance
    does not depend on it; ``weight_total`` (sum w) turns the noise variance back into pA^2
    at a point of weight 1."""
    p = len(best)
    dof = max(points - p, 1)
    s2 = float(residual @ residual) / dof
    jtj = jacobian.T @ jacobian
    d = np.sqrt(np.maximum(np.diag(jtj), 1e-300))
    scaled = jtj / np.outer(d, d)
    eigval, eigvec = np.linalg.eigh(scaled)
    condition = float(eigval[-1] / max(eigval[0], 1e-300))
    inverse = (eigvec / np.maximum(eigval, eigval[-1] * 1e-16)) @ eigvec.T
    cov = s2 * inverse / np.outer(d, d)
    sd = np.sqrt(np.maximum(np.diag(cov), 0.0))
    corr = cov / np.outer(np.maximum(sd, 1e-300), np.maximum(sd, 1e-300))
    warnings = []
    if condition > MAX_CONDITION:
        weak = eigvec[:, 0]
        involved = [n for n, w in zip(names, weak) if abs(w) > 0.2]
        warnings.append(f"the protocol does not identify {', '.join(involved)} separately: J^T J is "
                        f"near singular (condition {condition:.2g}); their combination along "
                        f"{', '.join(f'{w:+.2f} {n}' for n, w in zip(names, weak) if abs(w) > 0.2)} is free")
    for n, b, s in zip(names, best, sd):
        if Z95 * s > MAX_RELATIVE_CI * max(abs(b), 1e-300):
            warnings.append(f"{n} is poorly identified: 95% interval +-{Z95 * s:.3g} around {b:.4g}")
    noise = s2 * (weight_total if weight_total is not None else 1.0)
    return Intervals(tuple(names), np.asarray(best, float), sd, best - Z95 * sd, best + Z95 * sd,
                     corr, cov, condition, noise, points, warnings)


class AdaptiveMetropolis:
    """Adaptive Metropolis (Haario, Saksman & Tamminen 2001) with ``chains`` chains advanced
    together: every step scores all proposals in one batch. The proposal covariance is
    (2.38^2 / P) times the pooled covariance of every chain's second half (after
    ``adapt_after`` steps; before that the Gauss-Newton covariance), plus a small ridge.
    Flat prior on the search box."""

    def __init__(self, scores, lower: np.ndarray, upper: np.ndarray, chi2_min: float, points: int,
                 start: np.ndarray, covariance: np.ndarray, chains: int, seed: int,
                 adapt_after: int = 50):
        self.scores, self.lower, self.upper = scores, np.asarray(lower, float), np.asarray(upper, float)
        p = len(start)
        self.scale = (p and (points - p) / (2.0 * max(chi2_min, 1e-300)))   # loglik = -scale chi2
        self.rng = np.random.default_rng(seed)
        self.base_cov = np.asarray(covariance, float) + np.diag((1e-9 * (self.upper - self.lower)) ** 2)
        draw = self.rng.multivariate_normal(np.asarray(start, float), self.base_cov, size=chains)
        self.x = np.clip(draw, self.lower, self.upper)
        self.logp = -self.scale * np.asarray(scores(self.x), float)
        self.samples: list[np.ndarray] = [self.x.copy()]
        self.accepted = 0
        self.proposed = 0
        self.adapt_after = adapt_after
        self.evaluations = chains

    def proposal_cov(self) -> np.ndarray:
        p = self.x.shape[1]
        steps = len(self.samples)
        if steps < self.adapt_after:
            cov = self.base_cov
        else:
            pooled = np.concatenate(self.samples[steps // 2:])
            cov = np.cov(pooled, rowvar=False) + np.diag((1e-9 * (self.upper - self.lower)) ** 2)
        return (2.38**2 / p) * np.atleast_2d(cov)

    def step(self) -> None:
        chains, p = self.x.shape
        proposal = self.x + self.rng.multivariate_normal(np.zeros(p), self.proposal_cov(), size=chains)
        inside = ((proposal >= self.lower) & (proposal <= self.upper)).all(axis=1)
        logp = np.full(chains, -np.inf)
        if inside.any():
            logp[inside] = -self.scale * np.asarray(self.scores(proposal[inside]), float)
            self.evaluations += int(inside.sum())
        accept = np.log(self.rng.uniform(size=chains)) < logp - self.logp
        self.x = np.where(accept[:, None], proposal, self.x)
        self.logp = np.where(accept, logp, self.logp)
        self.accepted += int(accept.sum())
        self.proposed += chains
        self.samples.append(self.x.copy())

    @property
    def acceptance(self) -> float:
        return self.accepted / max(self.proposed, 1)

    def chain_array(self) -> np.ndarray:
        """(steps + 1, chains, P) every state of every chain."""
        return np.array(self.samples)

    def posterior(self, names) -> dict:
        """Mean, sd and 2.5/50/97.5% quantiles of the second half of every chain."""
        kept = np.concatenate(self.samples[len(self.samples) // 2:])
        q = np.quantile(kept, [0.025, 0.5, 0.975], axis=0)
        return {n: {"mean": float(m), "sd": float(s), "q2.5": float(a), "median": float(b), "q97.5": float(c)}
                for n, m, s, a, b, c in zip(names, kept.mean(0), kept.std(0), *q)}
