"""Markov chains of a cell model, found in its one expression tree, and their block step.

A **chain** is a set B of gates (states with dx/dt = a·x + b) whose derivatives are affine in
the states of B jointly, with coefficients that read only states outside B (V, concentrations):
dy_B/dt = A·y_B + c with A and c frozen over a step. A Markov-chain channel (CiPA's IKr, the
Bondarenko, Iyer and Winslow channels) is one, and so are a buffer's binding sites. Its states
exchange far faster than a tissue step, so stepping each alone with its neighbours frozen
(Rush–Larsen, or GRL1 with the diagonal of the Jacobian) makes a first-order splitting error of
the size of the step times the exchange rates (CiPA: −56 % in APD90 at 0.05 ms). GRL1 steps a
chain together instead, by backward Euler on the chain with its coefficients frozen (the
linearly implicit Euler step with the chain's block of the Jacobian; openCARP's ``markov_be``
treatment of Markov states):

    y_B(t + h) = y_B + h·(I − h·A)⁻¹·f_B(y),   f_B = A·y_B + c,

one small linear solve per chain, cell and step (:mod:`app.compute.small_solve`, the same
algorithm in NumPy, numba and CUDA). L-stable: the chain's fast modes go to their quasi-steady
state, occupancies stay non-negative (I − h·A is an M-matrix for a chain's rate matrix) and a
closed chain keeps its total. It costs ~n³/3 multiply-adds for n states, against ~(10 + log2
‖h·A‖)·(n+1)³ for the exact exponential φ1(h·A), which was measured no more accurate on the
corpus (float32, 0.05 ms, first beat: on the seven models that need their chains both are within
2 % of CVODES, the largest error 1.4 % with the exponential and 1.1 % with backward Euler): the
error that remains is the splitting of the chain from V, first order either way. A's diagonal is each
gate's ``a``; its other entries ∂b_i/∂x_j come symbolically from the one expression tree
(:func:`app.compute.codegen.differentiate.jacobian_entries`), only those not identically 0.

Detection (:func:`find_chains`, at import): the gates whose a or b read other gates form a
directed graph; its strongly connected components of 2 to :data:`MAX_CHAIN` states are the
candidates. A member whose ``a`` reads its component, or one of whose ``∂b/∂x_t`` does, is not
affine in it and leaves; the rest is split again until every component is affine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from app.compute.codegen import Name, Node, names_used
from app.compute.codegen.differentiate import ZERO, jacobian_entries
from app.compute.small_solve import solve_batch

@dataclass(frozen=True)
class Chain:
    """A chain of a model ``with_jacobian``: its gates (indices among the gates, in state
    order), the off-diagonal entries (row, column) of its matrix, and the row of ``jng`` where
    their values start."""

    gates: tuple[int, ...]
    entries: tuple[tuple[int, int], ...]
    first: int


MAX_CHAIN = 20            # states of one chain (a dense (n+1)-square matrix per cell and step)
_PROBE = "chain_probe"    # names of the derivatives find_chains inspects (not kept)


def _state_reads(program: Sequence[tuple[str, Node]], states: set[str]) -> dict[str, set[str]]:
    """Each equation's states, read directly or through earlier equations."""
    reads: dict[str, set[str]] = {}
    for name, tree in program:
        out: set[str] = set()
        for n in names_used(tree):
            out |= {n} if n in states else reads.get(n, set())
        reads[name] = out
    return reads


def _components(members: set[str], edges: Mapping[str, set[str]]) -> list[list[str]]:
    """Strongly connected components (mutual reachability) of the graph on ``members``."""
    reach = {}
    for s in members:
        seen, todo = {s}, [s]
        while todo:
            for t in edges[todo.pop()] & members:
                if t not in seen:
                    seen.add(t)
                    todo.append(t)
        reach[s] = seen
    out, done = [], set()
    for s in sorted(members):
        if s not in done:
            comp = sorted(t for t in reach[s] if s in reach[t])
            done |= set(comp)
            out.append(comp)
    return out


def _pairs(chain: Sequence[str], rates: Mapping[str, tuple[str, str]]) -> list[tuple[str, str, str]]:
    """(gate, its b equation, other gate) for every off-diagonal entry of the chain's matrix."""
    return [(s, rates[s][1], t) for s in chain for t in chain if t != s]


def find_chains(program: Sequence[tuple[str, Node]], states: Sequence[str],
                rates: Mapping[str, tuple[str, str]]) -> tuple[tuple[str, ...], ...]:
    """The chains among the gates of ``rates`` (gate -> names of its a and b equations in
    ``program``, in calculation order), each in the order of ``states``."""
    all_states = set(states)
    reads = _state_reads(program, all_states)
    edges = {s: (reads[a] | reads[b]) - {s} for s, (a, b) in rates.items()}
    candidates = {s for s in rates if edges[s] & set(rates)}
    while True:
        components = _components(candidates, edges)
        chains = [c for c in components if 2 <= len(c) <= MAX_CHAIN]
        leave = {s for c in components if c not in chains for s in c}
        for chain in chains:
            block = set(chain)
            pairs = _pairs(chain, rates)
            eqs, trees = jacobian_entries(program, [(b, t) for _, b, t in pairs], _PROBE)
            entry_reads = _state_reads(list(program) + eqs, all_states)
            for (s, _, _), tree in zip(pairs, trees):
                read = entry_reads.get(tree.name, {tree.name}) if isinstance(tree, Name) else set()
                if reads[rates[s][0]] & block or read & block:
                    leave.add(s)
        if not leave:
            order = {s: k for k, s in enumerate(states)}
            ordered = [sorted(c, key=order.__getitem__) for c in chains]
            return tuple(tuple(c) for c in sorted(ordered, key=lambda c: order[c[0]]))
        candidates -= leave


def chain_entries(program: Sequence[tuple[str, Node]], chain: Sequence[str],
                  rates: Mapping[str, tuple[str, str]],
                  prefix: str) -> tuple[list[tuple[str, Node]], list[tuple[int, int, Node]]]:
    """The equations of the chain matrix's off-diagonal entries that are not identically 0
    (named from ``prefix``) and ``(row, column, tree)`` for each, indices into ``chain``
    (A[i, j] = ∂b_i/∂x_j; the diagonal is each gate's a)."""
    pairs = _pairs(chain, rates)
    eqs, trees = jacobian_entries(program, [(b, t) for _, b, t in pairs], prefix)
    index = {s: k for k, s in enumerate(chain)}
    return eqs, [(index[s], index[t], tree) for (s, _, t), tree in zip(pairs, trees) if tree != ZERO]


def chain_matrix(a: np.ndarray, entries: Sequence[tuple[int, int]], values: np.ndarray) -> np.ndarray:
    """A (N, n, n) in float64: the chain's gates' ``a`` (n, N) on the diagonal, ``values`` (E, N)
    at ``entries`` (row, column)."""
    n, n_cells = a.shape
    out = np.zeros((n_cells, n, n))
    idx = np.arange(n)
    out[:, idx, idx] = a.T
    for (i, j), v in zip(entries, values):
        out[:, i, j] = v
    return out


def block_increment(a: np.ndarray, f: np.ndarray, h: float) -> np.ndarray:
    """``h·(I − h·A)⁻¹·f`` for matrices ``a`` (N, n, n) and vectors ``f`` (N, n), in float64."""
    n = f.shape[1]
    return h * solve_batch(np.eye(n) - h * a, f)


def chain_step(out: np.ndarray, y0: np.ndarray, h: float, a: np.ndarray, b: np.ndarray, jng: np.ndarray,
               n_nongating: int, chain: Chain) -> None:
    """GRL1 on one chain, in place: its gates' rows of ``out`` become ``y0 + h·(I − h·A)⁻¹·f_B``
    (``a``, ``b`` the gates' coefficients, ``jng`` the model's Jacobian outputs, all (…, N))."""
    g = list(chain.gates)
    rows = [n_nongating + k for k in g]
    ga, w0 = a[g].astype(np.float64), y0[rows].astype(np.float64)
    values = jng[chain.first:chain.first + len(chain.entries)].astype(np.float64)
    f = ga * w0 + b[g]
    inc = block_increment(chain_matrix(ga, chain.entries, values), f.T, h)
    out[rows] = (w0 + inc.T).astype(out.dtype)
