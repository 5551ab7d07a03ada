"""Explicit tau-leaping (Cao, Gillespie & Petzold 2006, J. Chem. Phys. 124, 044109) on the
compiled CPU engine; ``kernels/ssa.cu`` (``ssa_tau_advance``) runs the same steps per thread.

Per realization and step: propensities ``a``; a reaction is *critical* when ``a_j > 0`` and it
can fire fewer than ``N_CRITICAL`` (10) more times before a reactant runs out. The leap ``tau'``
bounds the expected change and the standard deviation of every reactant species by
``max(eps x_i / g_i, 1)`` over the non-critical reactions (``g_i`` from the highest order of
reaction the species takes part in, CGP eq. 27). When ``tau' < 10 / a0`` the realization takes
up to 100 exact SSA steps instead. Otherwise ``tau''`` ~ Exp(sum of critical a); the step is the
smaller of the two (and never past the next sample time); non-critical reactions fire
Poisson(a_j tau) times, one critical reaction fires once when ``tau''`` was smaller. A step that
would make a count negative is redrawn with ``tau'`` halved, so counts never go negative.

Random numbers: Philox draw ``n`` of realization ``r`` as in the direct method. A leap takes one
draw (word 0: ``tau''``, word 1: which critical reaction), then the Poisson counts in reaction
order: inversion by sequential search (one draw) below mean 10, Hormann's PTRS transformed
rejection (one draw per trial, words 0 and 1) above. An SSA step takes one draw as in the direct
method. Tau-leaping runs mass-action networks without events (events need exact reaction
times; general laws keep the direct method).
"""

from __future__ import annotations

import math
import time

import numpy as np
from numba import njit, prange, uint64

from app.compute.jit import CACHE
from app.compute.philox_numba import philox_words, unit_float64
from app.sims.ssa.engine import (BUDGET_GROWTH, FIRINGS_BEFORE_LIMIT, MAX_FIRINGS, BadPropensity, EnsembleEngine,
                                 IntervalStats, TooManyFirings, host_stats)
from app.sims.ssa.model import Network

N_CRITICAL = 10
SSA_STEPS = 100
SSA_THRESHOLD = 10.0
POISSON_INVERSION_BELOW = 10.0
DEFAULT_EPSILON = 0.03


def check_network(net: Network) -> None:
    """Tau-leaping needs a mass-action network without events or rules."""
    if net.general:
        raise ValueError("tau-leaping runs mass-action networks without events or assignment "
                         "rules; use the direct method for this model")


def species_orders(net: Network) -> tuple[np.ndarray, np.ndarray]:
    """(hor, need) per species: the highest order of a reaction it is a reactant of, and the
    most molecules of it such a reaction takes (CGP 2006 section IV)."""
    s = net.n_species
    hor, need = np.zeros(s, np.int64), np.zeros(s, np.int64)
    for row in net.reactant_order:
        order = int(row.sum())
        for i in np.flatnonzero(row):
            if order > hor[i]:
                hor[i], need[i] = order, row[i]
            elif order == hor[i]:
                need[i] = max(need[i], row[i])
    return hor, need


@njit(inline="always", cache=CACHE, error_model="numpy")
def mass_action(x, r, j, rates, r_species, r_order):
    """c_j * prod C(x_s, m_s) of realization ``r`` (Gillespie's combinatorial convention)."""
    a = rates[j]
    for q in range(r_species.shape[1]):
        v = np.float64(x[r, r_species[j, q]])
        m = r_order[j, q]
        if m >= 1:
            a *= v
        if m >= 2:
            a *= max(v - 1.0, 0.0) / 2.0
        if m >= 3:
            a *= max(v - 2.0, 0.0) / 3.0
    return a


@njit(cache=CACHE, error_model="numpy")
def poisson(lam, key_lo, key_hi, draws, r):
    """A Poisson(lam) count from realization ``r``'s Philox stream (advancing ``draws[r]``)."""
    if not lam > 0.0:
        return 0
    if lam < POISSON_INVERSION_BELOW:
        w0, _w1, _w2, _w3 = philox_words(key_lo, key_hi, draws[r], uint64(r))
        draws[r] += uint64(1)
        u = unit_float64(w0)
        k = 0
        p = math.exp(-lam)
        s = p
        while u > s and k < 1000:
            k += 1
            p *= lam / k
            s += p
        return k
    slam = math.sqrt(lam)
    loglam = math.log(lam)
    b = 0.931 + 2.53 * slam
    a = -0.059 + 0.02483 * b
    invalpha = 1.1239 + 1.1328 / (b - 3.4)
    vr = 0.9277 - 3.6224 / (b - 2.0)
    while True:
        w0, w1, _w2, _w3 = philox_words(key_lo, key_hi, draws[r], uint64(r))
        draws[r] += uint64(1)
        u = unit_float64(w0) - 0.5
        v = unit_float64(w1)
        us = 0.5 - abs(u)
        k = math.floor((2.0 * a / us + b) * u + lam + 0.43)
        if us >= 0.07 and v <= vr:
            return int(k)
        if k < 0 or (us < 0.013 and v > us):
            continue
        if math.log(v) + math.log(invalpha) - math.log(a / (us * us) + b) <= \
                -lam + k * loglam - math.lgamma(k + 1.0):
            return int(k)


@njit(inline="always", cache=CACHE, error_model="numpy")
def _g(hor, need, xi):
    if hor == 1:
        return 1.0
    d1 = 1.0 / max(xi - 1.0, 1.0)
    if hor == 2:
        return 2.0 + d1 if need >= 2 else 2.0
    if need >= 3:
        return 3.0 + d1 + 2.0 / max(xi - 2.0, 1.0)
    if need == 2:
        return 1.5 * (2.0 + d1)
    return 3.0


@njit(cache=CACHE, error_model="numpy")
def tau_prime(x, r, a, critical, change, hor, need, eps):
    """CGP's leap bound from the non-critical reactions (inf when all are critical)."""
    tau = math.inf
    for i in range(hor.shape[0]):
        if hor[i] == 0:
            continue
        mu = 0.0
        sig = 0.0
        for j in range(change.shape[0]):
            if critical[r, j] or change[j, i] == 0:
                continue
            mu += change[j, i] * a[r, j]
            sig += change[j, i] * change[j, i] * a[r, j]
        bound = max(eps * x[r, i] / _g(hor[i], need[i], np.float64(x[r, i])), 1.0)
        if mu != 0.0:
            tau = min(tau, bound / abs(mu))
        if sig > 0.0:
            tau = min(tau, bound * bound / sig)
    return tau


@njit(cache=CACHE, error_model="numpy")
def _advance_one(x, r, a, critical, x_new, t, t_to, draws, rates, r_species, r_order, change,
                 hor, need, eps, key_lo, key_hi, max_steps, fired_before, first_over):
    """Leap (or SSA-step) realization ``r`` towards ``t_to``; (reactions fired, code): code 1
    reached t_to, 0 not yet, -1 a propensity that is not finite, -2 more than MAX_FIRINGS
    leaps or firings needed to reach t_to, trusted as :func:`app.sims.ssa.engine.over_budget`
    trusts it (``fired_before`` firings so far, ``first_over[r]``); the realization stays at
    its state."""
    m, s = change.shape[0], hor.shape[0]
    fired = 0
    for _ in range(max_steps):
        a0 = 0.0
        for j in range(m):
            a[r, j] = mass_action(x, r, j, rates, r_species, r_order)
            a0 += a[r, j]
        left = t_to - t[r]
        if not left > 0.0:
            return fired, 1
        if not a0 < math.inf:
            return fired, -1
        if not a0 > 0.0:
            t[r] = t_to
            return fired, 1
        a0c = 0.0
        for j in range(m):
            critical[r, j] = False
            if a[r, j] > 0.0:
                runs = N_CRITICAL
                for i in range(s):
                    if change[j, i] < 0:
                        runs = min(runs, x[r, i] // -change[j, i])
                if runs < N_CRITICAL:
                    critical[r, j] = True
                    a0c += a[r, j]
        taup = tau_prime(x, r, a, critical, change, hor, need, eps)
        # exact steps (a0 per unit time) or leaps of tau' (1 / tau' per unit time): hours of them
        if (a0 * left if taup < SSA_THRESHOLD / a0 else left / taup) > MAX_FIRINGS:
            if fired_before + fired > FIRINGS_BEFORE_LIMIT or (
                    first_over[r] > 0.0 and a0 >= BUDGET_GROWTH * first_over[r]):
                return fired, -2
            if first_over[r] == 0.0:
                first_over[r] = a0
        else:
            first_over[r] = 0.0
        if taup < SSA_THRESHOLD / a0:
            for _k in range(SSA_STEPS):       # exact steps, as the direct method takes them
                w0, w1, _w2, _w3 = philox_words(key_lo, key_hi, draws[r], uint64(r))
                draws[r] += uint64(1)
                t_new = t[r] - math.log(unit_float64(w0)) / a0
                if not t_new <= t_to:
                    t[r] = t_to
                    return fired, 1
                target = unit_float64(w1) * a0
                acc = 0.0
                pick = -1
                for j in range(m):
                    acc += a[r, j]
                    if pick < 0 and target < acc:
                        pick = j
                if pick < 0:
                    pick = m - 1
                    while pick > 0 and a[r, pick] <= 0.0:
                        pick -= 1
                for i in range(s):
                    x[r, i] += change[pick, i]
                t[r] = t_new
                fired += 1
                a0 = 0.0
                for j in range(m):
                    a[r, j] = mass_action(x, r, j, rates, r_species, r_order)
                    a0 += a[r, j]
                if not a0 < math.inf:
                    return fired, -1
                if not a0 > 0.0:
                    t[r] = t_to
                    return fired, 1
            continue
        while True:
            w0, w1, _w2, _w3 = philox_words(key_lo, key_hi, draws[r], uint64(r))
            draws[r] += uint64(1)
            taupp = -math.log(unit_float64(w0)) / a0c if a0c > 0.0 else math.inf
            chosen = -1
            if taup < taupp:
                tau = taup
            else:
                tau = taupp
                target = unit_float64(w1) * a0c
                acc = 0.0
                for j in range(m):
                    if critical[r, j]:
                        acc += a[r, j]
                        chosen = j
                        if target < acc:
                            break
            if tau >= left:
                tau = left
                chosen = -1
            total = 0
            for i in range(s):
                x_new[r, i] = x[r, i]
            for j in range(m):
                if critical[r, j]:
                    k = 1 if j == chosen else 0
                else:
                    k = poisson(a[r, j] * tau, key_lo, key_hi, draws, r)
                total += k
                if k:
                    for i in range(s):
                        x_new[r, i] += k * change[j, i]
            negative = False
            for i in range(s):
                if x_new[r, i] < 0:
                    negative = True
            if not negative:
                break
            taup = taup / 2.0
        for i in range(s):
            x[r, i] = x_new[r, i]
        fired += total
        if tau == left:
            t[r] = t_to
            return fired, 1
        t[r] += tau
    return fired, 0


@njit(parallel=True, nogil=True, cache=CACHE, error_model="numpy")
def advance_all(x, a, critical, x_new, t, active, draws, fired, rates, r_species, r_order, change,
                hor, need, eps, key_lo, key_hi, t_to, max_steps, stop, first_over):
    """Every active realization towards ``t_to`` (inactive once there), over all cores;
    ``stop[r]`` gets :func:`_advance_one`'s negative codes."""
    for r in prange(x.shape[0]):
        if not active[r]:
            continue
        count, code = _advance_one(x, r, a, critical, x_new, t, t_to, draws, rates, r_species,
                                   r_order, change, hor, need, eps, key_lo, key_hi, max_steps,
                                   fired[r], first_over)
        fired[r] += count
        if code != 0:
            active[r] = False
        if code < 0:
            stop[r] = code


def stop_leaping(engine, rows: np.ndarray, codes: np.ndarray, t_to: float) -> None:
    """Raise for the first of ``rows`` (realizations a tau-leaping engine stopped, with
    :func:`_advance_one`'s codes) what stopped it."""
    if not rows.size:
        return
    r = int(rows[0])
    net, x, t = engine.net, engine.counts()[r], float(engine.t[r])
    a = net.propensities(x)
    if codes[r] == -1:
        j = int(np.flatnonzero(~(a < np.inf))[0]) if (~(a < np.inf)).any() else 0
        raise BadPropensity(net.reaction_names[j], float(a[j]), t, net.species, x, r)
    # the leap the engine would take is at most the exact step's mean (1 / a0) in this message
    raise TooManyFirings(float(a.sum()), t, t_to, net.species, x, r)


class LeapCheckpoint(EnsembleEngine):
    """The checkpoint arrays and rates of the two tau-leaping engines (they differ only in where
    their counts live, :meth:`counts`, and how they count firings, :meth:`restore_fired`)."""

    def counts(self) -> np.ndarray:
        """The (R, S) counts, a writable view."""
        raise NotImplementedError

    def restore_fired(self, total: int) -> None:
        raise NotImplementedError

    def set_rates(self, rates: np.ndarray) -> None:
        self.rates = np.asarray(rates, np.float64).copy()

    def state(self) -> dict[str, np.ndarray]:
        return {"x": self.counts().copy(), "draws": self.draws.copy(), "t": self.t.copy(),
                "active": self.active.copy(), "rates": self.rates.copy(),
                "reactions_fired": np.int64(self.reactions_fired)}

    def restore(self, state: dict[str, np.ndarray]) -> None:
        self.counts()[:] = state["x"]
        self.draws[:] = state["draws"]
        self.t[:] = state["t"]
        self.active[:] = state["active"]
        self.restore_fired(int(state["reactions_fired"]))
        self.set_rates(state["rates"])


class TauLeapEnsemble(LeapCheckpoint):
    """The compiled tau-leaping engine (same surface and checkpoint arrays as the SSA engines)."""

    def __init__(self, network: Network, realizations: int, seed: int, hist_idx: list[int],
                 bins: int, epsilon: float = DEFAULT_EPSILON, t0: float = 0.0):
        from app.sims.ssa.cpu import CpuEnsemble

        check_network(network)
        start = time.perf_counter()
        tables = CpuEnsemble.__new__(CpuEnsemble)
        tables.net = network
        tables._reactant_tables()
        self.net, self.realizations, self.seed, self.epsilon = network, realizations, seed, epsilon
        self.hist_idx, self.bins = hist_idx, bins
        s, m = network.n_species, network.n_reactions
        self.r_species, self.r_order = tables.r_species, tables.r_order
        self.change = np.ascontiguousarray(network.change, np.int64)
        self.hor, self.need = species_orders(network)
        self.x = np.zeros((realizations, s + 1), np.int64)   # last column: the tables' dummy
        self.x[:, :s] = network.x0
        self.rates = network.rates.astype(np.float64).copy()
        self.a = np.zeros((realizations, m))
        self.critical = np.zeros((realizations, m), np.bool_)
        self.x_new = np.zeros((realizations, s), np.int64)
        self.t = np.full(realizations, float(t0))
        self.active = np.ones(realizations, np.bool_)
        self.draws = np.zeros(realizations, np.uint64)
        self._fired = np.zeros(realizations, np.int64)
        self._stop = np.zeros(realizations, np.int64)
        self._first_over = np.zeros(realizations)   # firing budget: see engine.over_budget
        self._base_fired = 0
        seed64 = int(seed) & 0xFFFFFFFFFFFFFFFF
        self._key = (np.uint64(seed64 & 0xFFFFFFFF), np.uint64(seed64 >> 32))
        self.advance(float(t0), 0)            # compile (or load the cache) now
        self.compile_seconds = time.perf_counter() - start

    reactions_fired = property(lambda self: self._base_fired + int(self._fired.sum()))

    def advance(self, t_to: float, max_steps: int = 1 << 62) -> bool:
        advance_all(self.x, self.a, self.critical, self.x_new, self.t, self.active, self.draws,
                    self._fired, self.rates, self.r_species, self.r_order, self.change, self.hor,
                    self.need, float(self.epsilon), self._key[0], self._key[1], float(t_to),
                    int(min(max_steps, 1 << 62)), self._stop, self._first_over)
        stop_leaping(self, np.flatnonzero(self._stop), self._stop, float(t_to))
        return self._interval_ended(t_to)

    def states(self) -> np.ndarray:
        return self.x[:, :-1].copy()

    def stats(self, keep_states: bool) -> IntervalStats:
        return host_stats(self.x[:, :-1], self.hist_idx, self.bins, keep_states)

    def counts(self) -> np.ndarray:
        return self.x[:, :-1]

    def restore_fired(self, total: int) -> None:
        self._fired[:] = 0
        self._base_fired = total
