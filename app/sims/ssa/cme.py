"""Exact laws of small networks: the chemical master equation by finite state projection.

The FSP (Munsky & Khammash 2006, J. Chem. Phys. 124:044104) keeps the states reachable from the
initial state inside a box ``0 <= x <= cap``; a reaction that would leave the box moves the
probability into an absorbing sink (one per species, the one whose cap it crosses). The
projected master equation dp/dt = A p is solved in float64 with ``scipy.sparse.linalg.
expm_multiply`` (Al-Mohy & Higham 2011, error near the unit roundoff). Their theorem: with
sink mass eps(t), the projected p(t) is elementwise below the true law on the box and within
eps(t) of it in L1, and the true law puts at most eps(t) outside, so
sum_x |p_true(x) - p(x)| <= 2 eps(t) over all states. The box grows (caps doubled for the
species whose sink gathered mass, by a quarter) until eps <= ``tol`` at every asked time.

Propensities come from the network the engines run (:meth:`app.sims.ssa.model.Network.
propensities`: mass action and imported kinetic laws with their guards); networks with events
or assignment rules are refused.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.sims.ssa.model import Network

MAX_STATES = 2_000_000       # a box larger than this is refused before its matrix is built
TOL = 1e-10


class CMEError(ValueError):
    """The network cannot be solved by state projection here (the message says why)."""


@dataclass(frozen=True)
class CMESolution:
    """The projected law at each asked time: ``p[k, i]`` of ``states[i]`` at ``times[k]``."""

    network: Network
    times: np.ndarray          # (T,)
    states: np.ndarray         # (n, S) int64
    p: np.ndarray              # (T, n)
    lost: np.ndarray           # (T, S): mass in each species' sink (left the box through its cap)

    @property
    def error_bound(self) -> np.ndarray:
        """(T,) bound on the projected law's L1 distance to the true law over all states
        (2 x the sink mass, FSP theorem)."""
        return 2.0 * self.lost.sum(axis=1)

    def species_index(self, species: str | int) -> int:
        return species if isinstance(species, int) else self.network.species.index(species)

    def marginal(self, species: str | int, k: int = -1) -> np.ndarray:
        """pmf of the count of ``species`` over 0..max in the box at time index ``k``."""
        s = self.species_index(species)
        return np.bincount(self.states[:, s], weights=self.p[k], minlength=int(self.states[:, s].max()) + 1)

    def moments(self, species: str | int, k: int = -1) -> tuple[float, float, float]:
        """(mean, variance, fourth central moment) of ``species`` at time index ``k``, of the
        projected law renormalised on the box."""
        x = self.states[:, self.species_index(species)].astype(np.float64)
        w = self.p[k] / self.p[k].sum()
        mean = float(w @ x)
        d = (x - mean) ** 2
        return mean, float(w @ d), float(w @ (d * d))

    def joint(self, k: int = -1) -> dict[tuple[int, ...], float]:
        """The law at time index ``k`` as {state: probability} (small spaces, for tests)."""
        return {tuple(int(v) for v in x): float(q) for x, q in zip(self.states, self.p[k])}


def _check(net: Network) -> None:
    if net.events:
        raise CMEError("the network has events; the state projection solves networks without them")
    if net.derived:
        raise CMEError("the network has assignment rules; the state projection solves networks without them")


def reachable_states(net: Network, cap: np.ndarray, max_states: int = MAX_STATES) -> np.ndarray:
    """(n, S) states reachable from ``net.x0`` through reactions of positive propensity without
    leaving ``0 <= x <= cap``, breadth first."""
    cap = np.asarray(cap, np.int64)
    dims = cap + 1
    if np.prod(dims.astype(float)) > 2.0**62:
        raise CMEError(f"the box {list(cap)} is too large to index")
    key = lambda x: np.ravel_multi_index(x.T, dims)   # noqa: E731
    frontier = net.x0[None, :].astype(np.int64)
    seen = key(frontier)
    found = [frontier]
    while len(frontier):
        a = net.propensities(frontier)
        new = []
        for j in range(net.n_reactions):
            y = frontier[a[:, j] > 0] + net.change[j]
            if (y < 0).any():
                raise CMEError(f"reaction {net.reaction_names[j]} fires with positive propensity "
                               "where it would make a count negative")
            new.append(y[(y <= cap).all(axis=1)])
        y = np.concatenate(new)
        keys, first = np.unique(key(y), return_index=True)
        fresh = ~np.isin(keys, seen, assume_unique=True)
        frontier = y[first[fresh]]
        seen = np.union1d(seen, keys[fresh])
        found.append(frontier)
        if len(seen) > max_states:
            raise CMEError(f"more than {max_states:,} states inside the box {list(cap)}: the network is "
                           "too large for an exact solution here")
    states = np.concatenate(found)
    return states[np.argsort(key(states), kind="stable")]


def generator(net: Network, states: np.ndarray, cap: np.ndarray):
    """Sparse generator (n + S, n + S) of the projected chain: the box's states, then one
    absorbing sink per species (flux out of the box through that species' cap)."""
    from scipy.sparse import csc_matrix

    n, s = states.shape
    dims = np.asarray(cap, np.int64) + 1
    keys = np.ravel_multi_index(states.T, dims)
    a = net.propensities(states)
    rows, cols, vals = [np.arange(n)], [np.arange(n)], [-a.sum(axis=1)]
    for j in range(net.n_reactions):
        live = np.flatnonzero(a[:, j] > 0)
        y = states[live] + net.change[j]
        inside = (y <= cap).all(axis=1)
        target = np.empty(len(live), np.int64)
        pos = np.searchsorted(keys, np.ravel_multi_index(y[inside].T, dims))
        target[inside] = pos
        target[~inside] = n + np.argmax(y[~inside] > cap, axis=1)   # the first cap crossed
        rows.append(target)
        cols.append(live)
        vals.append(a[live, j])
    return csc_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                      shape=(n + s, n + s))


def _propagate(A, p0: np.ndarray, times: np.ndarray) -> np.ndarray:
    """p at every time of the sorted ``times`` (>= 0) from p0 at t = 0."""
    from scipy.sparse.linalg import expm_multiply

    out = np.empty((len(times), len(p0)))
    steps = np.diff(np.concatenate([[0.0], times]))
    if len(times) > 2 and times[0] == 0.0 and np.allclose(steps[1:], steps[1], rtol=1e-12, atol=0.0):
        return expm_multiply(A, p0, start=0.0, stop=float(times[-1]), num=len(times), endpoint=True)
    p = p0
    for k, dt in enumerate(steps):
        p = expm_multiply(A * dt, p) if dt > 0 else p
        out[k] = p
    return out


def solve(net: Network, times, tol: float = TOL, cap: np.ndarray | None = None,
          max_states: int = MAX_STATES) -> CMESolution:
    """The law of ``net`` at ``times`` (sorted, >= 0) with sink mass <= ``tol`` at each, the
    box grown from ``cap`` (default: max(2 x0, x0 + 32) per species) as needed.
    The cost of each solve grows with the largest propensity in the box times the last time."""
    _check(net)
    times = np.asarray(times, np.float64)
    if times.ndim != 1 or (np.diff(times) < 0).any() or (times < 0).any():
        raise CMEError("times must be sorted and >= 0")
    x0 = net.x0.astype(np.int64)
    cap = np.maximum(2 * x0, x0 + 32) if cap is None else np.maximum(np.asarray(cap, np.int64), x0)
    while True:
        states = reachable_states(net, cap, max_states)
        A = generator(net, states, cap)
        p0 = np.zeros(A.shape[0])
        p0[np.searchsorted(np.ravel_multi_index(states.T, cap + 1), np.ravel_multi_index(x0, cap + 1))] = 1.0
        p = _propagate(A, p0, times)
        n = len(states)
        lost = np.maximum(p[:, n:], 0.0)
        if lost.sum(axis=1).max() <= tol:
            return CMESolution(net, times, states, p[:, :n], lost)
        grow = lost.max(axis=0) > tol / net.n_species
        cap = np.where(grow, cap + np.maximum(cap // 4, 8), cap)   # small steps: the cost grows with the cap


def stationary(net: Network, cap) -> tuple[np.ndarray, np.ndarray]:
    """(states, pi): the stationary law of the chain on the box ``0 <= x <= cap`` reachable
    from x0, transitions out of the box dropped (reflected). It approximates the true
    stationary law when the box holds almost all of its mass: check pi at the box's edges."""
    from scipy.sparse import csc_matrix, vstack
    from scipy.sparse.linalg import spsolve

    _check(net)
    cap = np.asarray(cap, np.int64)
    states = reachable_states(net, cap)
    n = len(states)
    A = generator(net, states, cap)[:n, :n].tolil()
    A.setdiag(0.0)
    A = A.tocsc()
    A = A - csc_matrix((np.asarray(A.sum(axis=0)).ravel(), (np.arange(n), np.arange(n))), shape=(n, n))
    M = vstack([A[:-1], csc_matrix(np.ones((1, n)))]).tocsc()     # n-1 balance equations + sum 1
    rhs = np.zeros(n)
    rhs[-1] = 1.0
    return states, spsolve(M, rhs)
