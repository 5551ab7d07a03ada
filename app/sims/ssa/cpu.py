"""The CPU (NumPy) SSA engine: direct and logarithmic direct methods, vectorized across
realizations, float64, with dependency-graph propensity updates and the shared Philox streams.

Every vectorized step fires at most one reaction in each realization that has not reached
the next sample time. Draw ``n`` of realization ``r`` is Philox draw ``(seed, stream=r, n)``:
word 0 gives the waiting time, word 1 the reaction, exactly as in ``kernels/ssa.cu``.
"""

from __future__ import annotations

import numpy as np

from app.compute import philox
from app.compute.codegen import evaluate
from app.sims.common.engine import choose
from app.sims.ssa import events
from app.sims.ssa.engine import (CountOverflow, EnsembleEngine, IntervalStats, check_propensities,
                                 host_stats)
from app.sims.ssa.model import Network

INT64_MAX = np.int64(2**63 - 1)
DRAW_BLOCK = 32  # Philox draws generated at once per realization (amortizes NumPy overhead)


def _linear_search(cum: np.ndarray, target: np.ndarray) -> np.ndarray:
    """The direct method: count the cumulative propensities at or below the target."""
    return (cum <= target[:, None]).sum(axis=1)


def _binary_search(cum: np.ndarray, target: np.ndarray) -> np.ndarray:
    """The logarithmic direct method: binary search on the cumulative propensities."""
    lo = np.zeros(len(target), np.int64)
    hi = np.full(len(target), cum.shape[1] - 1, np.int64)
    rows = np.arange(len(target))
    while (lo < hi).any():
        mid = (lo + hi) // 2
        right = cum[rows, mid] <= target
        lo = np.where(right, mid + 1, lo)
        hi = np.where(right, hi, mid)
    return lo


SEARCHES = {"direct": _linear_search, "logdirect": _binary_search}   # by config algorithm name


class CpuEnsemble(EnsembleEngine):
    """R realizations of ``network`` advanced together in NumPy."""

    def __init__(self, network: Network, realizations: int, seed: int, algorithm: str,
                 hist_idx: list[int], bins: int, t0: float = 0.0):
        self.net, self.realizations, self.seed = network, realizations, seed
        self.algorithm, self.hist_idx, self.bins = algorithm, hist_idx, bins
        self.search = choose(SEARCHES, algorithm, "SSA algorithm")
        s, m = network.n_species, network.n_reactions
        self.x = np.zeros((realizations, s + 1), np.int64)   # last column: a dummy species
        self.x[:, :s] = network.x0
        self.rates = network.rates.copy()
        self.change = np.zeros((m, s + 1), np.int64)
        self.change[:, :s] = network.change
        self._reactant_tables()
        self._dependency_table()
        self.bits = np.full(realizations, events.initial_bits(network), np.uint32)
        self.event_times = events.event_times(network)
        self.a = self._propensities(np.arange(realizations)[:, None], np.arange(m)[None, :])
        self.t = np.full(realizations, t0)
        self.active = np.ones(realizations, bool)
        self.draws = np.zeros(realizations, np.uint64)
        self._buf_base = np.full(realizations, np.uint64(2**63))
        self._buf = np.zeros((realizations, DRAW_BLOCK, 2), np.uint32)
        self.reactions_fired = 0
        self._first_over = np.zeros(realizations)   # firing budget: see engine.over_budget

    # ---- tables ---------------------------------------------------------------------------
    def _reactant_tables(self) -> None:
        lists = self.net.reactant_lists()
        width = max(1, max(len(l) for l in lists))
        dummy = self.net.n_species
        self.r_species = np.full((len(lists), width), dummy, np.int64)
        self.r_order = np.zeros((len(lists), width), np.int64)
        for j, pairs in enumerate(lists):
            for q, (s, m) in enumerate(pairs):
                self.r_species[j, q], self.r_order[j, q] = s, m

    def _dependency_table(self) -> None:
        deps = self.net.dependents()
        width = max(1, max(len(d) for d in deps))
        self.dep = np.full((len(deps), width), -1, np.int64)
        for j, d in enumerate(deps):
            self.dep[j, :len(d)] = d

    def _propensities(self, rows: np.ndarray, reactions: np.ndarray) -> np.ndarray:
        """Propensities of ``reactions`` in realizations ``rows`` (broadcast together)."""
        rows, reactions = np.broadcast_arrays(rows, reactions)
        a = self.rates[reactions].astype(np.float64)
        for q in range(self.r_species.shape[1]):
            v = self.x[rows, self.r_species[reactions, q]].astype(np.float64)
            m = self.r_order[reactions, q]
            term = np.where(m >= 1, v, 1.0)
            term = term * np.where(m >= 2, np.maximum(v - 1, 0) / 2, 1.0)
            term = term * np.where(m >= 3, np.maximum(v - 2, 0) / 3, 1.0)
            a = a * term
        guards = self.net.guards()
        for j, law in enumerate(self.net.laws or ()):
            if law is not None:
                hit = reactions == j
                if hit.any():
                    env = self.net.species_env(self.x[rows[hit], :-1])
                    a[hit] = a[hit] * evaluate(law, env)     # unclamped: a bad value stops the run
                    for s, n in guards[j]:
                        a[hit] = np.where(self.x[rows[hit], s] >= n, a[hit], 0.0)
        return a

    def _refresh_rows(self, rows: np.ndarray) -> None:
        """Every propensity of realizations ``rows`` (after an event)."""
        if rows.size:
            self.a[rows] = self._propensities(rows[:, None], np.arange(self.net.n_reactions)[None, :])

    # ---- random numbers -------------------------------------------------------------------
    def _uniforms(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n = self.draws[idx]
        stale = (n < self._buf_base[idx]) | (n >= self._buf_base[idx] + np.uint64(DRAW_BLOCK))
        if stale.any():
            rows = idx[stale]
            base = n[stale]
            streams = np.repeat(rows.astype(np.uint64), DRAW_BLOCK)
            counters = (base[:, None] + np.arange(DRAW_BLOCK, dtype=np.uint64)).ravel()
            words = philox.draw(self.seed, streams, counters)
            self._buf[rows] = words[:2].T.reshape(len(rows), DRAW_BLOCK, 2)
            self._buf_base[rows] = base
        offset = (n - self._buf_base[idx]).astype(np.int64)
        w = self._buf[idx, offset]
        self.draws[idx] = n + np.uint64(1)
        return philox.to_unit_float64(w[:, 0]), philox.to_unit_float64(w[:, 1])

    # ---- the algorithm --------------------------------------------------------------------
    def _select(self, a: np.ndarray, target: np.ndarray) -> np.ndarray:
        """Index of the first reaction whose cumulative propensity exceeds ``target``."""
        m = a.shape[1]
        j = self.search(np.cumsum(a, axis=1), target)
        # rounding can put target at the very top: fall back to the last reaction that can fire
        overflow = j >= m
        if overflow.any():
            last = m - 1 - np.argmax(a[overflow][:, ::-1] > 0, axis=1)
            j[overflow] = last
        return j

    def advance(self, t_to: float, max_steps: int = 1 << 62) -> bool:
        steps = 0
        while steps < max_steps:
            idx = np.flatnonzero(self.active)
            if idx.size == 0:
                break
            a = self.a[idx]
            check_propensities(self.net, a, idx, self.x[idx], self.t[idx], t_to,
                               fired=self.reactions_fired / max(len(self.active), 1),
                               first_over=self._first_over)
            u1, u2 = self._uniforms(idx)
            a0 = a.sum(axis=1)
            with np.errstate(divide="ignore"):
                t_new = self.t[idx] - np.log(u1) / a0
            fire = t_new <= t_to
            stopped = self._time_events(idx, t_new, t_to) if self.net.events else ~fire & False
            fire &= ~stopped
            self.active[idx[~fire & ~stopped]] = False
            rows = idx[fire]
            if rows.size:
                j = self._select(a[fire], u2[fire] * a0[fire])
                room = INT64_MAX - self.x[rows]
                over = (self.change[j] > 0) & (room < self.change[j])
                if over.any():
                    k, s = np.argwhere(over)[0]
                    raise CountOverflow(self.net.species[int(s)], INT64_MAX, int(rows[k]))
                self.x[rows] += self.change[j]
                self.t[rows] = t_new[fire]
                deps = self.dep[j]
                valid = deps >= 0
                r2 = np.broadcast_to(rows[:, None], deps.shape)[valid]
                k2 = deps[valid]
                self.a[r2, k2] = self._propensities(r2, k2)
                self.reactions_fired += rows.size
                if self.net.events:
                    sub_x, sub_bits = self.x[rows], self.bits[rows]
                    hit = events.species_events(self.net, sub_x, sub_bits)
                    self.x[rows], self.bits[rows] = sub_x, sub_bits
                    self._refresh_rows(rows[hit])
            steps += 1
        return self._interval_ended(t_to)

    def _time_events(self, idx: np.ndarray, t_new: np.ndarray, t_to: float) -> np.ndarray:
        """Fire the time events due before each row's next reaction (those rows' draws are
        discarded: they go on from the event instant); returns the mask of those rows."""
        due = events.next_event_time(self.event_times, self.bits[idx])
        stop = (due <= t_to) & (due < t_new)
        if stop.any():
            rows = idx[stop]
            sub_x, sub_bits = self.x[rows], self.bits[rows]
            events.time_events(self.net, self.event_times, sub_x, sub_bits, due[stop])
            self.x[rows], self.bits[rows] = sub_x, sub_bits
            self.t[rows] = due[stop]
            self._refresh_rows(rows)
        return stop

    def states(self) -> np.ndarray:
        x = self.x[:, :-1].copy()
        events.apply_derived(self.net, x)
        return x

    def stats(self, keep_states: bool) -> IntervalStats:
        x = self.x[:, :-1]
        if self.net.derived:
            x = self.states()
        return host_stats(x, self.hist_idx, self.bins, keep_states)

    def set_rates(self, rates: np.ndarray) -> None:
        self.rates = np.asarray(rates, np.float64).copy()
        m = self.net.n_reactions
        self.a = self._propensities(np.arange(self.realizations)[:, None], np.arange(m)[None, :])

    def state(self) -> dict[str, np.ndarray]:
        return {"x": self.states(), "draws": self.draws.copy(), "t": self.t.copy(),
                "active": self.active.copy(), "rates": self.rates.copy(),
                "events": self.bits.copy(), "reactions_fired": np.int64(self.reactions_fired)}

    def restore(self, state: dict[str, np.ndarray]) -> None:
        self.x[:, :-1] = state["x"]
        if "events" in state:
            self.bits[:] = state["events"]
        self.draws[:] = state["draws"]
        self.t[:] = state["t"]
        self.active[:] = state["active"]
        self.reactions_fired = int(state["reactions_fired"])
        self.set_rates(state["rates"])
