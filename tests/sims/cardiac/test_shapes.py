"""The built-in tissues as P1 meshes: counts, conservation, symmetry in the mass inner product,
consistency with the continuum Laplacian, and the ventricle shell for benchmarks."""

import numpy as np
import pytest

from app.sims.cardiac import fem, shapes
from app.sims.cardiac.mesh_io import check_mesh
from app.sims.cardiac.shapes import icosphere, sheet


@pytest.mark.parametrize("level", [0, 1, 2, 3, 4])
def test_icosphere_counts(level):
    m = icosphere(level)
    assert m.n_cells == 10 * 4 ** level + 2
    assert len(m.faces) == 20 * 4 ** level
    deg = m.degree
    assert (deg == 5).sum() == 12 and set(deg.tolist()) <= {5, 6}      # cotangent weights all > 0
    assert np.allclose(np.linalg.norm(m.positions, axis=1), np.linalg.norm(m.positions[0]))
    assert abs(m.spacing().mean() - 0.2) < 1e-9


def test_level7_is_the_papers_163842_cells():
    m = icosphere(7)
    assert m.n_cells == 163842
    assert m.neighbours.shape == (163842, 6) and m.neighbours.dtype == np.int32
    assert 21.0 < np.linalg.norm(m.positions[0]) < 21.4      # radius for 0.2 mm spacing


def _lumped_mass(raw):
    return fem.assemble(raw, fem.UNIT_TISSUE)[3]


@pytest.mark.parametrize("raw", [shapes.icosphere_surface(2), shapes.icosphere_surface(3, radius_mm=5.0),
                                 shapes.grid_sheet(7, 5, 0.1), shapes.grid_sheet(1, 9, 0.3)],
                         ids=["sphere2", "sphere3", "sheet7x5", "cable"])
def test_diffusion_conserves_and_is_symmetric_in_the_mass_product(raw):
    """M·A is the (symmetric, negative semi-definite) stiffness: the operator is self-adjoint in
    the lumped-mass inner product, conserves Σ_k m_k V_k and damps every mode."""
    D = 0.06
    nbr, w = fem.operator_arrays(raw, fem.UNIT_TISSUE)
    mesh = fem.Mesh("test", raw.points, nbr, w)
    A, m = mesh.matrix(D), _lumped_mass(raw)
    assert np.allclose(m[:, None] * A, (m[:, None] * A).T)
    assert np.allclose(A.sum(axis=1), 0) and np.allclose(m @ A, 0)
    v = np.random.default_rng(0).normal(size=mesh.n_cells)
    assert np.allclose(mesh.laplacian(v, D), A @ v)
    s = np.sqrt(m)
    assert np.all(np.linalg.eigvalsh(s[:, None] * A / s[None, :]) < 1e-9)


def test_padding_points_at_self_with_zero_weight():
    m = sheet(3, 3, 0.1)
    pad = m.inv_d2 == 0
    assert np.all(m.neighbours[pad] == np.nonzero(pad)[0])


def test_sheet_is_the_five_point_laplacian_inside_and_exact_on_quadratics():
    m = sheet(9, 7, 0.25)
    x, y = m.positions[:, 0], m.positions[:, 1]
    interior = m.degree == 4
    inner = (x > 0) & (x < 2) & (y > 0) & (y < 1.5)
    assert np.array_equal(interior[inner], np.ones(inner.sum(), bool))
    assert np.allclose(m.inv_d2[inner], 1 / 0.25 ** 2)
    np.testing.assert_allclose(m.laplacian(x ** 2 + 3 * y ** 2, 0.06)[inner], 0.06 * 8.0, rtol=1e-12)


def test_sphere_operator_converges_to_the_laplace_beltrami_operator():
    """P1 on the sphere converges to D·Δ_S at second order: on Y_1 = z (Δ_S z = −2z/R²) the
    median relative error falls fourfold per level (halved spacing); the graph Laplacian
    Σ (V_j − V_k)/d² would be off by 50 %."""
    r = 10.0
    errors = []
    for level in (4, 5):
        m = icosphere(level, radius_mm=r)
        z = m.positions[:, 2]
        ok = np.abs(z) > 5
        errors.append(abs(np.median(m.laplacian(z, 1.0)[ok] / (-2 * z[ok] / r ** 2)) - 1.0))
    assert errors[0] < 2e-3 and errors[1] < 0.35 * errors[0]


def test_ventricle_shell_is_a_valid_tetrahedral_mesh_with_transmural_fibre_rotation():
    raw = check_mesh(shapes.ventricle_shell(5000))
    assert 3000 < len(raw.points) < 8000 and raw.dim == 3
    assert np.allclose(np.einsum("ij,ij->i", raw.fibres, raw.sheets), 0, atol=1e-12)
    helix = np.degrees(np.arcsin(np.clip(raw.fibres[:, 2] / np.linalg.norm(raw.fibres, axis=1), -1, 1)))
    assert helix.min() < -30 and helix.max() > 30          # the fibre turns across the wall
    m = fem.fem_mesh(raw, fem.Tissue(0.3, 0.05, 0.05))
    np.testing.assert_allclose(m.laplacian(np.ones(m.n_cells), 1.0), 0.0, atol=1e-9)


@pytest.mark.slow
def test_a_wave_round_the_sphere_runs_at_the_cable_speed():
    """A wave from the pole of a level-5 sphere (mean edge 0.1 mm), measured across the
    equator where its front is a geodesic (no curvature slowing it), against the same tissue in
    a straight cable: its speed lies between the cable's at dx 0.1 and at dx 0.05 mm (the
    cable's own discretisation error, 3 %). The graph Laplacian Σ (V_j − V_k)/d² the sphere had
    (1.5·D on hexagons) would run √1.5 = 1.22 times faster."""
    from .helpers import cable, conduction_velocity, run
    coarse, fine = (conduction_velocity(run(cable(dx, dt=0.01, t_end=20.0))[0], dx) for dx in (0.1, 0.05))
    r = 2.65
    arrays = run(f"mesh: {{kind: sphere, level: 5, radius_mm: {r}}}\nD: 0.06\n"
                 "protocol: {t_end: 30, stimuli: [{start: 1, duration: 2, amplitude: -40, "
                 "region: {kind: cap, center: [0, 0, 1], angle_deg: 20}}]}\n"
                 "solver: {method: rlfe, dt: 0.01, precision: float64}\n"
                 "output: {random_probes: 0, probe_cells: [0], dt_save: 1.0}\n")[0]
    m = icosphere(5, r)
    assert abs(m.spacing().mean() - 0.1) < 1e-3
    theta = np.degrees(np.arccos(np.clip(m.positions[:, 2] / r, -1, 1)))
    band = (theta > 60) & (theta < 120)
    cv = np.polyfit(arrays["activation_time"][band], r * np.radians(theta[band]), 1)[0]
    assert coarse < cv < fine
