"""Meshes as the engines see them: nodes with padded neighbour lists and weights,

    (L V)_k = D · Σ_j w_kj (V_j − V_k)

over the neighbours j of node k, in fixed-width arrays (padding points at the node itself with
weight 0, so it adds nothing). Every tissue fills them the same way, with the linear
finite-element operator of :mod:`app.sims.cardiac.fem`: the built-in sphere and sheets
(:mod:`app.sims.cardiac.shapes`, weights per unit D) and meshes from files (weights carrying
the conductivities). A single cell has no neighbours.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DEFAULT_SPACING_MM = 0.2     # the built-in sphere's default mean edge (mm)


@dataclass(frozen=True)
class Mesh:
    """Nodes, their positions (mm), padded neighbour lists and weights, and the elements they
    came from (node and element sets for regions)."""

    kind: str
    positions: np.ndarray        # (N, 3) mm
    neighbours: np.ndarray       # (N, K) int32, padded with the cell's own index
    inv_d2: np.ndarray           # (N, K) weights w_kj (mm⁻² per unit D, or 1/ms with weights_carry_D), 0 in padding
    faces: np.ndarray | None = None      # (F, 3) triangles for drawing (sphere, files)
    shape: tuple[int, int] | None = None  # (ny, nx) for sheets
    weights_carry_D: bool = False         # FE meshes: inv_d2 holds the full weights (1/ms), D = 1
    elements: np.ndarray | None = None    # (E, 2|3|4) lines, triangles or tetrahedra
    element_tags: np.ndarray | None = None  # (E,) region tags from the file

    @property
    def n_cells(self) -> int:
        return len(self.positions)

    @property
    def width(self) -> int:
        return self.neighbours.shape[1]

    @property
    def degree(self) -> np.ndarray:
        return (self.inv_d2 != 0).sum(axis=1)

    def spacing(self) -> np.ndarray:
        """Distance to each neighbour (mm), padding excluded."""
        mask = self.inv_d2 != 0
        d = self.positions[self.neighbours] - self.positions[:, None, :]
        return np.linalg.norm(d, axis=-1)[mask]

    def laplacian(self, v: np.ndarray, D: float) -> np.ndarray:
        """The diffusion term for values ``v`` (N,) or (..., N)."""
        return D * np.sum(self.inv_d2 * (v[..., self.neighbours] - v[..., None]), axis=-1)

    def matrix(self, D: float) -> np.ndarray:
        """The operator as a dense matrix (small meshes, for tests)."""
        n = self.n_cells
        m = np.zeros((n, n))
        rows = np.repeat(np.arange(n), self.width)
        np.add.at(m, (rows, self.neighbours.ravel()), D * self.inv_d2.ravel())
        m[np.arange(n), np.arange(n)] -= D * self.inv_d2.sum(axis=1)
        return m


def single_cell() -> Mesh:
    return Mesh("single", np.zeros((1, 3)), np.zeros((1, 1), np.int32), np.zeros((1, 1)))
