"""Events without delay and assignment-rule species, in NumPy: the reference semantics that the
compiled and CUDA engines print from the same trees.

Per realization, bit ``e`` of a 32-bit word holds event ``e``'s trigger value as last checked.
After every reaction the species events are checked in document order: an event whose trigger
is true and whose bit is clear fires (its assignments evaluated on the state as it is then, all
computed before any is applied); every bit takes its trigger's value; rounds repeat while any
event fired (at most :data:`MAX_CASCADE`). A time event is pending while its bit is clear: when
the next waiting time would pass its instant, the clock stops there (the drawn reaction is
discarded, as at a sample time), the time events due then fire in document order, and the
species events are checked.
"""

from __future__ import annotations

import numpy as np

from app.compute.codegen import evaluate
from app.sims.ssa.model import Network

MAX_CASCADE = 16


def event_times(net: Network) -> np.ndarray:
    """(E,) instants of the time events; inf for species events."""
    return np.array([np.inf if e.time is None else e.time for e in net.events], np.float64)


def initial_bits(net: Network) -> int:
    """The trigger word every realization starts with."""
    return sum(1 << e for e, v in enumerate(net.event_state0) if v)


def assign(net: Network, x: np.ndarray, e: int) -> None:
    """Apply event ``e``'s assignments to states ``x`` (n, >=S) int64 in place."""
    env = net.species_env(x[:, :net.n_species])
    values = [np.maximum(np.rint(evaluate(tree, env)), 0.0) for _, tree in net.events[e].assignments]
    for (s, _), v in zip(net.events[e].assignments, values):
        x[:, s] = np.broadcast_to(v, x.shape[:1]).astype(np.int64)


def species_events(net: Network, x: np.ndarray, bits: np.ndarray) -> np.ndarray:
    """Check the species events on states ``x`` (n, >=S) with trigger words ``bits`` (n,),
    both updated in place; returns the rows where an event fired."""
    fired = np.zeros(len(x), bool)
    checked = [e for e, ev in enumerate(net.events) if ev.trigger is not None]
    if not checked:
        return fired
    for _ in range(MAX_CASCADE):
        any_round = np.zeros(len(x), bool)
        for e in checked:
            bit = np.uint32(1 << e)
            value = np.broadcast_to(evaluate(net.events[e].trigger, net.species_env(x[:, :net.n_species])) > 0.5,
                                    bits.shape)
            fire = value & ((bits & bit) == 0)
            if fire.any():
                sub = x[fire]
                assign(net, sub, e)
                x[fire] = sub
                any_round |= fire
            bits[:] = np.where(value, bits | bit, bits & ~bit)
        fired |= any_round
        if not any_round.any():
            break
    return fired


def next_event_time(times: np.ndarray, bits: np.ndarray) -> np.ndarray:
    """(n,) earliest pending time-event instant per realization (inf where none)."""
    if not np.isfinite(times).any():
        return np.full(len(bits), np.inf)
    pending = ((bits[:, None] >> np.arange(len(times), dtype=np.uint32)) & 1) == 0
    return np.where(pending, times[None, :], np.inf).min(axis=1)


def time_events(net: Network, times: np.ndarray, x: np.ndarray, bits: np.ndarray,
                due: np.ndarray) -> None:
    """Fire, in document order, the pending time events at instant ``due`` (n,) of each row."""
    for e, t_e in enumerate(times):
        if not np.isfinite(t_e):
            continue
        bit = np.uint32(1 << e)
        rows = ((bits & bit) == 0) & (due == t_e)
        if rows.any():
            sub = x[rows]
            assign(net, sub, e)
            x[rows] = sub
            bits[rows] |= bit
    species_events(net, x, bits)


def apply_derived(net: Network, x: np.ndarray) -> None:
    """Set the assignment-rule species of states ``x`` (n, >=S) from the others, in place."""
    env = net.species_env(x[:, :net.n_species])
    for s, tree in net.derived:
        x[:, s] = np.broadcast_to(np.rint(evaluate(tree, env)), x.shape[:1]).astype(np.int64)
