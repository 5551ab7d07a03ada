"""The pseudo-ECG integral against the divergence theorem on a box, second order in h."""

import numpy as np
import pytest

from app.sims.cardiac import fem, shapes
from app.sims.cardiac.ecg import Electrodes


def _box_flux(size, x0, n=48):
    """∫_box ∇(1/r) dV = ∮ (1/r) n dS, by Gauss–Legendre on each face (x0 outside: smooth)."""
    t, w = np.polynomial.legendre.leggauss(n)
    total = np.zeros(3)
    for axis in range(3):
        a, b = [i for i in range(3) if i != axis]
        u = (t + 1) / 2 * size[a]
        s = (t + 1) / 2 * size[b]
        ww = np.outer(w, w) * size[a] * size[b] / 4
        for side, sign in ((0.0, -1.0), (size[axis], 1.0)):
            p = np.zeros((n, n, 3))
            p[..., a], p[..., b] = u[:, None], s[None, :]
            p[..., axis] = side
            total[axis] += sign * np.sum(ww / np.linalg.norm(p - x0, axis=-1))
    return total


def test_linear_field_matches_the_surface_integral_to_second_order():
    size, x0, g = (2.0, 1.0, 1.0), np.array([3.0, 2.0, 1.5]), np.array([1.0, -2.0, 0.5])
    exact = g @ _box_flux(size, x0)
    errors = []
    for dx in (0.25, 0.125):
        m = fem.fem_mesh(shapes.structured_slab(*size, dx), fem.Tissue(0.1, 0.1, 0.1))
        phi = Electrodes(m, [x0])(m.positions @ g)[0]
        errors.append(abs(phi - exact))
    assert errors[1] < 2e-3 * abs(exact)
    assert errors[0] / errors[1] == pytest.approx(4.0, rel=0.05)      # O(h²)


def test_time_series_and_refusals():
    m = fem.fem_mesh(shapes.structured_slab(1.0, 1.0, 1.0, 0.5), fem.Tissue(0.1, 0.1, 0.1))
    e = Electrodes(m, [[3, 0, 0], [0, 3, 0]])
    v = np.random.default_rng(1).normal(size=(5, m.n_cells))
    np.testing.assert_allclose(e(v), np.stack([e(row) for row in v]))
    np.testing.assert_allclose(e(np.ones(m.n_cells)), 0.0, atol=1e-12)   # a uniform V has no ECG
    from app.sims.cardiac.mesh import single_cell
    with pytest.raises(ValueError, match="needs a tissue of elements; this mesh is a single"):
        Electrodes(single_cell(), [[0, 0, 1]])


def test_a_run_records_the_ecg_at_its_electrodes(tmp_path):
    """A wave along a strip: the ECG at an electrode beyond the far end is recorded at every
    live view, is zero at rest, changes as the wave runs, and equals Φ of the final V."""
    meshio = pytest.importorskip("meshio")
    from app.sims.cardiac.config import n_cells

    from .helpers import config, run
    raw = shapes.grid_sheet(21, 3, 0.1)
    path = tmp_path / "strip.vtu"
    meshio.write(path, meshio.Mesh(raw.points, [("triangle", raw.elements)]))
    text = (f"mesh: {{kind: file, path: {path}, conductivity: {{along: 0.1, across: 0.1}}, "
            "electrodes: [[3.0, 0.1, 0.5]]}\n"
            "protocol: {t_end: 8, stimuli: [{start: 1, duration: 2, amplitude: -60, region: {kind: rect, x1: 0.35}}]}\n"
            "solver: {method: rlfe, dt: 0.02, precision: float64}\noutput: {random_probes: 0, snapshot_interval: 0.5}\n")
    arrays, _ = run(text)
    t, ecg = arrays["ecg_t"], arrays["ecg"][:, 0]
    assert t[0] == 0 and t[-1] == pytest.approx(8.0) and len(t) >= 3 and np.all(np.diff(t) > 0)
    assert abs(ecg[0]) < 1e-9 and np.ptp(ecg) > 1.0
    cfg = config(text)
    from app.sims.cardiac.engine import build_mesh
    mesh = build_mesh(cfg)
    assert mesh.n_cells == n_cells(cfg.mesh)
    assert ecg[-1] == pytest.approx(Electrodes(mesh, [[3.0, 0.1, 0.5]])(arrays["V_final"])[0], rel=1e-9)
    with pytest.raises(Exception, match="mesh.electrodes"):
        config(text.replace("[[3.0, 0.1, 0.5]]", "[[3.0, 0.1]]"))
