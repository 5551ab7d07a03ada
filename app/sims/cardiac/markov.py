"""The blocks of a cell model that GRL1 steps together: Markov chains, found in its one expression
tree, and fast groups, found in its Jacobian at rest; and the block step.

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

**Fast groups** (:func:`fast_groups`, when a model is built ``with_jacobian``): states that are
not one chain but exchange fast (a membrane potential and a t-tubular one, SR calcium and
calsequestrin) are stepped together the same way, with the block of the whole Jacobian,
``y_B + h·(I − h·J_BB)⁻¹·f_B(y)``, the linearly implicit (Rosenbrock) Euler step on the block.
The rule, at the model's initial state with its default parameters: states i and j exchange at
``√(J_ij·J_ji)`` (J_ij·J_ji > 0; the rate ``stability.split_coupling`` reports); pairs faster than
:data:`FAST_RATE` are joined, fastest first, into groups of at most :data:`MAX_CHAIN` states (a
join that would exceed it is skipped); a group with which GRL1's step of
:data:`STABILITY_STEP` (the tissue default) amplifies more at rest than without it is left out
(Mahajan–Shiferaw's dyadic calcium, coupled one way to every L-type state, grouped with one of
them). Eligible are the non-gating states and the coupled gates
not in a chain (a voltage-only gate may be read from a table for a fixed step and is stepped by
Rush–Larsen). Where V is in a group the diffusion current is part of its ``f`` (frozen over the
step, as in the per-state update), not of ``J_BB``.

Chains and fast groups are one :class:`Block` each: the same entries (``∂f_i/∂x_j``: for a chain
gate ``∂b_i/∂x_j``, since its ``a`` does not read the chain), the same step in every engine. A NaN
entry of ``J_BB`` counts as 0 (forward Euler in that direction), as GRL1's per-state update does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from app.compute.codegen import Binary, Name, Node, names_used
from app.compute.codegen.differentiate import ZERO, jacobian_entries
from app.compute.small_solve import solve_batch

@dataclass(frozen=True)
class Block:
    """States GRL1 steps together (a chain or a fast group) in a model ``with_jacobian``: their
    indices in the state vector (in order), the off-diagonal entries (row, column) of J_BB not
    identically 0, and the row of ``jng`` where their values start."""

    states: tuple[int, ...]
    entries: tuple[tuple[int, int], ...]
    first: int


MAX_CHAIN = 20            # states of one block (a dense n-square matrix per cell and step)
FAST_RATE = 5.0           # 1/ms: exchanges faster than this join a fast group (h·rate 0.25 at 0.05 ms)
STABILITY_STEP = 0.05     # ms: the tissue default step, at which a fast group must not destabilise GRL1
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


def fast_groups(jac: np.ndarray, eligible: Sequence[int], rate: float = FAST_RATE,
                cap: int = MAX_CHAIN) -> tuple[tuple[int, ...], ...]:
    """The fast groups (see the module's head) of the Jacobian ``jac`` (S, S) among the states
    ``eligible``: pairs with √(J_ij·J_ji) > ``rate`` joined fastest first, no group above ``cap``
    states; each group sorted, the groups by their first state."""
    pairs = sorted(((float(np.sqrt(jac[i, j] * jac[j, i])), i, j) for i in eligible for j in eligible
                    if i < j and jac[i, j] * jac[j, i] > rate * rate), reverse=True)
    group = {k: frozenset([k]) for k in eligible}
    for _, i, j in pairs:
        if group[i] is not group[j] and len(group[i]) + len(group[j]) <= cap:
            joined = group[i] | group[j]
            for k in joined:
                group[k] = joined
    return tuple(sorted({tuple(sorted(g)) for g in group.values() if len(g) > 1}))


def block_entries(program: Sequence[tuple[str, Node]], block: Sequence[str],
                  rates: Mapping[str, tuple[str, str | None]],
                  prefix: str) -> tuple[list[tuple[str, Node]], list[tuple[int, int, Node]]]:
    """The equations of J_BB's off-diagonal entries ∂f_i/∂x_j that are not identically 0 (named
    from ``prefix``) and ``(row, column, tree)`` for each, indices into ``block``. ``rates``: a
    gate's names of its a and b equations (f = a·x + b: the entry x·∂a/∂x_j + ∂b/∂x_j), a
    non-gating state's name of its derivative and None."""
    pairs = [(s, t) for s in block for t in block if t != s]
    wanted = [(rates[s][1] or rates[s][0], t) for s, t in pairs]           # b, or the derivative
    wanted += [(rates[s][0], t) for s, t in pairs if rates[s][1] is not None]      # a of a gate
    eqs, trees = jacobian_entries(program, wanted, prefix)
    by_a = iter(trees[len(pairs):])
    index = {s: k for k, s in enumerate(block)}
    out = []
    for (s, t), tree in zip(pairs, trees):
        if rates[s][1] is not None:
            da = next(by_a)
            if da != ZERO:
                term = Binary("*", Name(s), da)
                tree = term if tree == ZERO else Binary("+", tree, term)
        if tree != ZERO:
            out.append((index[s], index[t], tree))
    return eqs, out


def block_matrix(diagonal: np.ndarray, entries: Sequence[tuple[int, int]], values: np.ndarray) -> np.ndarray:
    """J_BB (N, n, n) in float64: ``diagonal`` (n, N), ``values`` (E, N) at ``entries`` (row,
    column); a NaN entry counts as 0."""
    n, n_cells = diagonal.shape
    out = np.zeros((n_cells, n, n))
    idx = np.arange(n)
    out[:, idx, idx] = diagonal.T
    for (i, j), v in zip(entries, values):
        out[:, i, j] = v
    return np.where(np.isnan(out), 0.0, out)


def block_increment(a: np.ndarray, f: np.ndarray, h: float) -> np.ndarray:
    """``h·(I − h·A)⁻¹·f`` for matrices ``a`` (N, n, n) and vectors ``f`` (N, n), in float64."""
    n = f.shape[1]
    return h * solve_batch(np.eye(n) - h * a, f)


def block_step(out: np.ndarray, y0: np.ndarray, h: float, kng: np.ndarray, a: np.ndarray, b: np.ndarray,
               jng: np.ndarray, n_nongating: int, block: Block) -> None:
    """GRL1 on one block, in place: its rows of ``out`` become ``y0 + h·(I − h·J_BB)⁻¹·f_B``
    (``kng`` the non-gating derivatives with diffusion, ``a``, ``b`` the gates' coefficients,
    ``jng`` the model's Jacobian outputs, all (…, N))."""
    ng = n_nongating
    rows = list(block.states)
    w0 = y0[rows].astype(np.float64)
    diagonal = np.stack([jng[k] if k < ng else a[k - ng] for k in rows]).astype(np.float64)
    f = np.stack([kng[k].astype(np.float64) if k < ng else diagonal[i] * w0[i] + b[k - ng]
                  for i, k in enumerate(rows)])
    values = jng[block.first:block.first + len(block.entries)].astype(np.float64)
    inc = block_increment(block_matrix(diagonal, block.entries, values), f.T, h)
    out[rows] = (w0 + inc.T).astype(out.dtype)
