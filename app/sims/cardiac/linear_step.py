"""One-stage Rush–Larsen steps (RLFE, GRL1) linearised at a state: the matrix that maps a
perturbation over one step, and its spectral radius (:mod:`.stability` checks a config with it;
:attr:`.model.CellModel.fast_groups` keeps a fast group only if it does not raise GRL1's)."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from app.sims.cardiac.solvers import phi1

MARGIN = 1e-3      # relative growth per step beyond a reference's that counts as growing


def step_matrix(jac: np.ndarray, h: float, diagonal: np.ndarray, blocks: Sequence[Sequence[int]] = ()) -> np.ndarray:
    """``M = I + h·Φ·J`` of one Rush–Larsen step linearised with Jacobian ``jac``: Φ =
    diag(φ1(h·``diagonal``)), each block's part (I − h·J_BB)⁻¹ (GRL1's linearly implicit step)."""
    factor = np.diag(phi1(h * diagonal))
    for rows in blocks:
        index = np.ix_(list(rows), list(rows))
        factor[index] = np.linalg.inv(np.eye(len(rows)) - h * jac[index])
    return np.eye(len(jac)) + h * factor @ jac


def grl1_radius(jac: np.ndarray, h: float, blocks: Sequence[Sequence[int]]) -> float:
    """The spectral radius of GRL1's step (every diagonal entry, ``blocks`` together)."""
    return float(np.max(np.abs(np.linalg.eigvals(step_matrix(jac, h, np.diag(jac), blocks)))))
