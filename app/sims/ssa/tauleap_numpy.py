"""The NumPy (float64) tau-leaping reference: the steps of :mod:`app.sims.ssa.tauleap`,
vectorized across realizations, each realization drawing from its own Philox stream in the same
order as the compiled engine (leap draw, then Poisson counts in reaction order; one draw per
exact step), so both give the same ensemble.

Realizations move in lockstep rounds: every round each unfinished one either leaps once (its
rejected leaps redrawn within the round) or takes up to 100 exact steps.
"""

from __future__ import annotations

import math

import numpy as np

from app.compute import philox
from app.sims.ssa.engine import IntervalStats, check_propensities, host_stats, over_budget
from app.sims.ssa.model import Network
from app.sims.ssa.tauleap import (DEFAULT_EPSILON, N_CRITICAL, POISSON_INVERSION_BELOW, SSA_STEPS, LeapCheckpoint,
                                  SSA_THRESHOLD, check_network, species_orders, stop_leaping)

_lgamma = np.vectorize(math.lgamma, otypes=[np.float64])


class TauLeapReference(LeapCheckpoint):
    """R realizations of ``network`` tau-leaped in NumPy."""

    def __init__(self, network: Network, realizations: int, seed: int, hist_idx: list[int],
                 bins: int, epsilon: float = DEFAULT_EPSILON, t0: float = 0.0):
        check_network(network)
        self.net, self.realizations, self.seed, self.epsilon = network, realizations, seed, epsilon
        self.hist_idx, self.bins = hist_idx, bins
        self.x = np.tile(network.x0.astype(np.int64), (realizations, 1))
        self.rates = network.rates.astype(np.float64).copy()
        self.change = network.change.astype(np.int64)
        self.hor, self.need = species_orders(network)
        self.t = np.full(realizations, float(t0))
        self.active = np.ones(realizations, bool)
        self.draws = np.zeros(realizations, np.uint64)
        self.reactions_fired = 0
        self._first_over = np.zeros(realizations)   # firing budget: see engine.over_budget

    # ---- pieces ---------------------------------------------------------------------------
    def _propensities(self, rows: np.ndarray) -> np.ndarray:
        """Mass action, multiplied in the compiled engine's order (so the results agree bit
        for bit): c, then per reactant x, (x - 1) / 2, (x - 2) / 3."""
        x = self.x[rows].astype(np.float64)
        a = np.broadcast_to(self.rates, (len(rows), self.net.n_reactions)).copy()
        with np.errstate(over="ignore"):        # an infinite product is refused by the caller
            return self._mass_action(x, a)

    def _mass_action(self, x: np.ndarray, a: np.ndarray) -> np.ndarray:
        for j, pairs in enumerate(self.net.reactant_lists()):
            for s, m in pairs:
                v = x[:, s]
                a[:, j] *= v
                if m >= 2:
                    a[:, j] *= np.maximum(v - 1.0, 0.0) / 2.0
                if m >= 3:
                    a[:, j] *= np.maximum(v - 2.0, 0.0) / 3.0
        return a

    def _draw(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Uniforms (words 0 and 1) of each row's next draw."""
        words = philox.draw(self.seed, rows.astype(np.uint64), self.draws[rows])
        self.draws[rows] += np.uint64(1)
        return philox.to_unit_float64(words[0]), philox.to_unit_float64(words[1])

    def _poisson(self, rows: np.ndarray, lam: np.ndarray) -> np.ndarray:
        """Poisson counts of mean ``lam`` per row, drawn as :func:`tauleap.poisson` draws them."""
        out = np.zeros(len(rows), np.int64)
        small = (lam > 0) & (lam < POISSON_INVERSION_BELOW)
        if small.any():
            u, _ = self._draw(rows[small])
            lam_s = lam[small]
            k = np.zeros(len(u), np.int64)
            p = np.exp(-lam_s)
            s = p.copy()
            going = u > s
            while going.any():
                k[going] += 1
                p[going] *= lam_s[going] / k[going]
                s[going] += p[going]
                going &= (u > s) & (k < 1000)
            out[small] = k
        big = lam >= POISSON_INVERSION_BELOW
        pending = np.flatnonzero(big)
        lam_b = lam[pending]
        slam, loglam = np.sqrt(lam_b), np.log(lam_b)
        b = 0.931 + 2.53 * slam
        a = -0.059 + 0.02483 * b
        invalpha = 1.1239 + 1.1328 / (b - 3.4)
        vr = 0.9277 - 3.6224 / (b - 2.0)
        while pending.size:
            u, v = self._draw(rows[pending])
            u = u - 0.5
            us = 0.5 - np.abs(u)
            k = np.floor((2.0 * a / us + b) * u + lam_b + 0.43)
            take = (us >= 0.07) & (v <= vr)
            test = ~take & ~((k < 0) | ((us < 0.013) & (v > us)))
            if test.any():
                with np.errstate(divide="ignore"):
                    lhs = np.log(v[test]) + np.log(invalpha[test]) - np.log(a[test] / (us[test] ** 2) + b[test])
                take[test] = lhs <= -lam_b[test] + k[test] * loglam[test] - _lgamma(k[test] + 1.0)
            out[pending[take]] = k[take].astype(np.int64)
            keep = ~take
            pending, lam_b, slam, loglam = pending[keep], lam_b[keep], slam[keep], loglam[keep]
            b, a, invalpha, vr = b[keep], a[keep], invalpha[keep], vr[keep]
        return out

    def _critical(self, rows: np.ndarray, a: np.ndarray) -> np.ndarray:
        x = self.x[rows]
        runs = np.full(a.shape, N_CRITICAL, np.int64)
        for j in range(a.shape[1]):
            for i in np.flatnonzero(self.change[j] < 0):
                runs[:, j] = np.minimum(runs[:, j], x[:, i] // -self.change[j, i])
        return (a > 0) & (runs < N_CRITICAL)

    def _tau_prime(self, rows: np.ndarray, a: np.ndarray, critical: np.ndarray) -> np.ndarray:
        x = self.x[rows].astype(np.float64)
        tau = np.full(len(rows), np.inf)
        free = np.where(critical, 0.0, a)
        for i in np.flatnonzero(self.hor):
            nu = self.change[:, i].astype(np.float64)
            mu = (free * nu).sum(axis=1, where=nu != 0)
            sig = (free * nu * nu).sum(axis=1, where=nu != 0)
            g = _g(self.hor[i], self.need[i], x[:, i])
            bound = np.maximum(self.epsilon * x[:, i] / g, 1.0)
            with np.errstate(divide="ignore", invalid="ignore"):
                tau = np.where(mu != 0, np.minimum(tau, bound / np.abs(mu)), tau)
                tau = np.where(sig > 0, np.minimum(tau, bound * bound / sig), tau)
        return tau

    # ---- rounds ---------------------------------------------------------------------------
    def _exact_steps(self, rows: np.ndarray, a: np.ndarray, t_to: float) -> None:
        a0 = a.sum(axis=1)
        for _ in range(SSA_STEPS):
            if rows.size == 0:
                return
            u0, u1 = self._draw(rows)
            t_new = self.t[rows] - np.log(u0) / a0
            over = ~(t_new <= t_to)
            self._finish(rows[over], t_to)
            keep = ~over
            rows, a, a0, t_new, u1 = rows[keep], a[keep], a0[keep], t_new[keep], u1[keep]
            cum = np.cumsum(a, axis=1)
            pick = (cum <= (u1 * a0)[:, None]).sum(axis=1)
            top = pick >= a.shape[1]
            if top.any():
                pick[top] = a.shape[1] - 1 - np.argmax(a[top][:, ::-1] > 0, axis=1)
            self.x[rows] += self.change[pick]
            self.t[rows] = t_new
            self.reactions_fired += rows.size
            a = self._propensities(rows)
            a0 = a.sum(axis=1)
            dead = ~(a0 > 0)
            self._finish(rows[dead], t_to)
            rows, a, a0 = rows[~dead], a[~dead], a0[~dead]

    def _leap(self, rows: np.ndarray, a: np.ndarray, critical: np.ndarray, taup: np.ndarray,
              t_to: float) -> None:
        left = t_to - self.t[rows]
        a0c = np.where(critical, a, 0.0).sum(axis=1)
        pending = np.arange(len(rows))
        while pending.size:
            r = rows[pending]
            u0, u1 = self._draw(r)
            with np.errstate(divide="ignore"):
                taupp = np.where(a0c[pending] > 0, -np.log(u0) / a0c[pending], np.inf)
            use_crit = ~(taup[pending] < taupp)
            tau = np.where(use_crit, taupp, taup[pending])
            crit_a = np.where(critical[pending], a[pending], 0.0)
            cum = np.cumsum(crit_a, axis=1)
            chosen = np.minimum((cum <= (u1 * a0c[pending])[:, None]).sum(axis=1),
                                a.shape[1] - 1)
            # past the total: the last critical reaction, as the compiled loop ends on it
            last_crit = a.shape[1] - 1 - np.argmax(critical[pending][:, ::-1], axis=1)
            chosen = np.where(chosen >= a.shape[1] - 1, np.minimum(chosen, last_crit), chosen)
            chosen = np.where(use_crit, chosen, -1)
            cap = tau >= left[pending]
            tau = np.where(cap, left[pending], tau)
            chosen = np.where(cap, -1, chosen)
            counts = np.zeros((len(pending), a.shape[1]), np.int64)
            for j in range(a.shape[1]):
                crit_j = critical[pending, j]
                counts[crit_j, j] = (chosen[crit_j] == j)
                free = np.flatnonzero(~crit_j)
                if free.size:
                    counts[free, j] = self._poisson(r[free], a[pending[free], j] * tau[free])
            x_new = self.x[r] + counts @ self.change
            bad = (x_new < 0).any(axis=1)
            good = ~bad
            self.x[r[good]] = x_new[good]
            self.reactions_fired += int(counts[good].sum())
            done = good & (tau == left[pending])
            self._finish(r[done], t_to)
            moved = good & ~done
            self.t[r[moved]] += tau[moved]
            taup[pending[bad]] /= 2.0
            pending = pending[bad]

    def _finish(self, rows: np.ndarray, t_to: float) -> None:
        self.t[rows] = t_to
        self.active[rows] = False

    def advance(self, t_to: float, max_steps: int = 1 << 62) -> bool:
        for _ in range(min(max_steps, 1 << 62)):
            rows = np.flatnonzero(self.active)
            if rows.size == 0:
                break
            a = self._propensities(rows)
            check_propensities(self.net, a, rows, self.x[rows], self.t[rows])
            a0 = a.sum(axis=1)
            stop = ~(t_to - self.t[rows] > 0) | ~(a0 > 0)
            self._finish(rows[stop], t_to)
            rows, a, a0 = rows[~stop], a[~stop], a0[~stop]
            critical = self._critical(rows, a)
            taup = self._tau_prime(rows, a, critical)
            left = t_to - self.t[rows]
            work = np.where(taup < SSA_THRESHOLD / a0, a0 * left, left / taup)
            slow = over_budget(work, a0, rows, self.reactions_fired / max(self.realizations, 1),
                               self._first_over)
            stop_leaping(self, rows[slow], np.full(self.realizations, -2), t_to)
            exact = taup < SSA_THRESHOLD / a0
            self._exact_steps(rows[exact], a[exact], t_to)
            self._leap(rows[~exact], a[~exact], critical[~exact], taup[~exact], t_to)
        return self._interval_ended(t_to)

    def states(self) -> np.ndarray:
        return self.x.copy()

    def stats(self, keep_states: bool) -> IntervalStats:
        return host_stats(self.x, self.hist_idx, self.bins, keep_states)

    def counts(self) -> np.ndarray:
        return self.x

    def restore_fired(self, total: int) -> None:
        self.reactions_fired = total


def _g(hor: int, need: int, x: np.ndarray) -> np.ndarray:
    """CGP's g_i (as ``tauleap._g``) over counts ``x``."""
    if hor == 1:
        return np.ones_like(x)
    d1 = 1.0 / np.maximum(x - 1.0, 1.0)
    if hor == 2:
        return 2.0 + d1 if need >= 2 else np.full_like(x, 2.0)
    if need >= 3:
        return 3.0 + d1 + 2.0 / np.maximum(x - 2.0, 1.0)
    if need == 2:
        return 1.5 * (2.0 + d1)
    return np.full_like(x, 3.0)
