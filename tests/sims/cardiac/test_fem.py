"""The P1 mass-lumped operator: against the 5-point sheet, exactness on quadratics along and
across fibres, conservation, stable step, and a planar wave on a curved surface against the
flat strip."""

import numpy as np
import pytest

from app.sims.cardiac import fem, shapes
from app.sims.cardiac.mesh_io import RawMesh, check_mesh

ISO = fem.Tissue(0.1, 0.1, 0.1, 140.0, 0.01)


def _interior(points, lo, hi, margin=1e-6):
    return ((points > np.asarray(lo) + margin) & (points < np.asarray(hi) - margin)).all(axis=1)


def test_built_in_sheet_is_the_file_path_and_the_five_point_laplacian_inside():
    """Right triangles on a square grid with isotropic σ: P1 with lumped mass is the 5-point
    Laplacian inside (the diagonals get weight 0) with D = σ/(χ Cm); the built-in sheet is the
    same operator per unit D (one path), on the edges too (vertex-centred no-flux rows)."""
    nx, ny, dx = 7, 5, 0.3
    fe = fem.fem_mesh(check_mesh(shapes.grid_sheet(nx, ny, dx)), ISO)
    built_in = shapes.sheet(nx, ny, dx)
    D = ISO.diffusivity(0.1)
    assert fe.width == built_in.width == 4 and fe.weights_carry_D and not built_in.weights_carry_D
    a = fe.matrix(1.0)
    np.testing.assert_allclose(built_in.matrix(D), a, atol=1e-12 * np.abs(a).max())
    iy, ix = np.divmod(np.arange(nx * ny), nx)
    for k in np.flatnonzero((ix > 0) & (ix < nx - 1) & (iy > 0) & (iy < ny - 1)):
        five = np.zeros(nx * ny)
        five[[k - 1, k + 1, k - nx, k + nx]] = D / dx ** 2
        five[k] = -4 * D / dx ** 2
        np.testing.assert_allclose(a[k], five, atol=1e-12 * np.abs(a).max())


def test_slab_operator_is_exact_on_quadratics_along_and_across_fibres():
    """Fibres along x, sheets along y on a Kuhn-cut box: L(x²) = 2 D_l, L(y²) = 2 D_t,
    L(z²) = 2 D_n (z the sheet normal) inside (P1 lumped on this mesh is the 7-point stencil), L(1) = 0 everywhere."""
    t = fem.Tissue(0.3, 0.05, 0.02, 140.0, 0.01)
    raw = shapes.structured_slab(3.0, 2.0, 1.5, 0.25)
    m = fem.fem_mesh(raw, t)
    inner = _interior(raw.points, (0, 0, 0), (3.0, 2.0, 1.5))
    for axis, sigma in enumerate((t.sigma_l, t.sigma_t, t.sigma_n)):
        lap = m.laplacian(raw.points[:, axis] ** 2, 1.0)
        np.testing.assert_allclose(lap[inner], 2 * t.diffusivity(sigma), rtol=1e-10)
    np.testing.assert_allclose(m.laplacian(np.ones(len(raw.points)), 1.0), 0.0, atol=1e-12)


def test_stiffness_on_an_unstructured_shell_is_symmetric_and_integrates_gradients():
    """The ventricle shell's K (random-ish tetrahedra, rotating fibres): K_kj = K_jk exactly,
    and xᵀ K x = ∫ ∇x·σ∇x = Σ_e |e| σ_e[0, 0] for the linear field x (P1 is exact on it),
    against an element sum computed here from the element volumes alone."""
    raw = check_mesh(shapes.ventricle_shell(3000))
    t = fem.Tissue(0.34, 0.06, 0.03, 140.0, 0.01)
    r, c, k_off, _ = fem.assemble(raw, t)
    n = len(raw.points)
    key = r * n + c
    assert np.all(np.diff(key) > 0)                               # sorted, one entry per pair
    mirror = np.searchsorted(key, c * n + r)
    assert np.array_equal(k_off[mirror], k_off)
    x = raw.points[:, 0]
    diag = -np.bincount(r, weights=k_off, minlength=n)            # rows of K sum to zero
    energy = x @ (diag * x) + np.sum(k_off * x[r] * x[c])
    x4 = raw.points[raw.elements]
    volume = np.abs(np.einsum("ij,ij->i", np.cross(x4[:, 1] - x4[:, 0], x4[:, 2] - x4[:, 0]),
                              x4[:, 3] - x4[:, 0])) / 6
    sigma_xx = fem.conductivity(raw, t)[:, 0, 0]
    np.testing.assert_allclose(energy, np.sum(volume * sigma_xx), rtol=1e-11)


def test_rotated_fibres_on_a_surface():
    """A fibre at 30° in the plane: on a linear field V = a·x every row is 0 inside; on
    V = (f·x)² the operator gives 2 D_l and on (f⊥·x)² 2 D_t, to the mesh's O(h) error on the
    cross terms (right triangles, one diagonal)."""
    th = np.radians(30.0)
    f, g = np.array([np.cos(th), np.sin(th), 0.0]), np.array([-np.sin(th), np.cos(th), 0.0])
    t = fem.Tissue(0.3, 0.05, 0.05, 140.0, 0.01)
    n, dx = 41, 0.05
    raw = check_mesh(shapes.grid_sheet(n, n, dx, fibre=f))
    m = fem.fem_mesh(raw, t)
    inner = _interior(raw.points[:, :2], (0, 0), ((n - 1) * dx, (n - 1) * dx))
    p = raw.points
    np.testing.assert_allclose(m.laplacian(p @ f, 1.0)[inner], 0.0, atol=1e-9)
    lap_l = m.laplacian((p @ f) ** 2, 1.0)[inner]
    lap_t = m.laplacian((p @ g) ** 2, 1.0)[inner]
    np.testing.assert_allclose(lap_l.mean(), 2 * t.diffusivity(t.sigma_l), rtol=1e-9)
    np.testing.assert_allclose(lap_t.mean(), 2 * t.diffusivity(t.sigma_t), rtol=1e-9)


def test_fibres_normal_to_the_surface_are_refused_when_anisotropic():
    raw = shapes.grid_sheet(3, 3, 1.0, fibre=(0.0, 0.0, 1.0))
    with pytest.raises(ValueError, match="<sheet>: element 0: the fibre"):
        check_mesh(raw)


def test_stable_step_bounds_the_spectrum_within_a_factor_two():
    """Gershgorin: the spectral radius ρ ≤ 2·max_k Σ_j |w_kj| = 2/stable_dt, so forward Euler
    at stable_dt is stable; and for these M-matrices ρ ≥ max_k Σ_j w_kj (a Rayleigh quotient),
    so the step is at most twice too cautious. Inside, the 5-point limit is dx²/(4D); the two
    corners that hold one triangle carry a sixth of a square, so the limit is dx²/(6D)."""
    fe = fem.fem_mesh(check_mesh(shapes.grid_sheet(12, 9, 0.2)), ISO)
    D = ISO.diffusivity(0.1)
    assert fem.stable_dt(fe) == pytest.approx(0.2 ** 2 / (6 * D))
    rho = np.abs(np.linalg.eigvals(fe.matrix(1.0)).real).max()
    dt = fem.stable_dt(fe)
    assert 1.0 / dt <= rho <= 2.0 / dt * (1 + 1e-9)


def _cylinder_band(radius: float, n_around: int, n_along: int, dz: float) -> RawMesh:
    th = np.arange(n_around) * 2 * np.pi / n_around
    z = np.arange(n_along) * dz
    tt, zz = np.meshgrid(th, z)
    pts = np.stack([radius * np.cos(tt.ravel()), radius * np.sin(tt.ravel()), zz.ravel()], 1)
    idx = np.arange(n_around * n_along).reshape(n_along, n_around)
    a, b = idx[:-1], np.roll(idx[:-1], -1, axis=1)
    c, d = idx[1:], np.roll(idx[1:], -1, axis=1)
    tris = np.concatenate([np.stack([a.ravel(), b.ravel(), d.ravel()], 1),
                           np.stack([a.ravel(), d.ravel(), c.ravel()], 1)])
    return check_mesh(RawMesh("<cylinder>", pts, tris))


def _run_on(raw: RawMesh, tmp_path, name: str, stim: list[int], t_end: float):
    import meshio

    from .helpers import run
    path = tmp_path / f"{name}.vtu"
    meshio.write(path, meshio.Mesh(raw.points, [("triangle", raw.elements)]))
    text = (f"mesh: {{kind: file, path: {path}, conductivity: {{along: 0.1, across: 0.1}}}}\n"
            f"protocol: {{t_end: {t_end}, stimuli: [{{start: 1, duration: 2, amplitude: -60, "
            f"region: {{kind: cells, cells: {stim}}}}}]}}\n"
            "solver: {method: rlfe, dt: 0.02, precision: float64}\n"
            "output: {random_probes: 0, probe_cells: [0], dt_save: 1.0}\n")
    return run(text)[0]["activation_time"]


@pytest.mark.slow
def test_planar_wave_around_a_cylinder_matches_the_flat_strip(tmp_path):
    """A wave running around a cylinder of radius 2 mm against the same tissue on the flat
    strip of the same node spacing: conduction velocities agree within 2 % (chords vs arcs
    of 0.1 mm on r = 2 mm differ by 1e-4; the rest is the fit)."""
    r, n_around, n_along, dz = 2.0, 126, 3, 0.1
    ds = 2 * r * np.sin(np.pi / n_around)              # chord between neighbours around
    cyl = _cylinder_band(r, n_around, n_along, dz)
    ring = [k for k in range(len(cyl.points)) if min(k % n_around, n_around - k % n_around) <= 4]
    act = _run_on(cyl, tmp_path, "cyl", ring, 20.0)
    arc = np.arange(n_around) * ds
    sel = (arc > 1.5) & (arc < 5.0)
    cv_curved = np.polyfit(act[:n_around][sel], arc[sel], 1)[0]
    nx = n_around
    flat = RawMesh("<strip>", *_strip(nx, n_along, ds, dz))
    flat = check_mesh(flat)
    act_f = _run_on(flat, tmp_path, "flat", [k for k in range(len(flat.points)) if k % nx <= 4], 20.0)
    x = np.arange(nx) * ds
    sel_f = (x > 1.5) & (x < 5.0)
    cv_flat = np.polyfit(act_f[:nx][sel_f], x[sel_f], 1)[0]
    assert 0.2 < cv_flat < 1.5                            # a propagating wave, mm/ms
    assert cv_curved == pytest.approx(cv_flat, rel=0.02)


def _strip(nx, ny, dx, dy):
    idx = np.arange(nx * ny).reshape(ny, nx)
    a, b, c, d = idx[:-1, :-1].ravel(), idx[:-1, 1:].ravel(), idx[1:, :-1].ravel(), idx[1:, 1:].ravel()
    tris = np.concatenate([np.stack([a, b, d], 1), np.stack([a, d, c], 1)])
    iy, ix = np.divmod(np.arange(nx * ny), nx)
    return np.stack([ix * dx, iy * dy, np.zeros(nx * ny)], 1), tris


def _tagged_strip(tmp_path):
    """A 3 mm strip, dx 0.1: elements with centroid x in [1.2, 1.8] mm carry tag 2, others 1."""
    import meshio
    raw = shapes.grid_sheet(31, 4, 0.1)
    cx = raw.points[raw.elements][:, :, 0].mean(axis=1)
    tags = np.where((cx > 1.2) & (cx < 1.8), 2, 1)
    path = tmp_path / "strip.vtu"
    meshio.write(path, meshio.Mesh(raw.points, [("triangle", raw.elements)], cell_data={"tag": [tags]}))
    return path


def test_a_scar_tag_cuts_the_operator_and_tag_regions_pick_its_nodes(tmp_path):
    from app.sims.cardiac.config import ParameterRegion
    from app.sims.cardiac.engine import region_mask
    from app.sims.cardiac.mesh_io import MeshFileError, read_mesh
    raw = read_mesh(_tagged_strip(tmp_path))
    scar = fem.fem_mesh(raw, fem.Tissue(0.1, 0.1, 0.1, tag_scale=((2, 0.0),)))
    x = raw.points[:, 0]
    inside = (x > 1.25) & (x < 1.75)
    assert np.all(scar.inv_d2[inside] == 0)            # no conduction within the scar
    left, right = x < 1.25, x > 1.75
    a = scar.matrix(1.0)
    assert np.all(a[np.ix_(left, ~left)] == 0) and np.all(a[np.ix_(right, ~right)] == 0)
    mask = region_mask(scar, ParameterRegion(kind="tag", tags=[2]))
    np.testing.assert_array_equal(mask, (x > 1.15) & (x < 1.85))    # nodes of tag-2 elements
    with pytest.raises(MeshFileError, match="strip.vtu: mesh.tag_conductivity names tag 7, which no element"):
        fem.fem_mesh(raw, fem.Tissue(0.1, 0.1, 0.1, tag_scale=((7, 0.0),)))


@pytest.mark.slow
def test_a_wave_stops_at_a_scar_tag(tmp_path):
    from .helpers import run
    path = _tagged_strip(tmp_path)
    base = (f"mesh: {{kind: file, path: {path}, conductivity: {{along: 0.1, across: 0.1}}TAGS}}\n"
            "protocol: {t_end: 25, stimuli: [{start: 1, duration: 2, amplitude: -60, region: {kind: rect, x1: 0.35}}]}\n"
            "solver: {method: rlfe, dt: 0.02, precision: float64}\noutput: {random_probes: 0, probe_cells: [0]}\n")
    healthy = run(base.replace("TAGS", ""))[0]["activation_time"]
    scarred = run(base.replace("TAGS", ", tag_conductivity: {2: 0.0}"))[0]["activation_time"]
    x = np.tile(np.arange(31) * 0.1, 4)
    assert np.isfinite(healthy).all()
    assert np.isfinite(scarred[x < 1.1]).all() and np.isnan(scarred[x > 1.9]).all()


def test_an_s1_s2_protocol_on_a_file_mesh_gives_two_waves(tmp_path):
    """S1 and, once the strip has recovered, S2 at the same end of a VTU strip (the CLI's
    path): every node fires twice, the second wave later by about the coupling interval."""
    import meshio

    from .helpers import run
    raw = shapes.grid_sheet(21, 3, 0.1)
    path = tmp_path / "strip.vtu"
    meshio.write(path, meshio.Mesh(raw.points, [("triangle", raw.elements)]))
    arrays, summary = run(
        f"mesh: {{kind: file, path: {path}, conductivity: {{along: 0.1, across: 0.1}}}}\n"
        "protocol: {t_end: 420, stimuli: [{name: S1, start: 1, duration: 2, amplitude: -60, region: {kind: rect, x1: 0.25}},"
        " {name: S2, start: 400, duration: 2, amplitude: -60, region: {kind: rect, x1: 0.25}}]}\n"
        "solver: {method: rlfe, dt: 0.02, precision: float64}\noutput: {random_probes: 0, probe_cells: [0], dt_save: 1.0}\n")
    first, last = arrays["activation_time"], arrays["activation_last"]
    assert summary["finished"] and np.isfinite(first).all() and np.isfinite(last).all()
    assert first.max() < 20.0 and np.all(last > 400.0) and np.all(last < 420.0)
    np.testing.assert_allclose(last - first, 399.0, atol=3.0)       # the same conduction, S2 − S1 later
