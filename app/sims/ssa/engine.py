"""What both SSA engines return after each sample interval."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.sims.ssa.stats import Histogram, histogram, moments

ALGORITHMS = ("direct", "logdirect", "tau-leap")
EXACT_ALGORITHMS = ("direct", "logdirect")


def check_algorithm(name: str, choices: tuple[str, ...] = EXACT_ALGORITHMS) -> str:
    """``name`` if the engine runs it; a ValueError naming the choices otherwise (never a
    silent fallback to another method)."""
    if name not in choices:
        raise ValueError(f"unknown SSA algorithm {name!r} here; choose one of {', '.join(choices)}")
    return name


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


class EnsembleEngine:
    """Interface of the CPU and CUDA ensembles (both advance every realization to a time)."""

    realizations: int
    reactions_fired: int
    compile_seconds: float = 0.0   # first-use compile (or on-disk cache load) of a compiled engine

    def advance(self, t_to: float, max_steps: int) -> bool:
        """Advance towards ``t_to``; True once every realization is there."""
        raise NotImplementedError

    def stats(self, keep_states: bool) -> IntervalStats:
        raise NotImplementedError

    def states(self) -> np.ndarray:
        """(R, S) int64 counts, copied to the host."""
        raise NotImplementedError

    def checkpoint(self) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def load(self, state: dict[str, np.ndarray]) -> None:
        """Resume from :meth:`checkpoint` output."""
        raise NotImplementedError

    def set_rates(self, rates: np.ndarray) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass
