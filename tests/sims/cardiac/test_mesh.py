"""Meshes and the Eq. 7 diffusion operator: counts, conservation, symmetry, consistency."""

import numpy as np
import pytest

from app.sims.cardiac.mesh import icosphere, sheet


@pytest.mark.parametrize("level", [0, 1, 2, 3, 4])
def test_icosphere_counts(level):
    m = icosphere(level)
    assert m.n_cells == 10 * 4 ** level + 2
    assert len(m.faces) == 20 * 4 ** level
    deg = m.degree
    assert (deg == 5).sum() == 12 and set(deg.tolist()) <= {5, 6}
    assert np.allclose(np.linalg.norm(m.positions, axis=1), np.linalg.norm(m.positions[0]))
    assert abs(m.spacing().mean() - 0.2) < 1e-9


def test_level7_is_the_papers_163842_cells():
    m = icosphere(7)
    assert m.n_cells == 163842
    assert m.neighbours.shape == (163842, 6) and m.neighbours.dtype == np.int32
    assert 21.0 < np.linalg.norm(m.positions[0]) < 21.4      # radius for 0.2 mm spacing


@pytest.mark.parametrize("mesh", [icosphere(2), icosphere(3, radius_mm=5.0), sheet(7, 5, 0.1), sheet(1, 9, 0.3)],
                         ids=["sphere2", "sphere3", "sheet7x5", "cable"])
def test_diffusion_conserves_and_is_symmetric(mesh):
    D = 0.06
    A = mesh.matrix(D)
    assert np.allclose(A, A.T)                               # d_jk = d_kj: symmetric
    assert np.allclose(A.sum(axis=0), 0) and np.allclose(A.sum(axis=1), 0)   # constants, conservation
    rng = np.random.default_rng(0)
    v = rng.normal(size=mesh.n_cells)
    lv = mesh.laplacian(v, D)
    assert np.allclose(lv, A @ v)
    assert abs(lv.sum()) < 1e-9 * np.abs(lv).sum()           # Σ_k (L V)_k = 0
    assert np.all(np.linalg.eigvalsh(A) < 1e-9)              # dissipative


def test_padding_points_at_self_with_zero_weight():
    m = sheet(3, 3, 0.1)
    pad = m.inv_d2 == 0
    assert np.all(m.neighbours[pad] == np.nonzero(pad)[0])


def test_sheet_operator_is_D_laplacian_on_quadratics():
    m = sheet(9, 7, 0.25)
    x, y = m.positions[:, 0], m.positions[:, 1]
    interior = m.degree == 4
    lv = m.laplacian(x ** 2 + 3 * y ** 2, 0.06)
    assert np.allclose(lv[interior], 0.06 * 8.0)


def test_sphere_operator_is_one_and_a_half_D_laplacian():
    """On the hexagonal mesh Eq. 7 is 1.5·D·∇² (spherical harmonic Y_1 has ∇² = -2/R²)."""
    m = icosphere(5, radius_mm=10.0)
    z = m.positions[:, 2]
    lv = m.laplacian(z, 1.0)
    ok = np.abs(z) > 5
    ratio = lv[ok] / (-2 * z[ok] / 100.0)
    assert abs(np.median(ratio) - 1.5) < 0.05
