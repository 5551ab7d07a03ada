"""What both SSA engines return after each sample interval."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.sims.common.engine import EngineBase
from app.sims.ssa.stats import Histogram, histogram, moments

ALGORITHMS = ("direct", "logdirect", "tau-leap")   # config names; each engine dispatches by a table


@dataclass(frozen=True)
class IntervalStats:
    """Ensemble statistics at one sample time."""

    mean: np.ndarray                  # (S,)
    var: np.ndarray                   # (S,)
    histograms: tuple[Histogram, ...]  # one per histogram species
    states: np.ndarray | None         # (R, S) int64 where full samples were asked for


def host_stats(states: np.ndarray, hist_idx: list[int], bins: int, keep_states: bool) -> IntervalStats:
    """Statistics of states (R, S) computed on the host: the CPU engine's path and the reference."""
    mean, var = moments(states)
    hists = tuple(histogram(states[:, s], bins) for s in hist_idx)
    return IntervalStats(mean, var, hists, states.copy() if keep_states else None)


def initial_stats(net, realizations: int, hist_idx: list[int], bins: int,
                  keep_states: bool) -> IntervalStats:
    """Statistics of the deterministic initial state (every realization starts at x0)."""
    if net.derived:
        from app.sims.ssa.events import apply_derived
        x0 = net.x0[None, :].copy()
        apply_derived(net, x0)
        net = net.with_values(x0=x0[0])
    hists = tuple(Histogram(int(net.x0[s]), 1, np.eye(1, bins, dtype=np.int64)[0] * realizations)
                  for s in hist_idx)
    states = np.broadcast_to(net.x0, (realizations, net.n_species)).copy() if keep_states else None
    return IntervalStats(net.x0.astype(np.float64), np.zeros(net.n_species), hists, states)


class CountOverflow(RuntimeError):
    """A reaction would push a species count past what the engine's integers hold; the
    realization stopped before it (its state is the last valid one)."""

    def __init__(self, species: str, limit: int, realization: int | None = None):
        self.species, self.limit, self.realization = species, limit, realization
        where = f" in realization {realization}" if realization is not None else ""
        super().__init__(f"the count of {species}{where} would exceed {limit:,} (the engine's "
                         "integer range); the run stopped before the overflow")


def overflowing_species(x: np.ndarray, change: np.ndarray, limit: int) -> int | None:
    """Index of a species that one more firing of some reaction would push past ``limit`` in
    any realization of ``x`` (R, S), else None (a conservative check on the host)."""
    up = change.max(axis=0)[: x.shape[1]]
    bad = (up > 0) & (x.max(axis=0) > limit - np.maximum(up, 0))
    return int(np.flatnonzero(bad)[0]) if bad.any() else None


class EnsembleEngine(EngineBase, renamed={"checkpoint": "state", "load": "restore"}):
    """The SSA engines' surface (:class:`app.sims.common.engine.Engine`): every engine advances
    every realization to a time."""

    realizations: int
    reactions_fired: int

    def advance(self, t_to: float, max_steps: int) -> bool:
        """Advance towards ``t_to``; True once every realization is there."""
        raise NotImplementedError

    def _interval_ended(self, t_to: float) -> bool:
        """For the CPU engines (arrays ``t`` and ``active``): False while a realization is still
        inside the interval; else every realization restarts at ``t_to``, and True."""
        if self.active.any():   # type: ignore[attr-defined]
            return False
        self.t[:] = t_to        # type: ignore[attr-defined]
        self.active[:] = True   # type: ignore[attr-defined]
        return True

    def stats(self, keep_states: bool) -> IntervalStats:
        raise NotImplementedError

    def states(self) -> np.ndarray:
        """(R, S) int64 counts, copied to the host."""
        raise NotImplementedError

    def set_rates(self, rates: np.ndarray) -> None:
        raise NotImplementedError
