"""Whether a one-stage Rush–Larsen step (RLFE, GRL1) is stable for a model at its initial state.

Linearised at the initial state y0 (dy/dt ≈ J·(y − y0) + f(y0)), one step of either method maps a
perturbation e to ``M·e`` with ``M = I + h·Φ·J``, ``Φ = diag(φ1(h·d))``: ``d`` the diagonal
entries the method integrates exactly (RLFE: the gates' ``a``, 0 for the non-gating states,
which take forward Euler; GRL1: every diagonal entry; and each block's (a Markov chain, a fast
group: :mod:`.markov`) part of Φ is (I − h·J_BB)⁻¹, its linearly implicit Euler step). The
exact flow maps it to ``exp(h·J)·e``, whose growth is at most ``exp(h·max Re λ(J))``. A step
whose spectral radius exceeds that by :data:`MARGIN` amplifies what the model damps: the run would
blow up (the CellML corpus's NaN and |V| > 200 mV of RLFE on buffers and Markov chains), so the
config is refused before it.
J comes from central differences of the model's derivative (:meth:`CellModel.numeric_jacobian`); its
diagonal is exact for the gates (RL) and for GRL1 printed from the model's symbolic Jacobian.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.sims.cardiac.model import CellModel
from app.sims.cardiac.linear_step import MARGIN, step_matrix
from app.sims.cardiac.solvers import Tableau



@dataclass(frozen=True)
class StepGrowth:
    """One step's largest amplification ``rho`` against the exact flow's ``exact``, and the
    state with the largest share of the mode that grows most."""

    rho: float
    exact: float
    state: str

    @property
    def unstable(self) -> bool:
        return self.rho > self.exact * (1.0 + MARGIN)


def step_growth(model: CellModel, params: np.ndarray, h: float, tableau: Tableau) -> StepGrowth | None:
    """The growth of one step of ``tableau`` (one stage, Rush–Larsen) at the model's initial
    state; None where the linearisation is not finite there."""
    y = model.initial_state()
    jac = model.numeric_jacobian(y, params)
    if not np.all(np.isfinite(jac)):
        return None
    exact_diagonal = np.diag(jac).copy()
    if not tableau.grl:
        exact_diagonal[:model.n_nongating] = 0.0          # forward Euler on the non-gating states
    blocks = [block.states for block in model.with_jacobian().blocks] if tableau.grl else []
    values, vectors = np.linalg.eig(step_matrix(jac, h, exact_diagonal, blocks))
    k = int(np.argmax(np.abs(values)))
    growth = float(np.exp(h * max(np.max(np.linalg.eigvals(jac).real), 0.0)))
    state = model.states[int(np.argmax(np.abs(vectors[:, k])))]
    return StepGrowth(float(np.abs(values[k])), growth, state)


@dataclass(frozen=True)
class SplitCoupling:
    """The fastest two-way exchange that GRL1 splits: ``rate`` = √(J_ij·J_ji) (1/ms) between
    ``states`` i and j, stepped apart (not in one block)."""

    rate: float
    states: tuple[str, str]


def split_coupling(model: CellModel, params: np.ndarray) -> SplitCoupling | None:
    """The pair of states at the model's initial state with the largest two-way coupling
    √(J_ij·J_ji) (J_ij·J_ji > 0: an exchange; invariant under the states' units) that GRL1 steps
    apart, each frozen over the other's step (not in one block: :mod:`.markov`). With h times that rate
    well above 1 the step misses the exchange at first order: the diagnosis of a GRL1 tissue
    step that is stable but inaccurate. None: no such pair, or J is not finite."""
    y = model.initial_state()
    jac = model.numeric_jacobian(y, params)
    if not np.all(np.isfinite(jac)):
        return None
    exchange = jac * jac.T
    for block in model.with_jacobian().blocks:
        rows = list(block.states)
        exchange[np.ix_(rows, rows)] = 0.0
    np.fill_diagonal(exchange, 0.0)
    i, j = np.unravel_index(int(np.argmax(exchange)), exchange.shape)
    if exchange[i, j] <= 0.0:
        return None
    return SplitCoupling(float(np.sqrt(exchange[i, j])), (model.states[min(i, j)], model.states[max(i, j)]))
