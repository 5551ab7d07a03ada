"""Pseudo-ECG of a tissue mesh (built-in or from a file): at each electrode x₀ the integral

    Φ(x₀) = ∫ ∇V · ∇(1/r) dΩ,   r = |x − x₀|,

over the tissue, with ∇V the linear elements' (constant) gradient and ∇(1/r) at each element's
centroid (second-order in the element size). Units: mV for volumes (mV/mm · 1/mm² · mm³),
mV/mm for surfaces. The extracellular potential of the usual pseudo-ECG (Gima & Rudy 2002)
is −σ_i / (4π σ_e) times Φ; Φ itself is returned, free of that tissue factor.
"""

from __future__ import annotations

import numpy as np

from app.sims.cardiac.fem import shape_gradients
from app.sims.cardiac.mesh import Mesh


class Electrodes:
    """Precomputed weights: Φ = V @ W for electrodes (M, 3) over a mesh with elements."""

    def __init__(self, mesh: Mesh, positions: np.ndarray):
        if mesh.elements is None:
            raise ValueError("a pseudo-ECG needs a tissue of elements; this mesh is a " + mesh.kind)
        pos = np.asarray(positions, float).reshape(-1, 3)
        el = mesh.elements
        grads, measure = shape_gradients(mesh.positions, el)            # (E, k, 3), (E,)
        centroid = mesh.positions[el].mean(axis=1)
        w = np.zeros((mesh.n_cells, len(pos)))
        for m, x0 in enumerate(pos):
            d = centroid - x0
            r = np.linalg.norm(d, axis=1)
            if r.min() == 0:
                raise ValueError(f"electrode {m} at {x0.tolist()} sits on an element's centroid")
            grad_inv_r = -d / r[:, None] ** 3                            # ∇(1/r), (E, 3)
            per_node = measure[:, None] * np.einsum("eai,ei->ea", grads, grad_inv_r)
            w[:, m] = np.bincount(el.ravel(), weights=per_node.ravel(), minlength=mesh.n_cells)
        self.positions, self.weights = pos, w

    def __call__(self, v: np.ndarray) -> np.ndarray:
        """Φ at each electrode for V (N,) or (T, N): (M,) or (T, M)."""
        return np.asarray(v, float) @ self.weights
