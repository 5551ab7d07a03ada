"""The compiled multi-core CPU SSA engine (numba): the NumPy engine's algorithm, one
realization per loop iteration, realizations spread over all cores.

Same Philox streams as :mod:`app.sims.ssa.cpu` (draw ``n`` of realization ``r``: word 0 the
waiting time, word 1 the reaction, float64 uniforms from 32 bits), same dropped-reaction rule
at sample times, same dependency-graph updates and the same checkpoint arrays, so a run can
move between ``cpu`` and ``cpu-reference`` mid-way. Propensities are mass action from the
network's reactant tables, so one compiled function (cached on disk) serves every network.
The compiled loops release the GIL, so the GUI thread runs while a worker advances.
"""

from __future__ import annotations

import math
import time

import numpy as np
from numba import njit, prange

from app.compute.jit import CACHE
from app.compute.philox_numba import philox_words, unit_float64
from app.sims.common.engine import choose
from app.sims.ssa.cpu import CpuEnsemble
from app.sims.ssa.engine import EnsembleEngine, IntervalStats, host_stats
from app.sims.ssa.model import Network


@njit(inline="always", cache=CACHE, error_model="numpy")
def _propensity(x, r, j, rates, r_species, r_order):
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


@njit(parallel=True, nogil=True, cache=CACHE, error_model="numpy")
def _advance(x, a, cum, t, active, draws, fired, rates, r_species, r_order, change, dep,
             key_lo, key_hi, t_to, max_steps, logdirect):
    """Advance every active realization by up to ``max_steps`` reactions towards ``t_to``."""
    n_real, m = a.shape
    for r in prange(n_real):
        if not active[r]:
            continue
        count = 0
        for _ in range(max_steps):
            w0, w1, _w2, _w3 = philox_words(key_lo, key_hi, draws[r], np.uint64(r))
            draws[r] += np.uint64(1)
            a0 = 0.0
            for k in range(m):
                a0 += a[r, k]
                cum[r, k] = a0
            t_new = t[r] - math.log(unit_float64(w0)) / a0
            if not t_new <= t_to:
                active[r] = False
                break
            target = unit_float64(w1) * a0
            j = m
            if logdirect:
                lo, hi = 0, m - 1
                while lo < hi:
                    mid = (lo + hi) // 2
                    if cum[r, mid] <= target:
                        lo = mid + 1
                    else:
                        hi = mid
                if cum[r, lo] > target:
                    j = lo
            else:
                for k in range(m):
                    if cum[r, k] > target:
                        j = k
                        break
            if j >= m:  # rounding put the target at the very top: the last reaction that can fire
                j = m - 1
                while j > 0 and a[r, j] <= 0.0:
                    j -= 1
            for s in range(change.shape[1]):
                x[r, s] += change[j, s]
            t[r] = t_new
            for q in range(dep.shape[1]):
                k = dep[j, q]
                if k < 0:
                    break
                a[r, k] = _propensity(x, r, k, rates, r_species, r_order)
            count += 1
        fired[r] += count


@njit(parallel=True, nogil=True, cache=CACHE, error_model="numpy")
def _all_propensities(x, a, rates, r_species, r_order):
    for r in prange(a.shape[0]):
        for j in range(a.shape[1]):
            a[r, j] = _propensity(x, r, j, rates, r_species, r_order)


def warm_up() -> float:
    """Compile (or load from the on-disk cache) every function; returns the seconds it took."""
    start = time.perf_counter()
    x = np.zeros((1, 2), np.int64)
    a = np.zeros((1, 1))
    tables = (np.ones(1), np.zeros((1, 1), np.int64), np.ones((1, 1), np.int64),
              np.zeros((1, 2), np.int64), np.full((1, 1), -1, np.int64))
    _all_propensities(x, a, *tables[:3])
    _advance(x, a, np.zeros((1, 1)), np.zeros(1), np.ones(1, np.bool_), np.zeros(1, np.uint64),
             np.zeros(1, np.int64), *tables, np.uint64(0), np.uint64(0), 0.0, 0, False)
    return time.perf_counter() - start


LOG_SEARCH = {"direct": False, "logdirect": True}   # algorithm name -> binary search in _advance


class CompiledEnsemble(EnsembleEngine):
    """R realizations of ``network`` in compiled code over all cores (numba threads)."""

    def __init__(self, network: Network, realizations: int, seed: int, algorithm: str,
                 hist_idx: list[int], bins: int, t0: float = 0.0):
        self.log_search = choose(LOG_SEARCH, algorithm, "SSA algorithm")
        self.compile_seconds = warm_up()
        # the NumPy engine builds the tables (dummy species column, reactant and dependency rows)
        tables = CpuEnsemble.__new__(CpuEnsemble)
        tables.net = network
        tables._reactant_tables()
        tables._dependency_table()
        self.net, self.realizations, self.seed = network, realizations, seed
        self.algorithm, self.hist_idx, self.bins = algorithm, hist_idx, bins
        s, m = network.n_species, network.n_reactions
        self.r_species, self.r_order, self.dep = tables.r_species, tables.r_order, tables.dep
        self.change = np.zeros((m, s + 1), np.int64)
        self.change[:, :s] = network.change
        self.x = np.zeros((realizations, s + 1), np.int64)   # last column: the dummy species
        self.x[:, :s] = network.x0
        self.rates = network.rates.astype(np.float64).copy()
        self.a = np.zeros((realizations, m))
        self._cum = np.zeros((realizations, m))
        self.t = np.full(realizations, float(t0))
        self.active = np.ones(realizations, np.bool_)
        self.draws = np.zeros(realizations, np.uint64)
        self._fired = np.zeros(realizations, np.int64)
        self._base_fired = 0
        seed64 = int(seed) & 0xFFFFFFFFFFFFFFFF
        self._key = (np.uint64(seed64 & 0xFFFFFFFF), np.uint64(seed64 >> 32))
        self._refresh()

    @property
    def reactions_fired(self) -> int:
        return self._base_fired + int(self._fired.sum())

    def _refresh(self) -> None:
        _all_propensities(self.x, self.a, self.rates, self.r_species, self.r_order)

    def advance(self, t_to: float, max_steps: int = 1 << 62) -> bool:
        _advance(self.x, self.a, self._cum, self.t, self.active, self.draws, self._fired,
                 self.rates, self.r_species, self.r_order, self.change, self.dep,
                 self._key[0], self._key[1], float(t_to), int(min(max_steps, 1 << 62)),
                 self.log_search)
        if self.active.any():
            return False
        self.t[:] = t_to
        self.active[:] = True
        return True

    def states(self) -> np.ndarray:
        return self.x[:, :-1].copy()

    def stats(self, keep_states: bool) -> IntervalStats:
        return host_stats(self.x[:, :-1], self.hist_idx, self.bins, keep_states)

    def set_rates(self, rates: np.ndarray) -> None:
        self.rates = np.asarray(rates, np.float64).copy()
        self._refresh()

    def state(self) -> dict[str, np.ndarray]:
        return {"x": self.states(), "draws": self.draws.copy(), "t": self.t.copy(),
                "active": self.active.copy(), "rates": self.rates.copy(),
                "reactions_fired": np.int64(self.reactions_fired)}

    def restore(self, state: dict[str, np.ndarray]) -> None:
        self.x[:, :-1] = state["x"]
        self.draws[:] = state["draws"]
        self.t[:] = state["t"]
        self.active[:] = state["active"]
        self._fired[:] = 0
        self._base_fired = int(state["reactions_fired"])
        self.set_rates(state["rates"])
