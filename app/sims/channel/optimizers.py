"""Optimisers on the batched evaluator, one step at a time (what a simulation slice runs).

All work in normalised coordinates u in [0, 1]^P (params = lower + u (upper - lower)).

- :class:`CmaesSearch`: CMA-ES (the ``cma`` library, Hansen) asks a whole population, the
  engine scores it in one batch (a GPU launch on CUDA), CMA-ES is told the scores. Restarts
  with a doubled population when CMA-ES stops early (IPOP, at most MAX_GROWTH times the
  first). The library's ask/tell costs ~0.1 ms per individual on the host (measured: 5 ms at
  32, 1.2 s at 10,000 with bounds), so populations stay moderate: CMA-ES needs ~100
  generations of 32 on the generated case, each one launch.
- :class:`LevenbergMarquardt`: weighted least squares on the residual vector with a
  central-difference Jacobian (2P simulations in one batch) and several damping values tried
  per iteration in one more batch; bounds by projection.
- :class:`NelderMead`: scipy's Nelder-Mead, a few iterations per step, the simplex carried
  over between steps.

The local refinements run on a float64 engine: derivatives by differences of float32
currents would carry ~1e-3 relative error, and they need only 2P + a few simulations per
iteration.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

MAX_GROWTH = 16      # IPOP restarts double the population up to this factor

Scores = Callable[[np.ndarray], np.ndarray]           # (k, P) params -> (k,) chi^2
Simulate = Callable[[np.ndarray], np.ndarray]         # (k, P) params -> (k, n_points) pA


class Box:
    """The search box and the map between parameters and normalised coordinates."""

    def __init__(self, lower: np.ndarray, upper: np.ndarray):
        self.lower, self.upper = np.asarray(lower, float), np.asarray(upper, float)
        self.width = self.upper - self.lower

    def params(self, u: np.ndarray) -> np.ndarray:
        return self.lower + np.clip(u, 0.0, 1.0) * self.width

    def unit(self, params: np.ndarray) -> np.ndarray:
        return (np.asarray(params, float) - self.lower) / self.width


class CmaesSearch:
    """CMA-ES over the box, population ``popsize`` per generation, IPOP restarts."""

    def __init__(self, box: Box, scores: Scores, popsize: int, seed: int, sigma: float = 0.3,
                 start: np.ndarray | None = None):
        try:
            import cma
        except ImportError:
            raise RuntimeError("CMA-ES needs the 'cma' package (pip install cma)") from None
        self.cma, self.box, self.scores, self.sigma = cma, box, scores, sigma
        self.popsize, self.seed, self.restarts = int(popsize), int(seed), 0
        self.first_popsize = self.popsize
        self.rng = np.random.default_rng(seed)
        self.best_u = np.full(len(box.lower), 0.5) if start is None else box.unit(start)
        self.best = np.inf
        self.median = np.inf
        self.evaluations = 0
        self._start(self.best_u)

    def _start(self, mean: np.ndarray) -> None:
        options = {"bounds": [0.0, 1.0], "popsize": self.popsize, "seed": self.seed + self.restarts,
                   "verbose": -9, "tolfun": 1e-14, "tolx": 1e-12, "tolfunhist": 1e-14,
                   "CMA_active": True}
        self.es = self.cma.CMAEvolutionStrategy(list(np.clip(mean, 0.0, 1.0)), self.sigma, options)

    def step(self) -> None:
        """One generation: ask, score the batch, tell; restart (IPOP) when CMA-ES stops."""
        xs = self.es.ask()
        u = np.array(xs)
        f = np.asarray(self.scores(self.box.params(u)), float)
        self.evaluations += len(f)
        f = np.where(np.isfinite(f), f, np.finfo(float).max)
        self.es.tell(xs, list(f))
        k = int(np.argmin(f))
        self.median = float(np.median(f))
        if f[k] < self.best:
            self.best, self.best_u = float(f[k]), u[k].copy()
        if self.es.stop():
            self.restarts += 1
            self.popsize = min(2 * self.popsize, MAX_GROWTH * self.first_popsize)
            self._start(self.rng.uniform(0.0, 1.0, len(self.best_u)) if self.restarts % 2 == 0
                        else self.best_u)

    @property
    def best_params(self) -> np.ndarray:
        return self.box.params(self.best_u)


class LevenbergMarquardt:
    """Bounded Levenberg-Marquardt on r(u) = sqrt(w) (sim(u) - target) / sqrt(sum w), so that
    |r|^2 is chi^2."""

    DAMPING = (0.1, 1.0, 10.0, 100.0)     # multiples of the current lambda tried in one batch

    def __init__(self, box: Box, simulate: Simulate, target: np.ndarray, weights: np.ndarray | None,
                 start: np.ndarray, step: float = 1e-6, tolerance: float = 1e-12):
        self.box, self.simulate, self.target = box, simulate, np.asarray(target, float)
        w = np.ones_like(self.target) if weights is None else np.asarray(weights, float)
        self.root_w = np.sqrt(w / w.sum())
        self.u = box.unit(start)
        self.h, self.tolerance = step, tolerance
        self.lam = 1e-3
        self.evaluations = 0
        self.residual = self._residuals(self.u[None])[0]
        self.best = float(self.residual @ self.residual)
        self.median = self.best
        self.converged = False

    def _residuals(self, u: np.ndarray) -> np.ndarray:
        self.evaluations += len(u)
        return (self.simulate(self.box.params(u)) - self.target) * self.root_w

    def jacobian(self, u: np.ndarray) -> np.ndarray:
        """(n_points, P) central differences in u, one batch of 2P simulations; a one-sided
        difference at a bound."""
        p = len(u)
        hi = np.minimum(u + self.h, 1.0)
        lo = np.maximum(u - self.h, 0.0)
        rows = np.concatenate([np.where(np.eye(p, dtype=bool), hi, u), np.where(np.eye(p, dtype=bool), lo, u)])
        r = self._residuals(rows)
        return ((r[:p] - r[p:]) / (hi - lo)[:, None]).T

    def step(self) -> None:
        if self.converged:
            return
        j = self.jacobian(self.u)
        jtj, grad = j.T @ j, j.T @ self.residual
        scale = np.maximum(np.diag(jtj), 1e-30)
        candidates = []
        for factor in self.DAMPING:
            try:
                delta = np.linalg.solve(jtj + self.lam * factor * np.diag(scale), -grad)
            except np.linalg.LinAlgError:
                continue
            candidates.append(np.clip(self.u + delta, 0.0, 1.0))
        r = self._residuals(np.array(candidates))
        chi = np.einsum("kn,kn->k", r, r)
        chi = np.where(np.isfinite(chi), chi, np.inf)
        k = int(np.argmin(chi))
        self.median = float(np.median(chi))
        if chi[k] < self.best:
            gain = (self.best - chi[k]) / max(self.best, 1e-300)
            moved = np.abs(candidates[k] - self.u).max()
            self.u, self.residual, self.best = candidates[k], r[k], float(chi[k])
            self.lam = max(self.lam * self.DAMPING[k] / 3.0, 1e-12)
            self.converged = gain < self.tolerance or moved < 1e-12
        else:
            self.lam *= 100.0
            self.converged = self.lam > 1e12

    @property
    def best_params(self) -> np.ndarray:
        return self.box.params(self.u)


class NelderMead:
    """scipy's Nelder-Mead in the box, ``iterations`` per step, simplex kept between steps."""

    def __init__(self, box: Box, scores: Scores, start: np.ndarray, iterations: int = 20,
                 spread: float = 0.02):
        try:
            from scipy.optimize import minimize
        except ImportError:
            raise RuntimeError("Nelder-Mead needs scipy (pip install scipy)") from None
        self.minimize, self.box, self.scores, self.iterations = minimize, box, scores, iterations
        u0 = box.unit(start)
        p = len(u0)
        self.simplex = np.vstack([u0, u0 + spread * np.eye(p) * np.where(u0 > 0.5, -1.0, 1.0)])
        self.evaluations = 0
        f = self._f_many(self.simplex)
        self.best, self.u, self.median = float(f.min()), self.simplex[int(np.argmin(f))], float(np.median(f))
        self.converged = False

    def _f_many(self, u: np.ndarray) -> np.ndarray:
        self.evaluations += len(u)
        outside = ((u < 0) | (u > 1)).any(axis=1)
        return np.where(outside, np.inf, self.scores(self.box.params(u)))

    def step(self) -> None:
        if self.converged:
            return
        result = self.minimize(lambda u: float(self._f_many(u[None])[0]), self.u, method="Nelder-Mead",
                               options={"initial_simplex": self.simplex, "maxiter": self.iterations,
                                        "xatol": 1e-10, "fatol": 1e-14 * max(self.best, 1e-300)})
        self.simplex = result.final_simplex[0]
        f = result.final_simplex[1]
        self.median = float(np.median(f))
        if result.fun < self.best:
            self.best, self.u = float(result.fun), np.asarray(result.x)
        self.converged = bool(result.success) and result.nit < self.iterations

    @property
    def best_params(self) -> np.ndarray:
        return self.box.params(self.u)
