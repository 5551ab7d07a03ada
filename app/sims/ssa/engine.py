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


class RunStopped(RuntimeError):
    """The run cannot go on from the state it reached (it stops there, exit code 3)."""


# expected firings (or leaps) of one realization in one sample interval: minutes of work for
# the compiled engines at ~3e7 firings/s, so that a run whose counts explode stops in seconds
MAX_FIRINGS = 1e10
# ... but only once the realization has fired this many: a decaying system's total propensity at
# a sample time overstates the interval's work by orders of magnitude (decay-dimerization's
# 1e7 at t = 0 "asks" for 1e11 firings over t = 1e4, then fires 4e5 in all)
FIRINGS_BEFORE_LIMIT = 1e6
# ... or, sooner, once its total propensity has grown this much since it first asked for too
# many: counts that explode (a stoichiometry of 1e12) are told from a decay in a few firings
BUDGET_GROWTH = 2.0


def _state_text(species: tuple[str, ...], x: np.ndarray) -> str:
    pairs = [f"{n}={int(v)}" for n, v in zip(species, x)]
    return ", ".join(pairs[:12]) + (f", ... ({len(pairs)} species)" if len(pairs) > 12 else "")


class BadPropensity(RunStopped):
    """A propensity that is negative, NaN or infinite at a reached state."""

    def __init__(self, reaction: str, value: float, t: float | str, species: tuple[str, ...],
                 x: np.ndarray, realization: int | None = None):
        self.reaction, self.value = reaction, value
        when = f"t = {t:.6g}" if isinstance(t, float) else t
        where = f" in realization {realization}" if realization is not None else ""
        super().__init__(f"the propensity of reaction {reaction} is {value!r} at {when}{where}, "
                         f"state {_state_text(species, x)}: a propensity must be a finite number "
                         ">= 0 (check its kinetic law or rate at this state); the run stopped there")


class TooManyFirings(RunStopped):
    """A realization whose total propensity asks for more firings than can ever be simulated."""

    def __init__(self, total: float, t: float, t_to: float, species: tuple[str, ...],
                 x: np.ndarray, realization: int, leap: float | None = None):
        need = f"{(t_to - t) / leap:.3g} leaps of {leap:.3g}" if leap else \
            f"{total * (t_to - t):.3g} reaction firings"
        super().__init__(f"realization {realization} at t = {t:.6g}, state {_state_text(species, x)}, "
                         f"has total propensity {total:.3g}: reaching t = {t_to:.6g} needs about "
                         f"{need}, above the limit {MAX_FIRINGS:.0e} "
                         "(check the stoichiometries and rates); the run stopped there")


def over_budget(work: np.ndarray, a0: np.ndarray, rows: np.ndarray, fired: float | None,
                first_over: np.ndarray | None) -> np.ndarray:
    """Mask of ``rows`` whose predicted ``work`` (firings or leaps to the interval's end) is above
    MAX_FIRINGS and is trusted: the realizations have fired ``fired`` > FIRINGS_BEFORE_LIMIT
    reactions each (``None``: no grace), or the row's total propensity ``a0`` has grown
    BUDGET_GROWTH-fold since it first predicted too much. ``first_over`` (R,) keeps that first
    total per realization (0 while under the limit) and is updated here."""
    over = work > MAX_FIRINGS
    trusted = np.full(over.shape, fired is None or fired > FIRINGS_BEFORE_LIMIT)
    if first_over is not None:
        seen = first_over[rows]
        trusted |= (seen > 0) & (a0 >= BUDGET_GROWTH * seen)
        first_over[rows] = np.where(over, np.where(seen > 0, seen, a0), 0.0)
    return over & trusted


def check_propensities(net, a: np.ndarray, rows: np.ndarray, x: np.ndarray, t: np.ndarray,
                       t_to: float | None = None, fired: float | None = None,
                       first_over: np.ndarray | None = None) -> None:
    """Raise :class:`BadPropensity` for the first row of ``a`` (n, M), realizations ``rows``,
    states ``x`` (n, >= S), times ``t``; with ``t_to``, :class:`TooManyFirings` for the first row
    :func:`over_budget` stops (``fired``, ``first_over`` as there)."""
    bad = ~((a >= 0.0) & (a < np.inf))
    if bad.any():
        k, j = np.argwhere(bad)[0]
        raise BadPropensity(net.reaction_names[j], float(a[k, j]), float(t[k]), net.species,
                            x[k, :net.n_species], int(rows[k]))
    if t_to is not None:
        a0 = a.sum(axis=1)
        over = np.flatnonzero(over_budget(a0 * (t_to - t), a0, rows, fired, first_over))
        if over.size:
            k = over[0]
            raise TooManyFirings(float(a0[k]), float(t[k]), t_to, net.species,
                                 x[k, :net.n_species], int(rows[k]))


class CountOverflow(RunStopped):
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
    # realizations the engine advances in the wall time of one (a GPU's resident threads): a
    # smaller ensemble is no faster, so explore mode's first look is never smaller than this
    at_once: int = 1

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
