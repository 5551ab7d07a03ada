"""Readouts on any mesh: phase singularities on synthetic spirals with known cores (surface,
sphere, volume), conduction-velocity vectors on planar activation, the tracker."""

import numpy as np
import pytest

from app.sims.cardiac import fem, readouts, shapes


def _spiral(points, core, turn: float = 0.0):
    """V now and τ before of a rigidly rotating spiral: phase θ = atan2(y − y0, x − x0) − turn."""
    phi = np.arctan2(points[:, 1] - core[1], points[:, 0] - core[0]) - turn
    return -40 + 40 * np.cos(phi), -40 + 40 * np.sin(phi)


def test_a_spiral_core_on_a_sheet_is_found_in_the_triangle_that_holds_it():
    m = shapes.sheet(30, 20, 0.25)
    core = (3.33, 2.07)
    pos, q = readouts.singularities(m, *_spiral(m.positions, core))
    assert q.tolist() == [1]
    x = m.positions[m.elements]
    hit = next(k for k, tri in enumerate(x) if _inside(core, tri))
    np.testing.assert_allclose(pos[0], x[hit].mean(axis=0))
    v_now, v_before = _spiral(m.positions, core)
    assert readouts.singularities(m, v_now, -80 - v_before)[1].tolist() == [-1]     # the other sense
    rest = np.full(m.n_cells, -80.0)
    assert len(readouts.singularities(m, rest, rest)[1]) == 0
    plane = -40 + 40 * np.cos(0.3 * m.positions[:, 0])
    assert len(readouts.singularities(m, plane, -40 + 40 * np.sin(0.3 * m.positions[:, 0]))[1]) == 0


def _inside(p, tri):
    def cross(u, w):
        return u[0] * w[1] - u[1] * w[0]
    a, b, c = tri[:, :2]
    d = [cross(b - a, p - a), cross(c - b, p - b), cross(a - c, p - c)]
    return all(v > 0 for v in d) or all(v < 0 for v in d)


def test_a_field_winding_around_the_axis_of_a_sphere_has_cores_at_both_poles():
    """Azimuthal phase on a closed surface: two cores, at the poles, of opposite charge seen
    from outside (their sum is zero, as on any closed surface)."""
    m = shapes.icosphere(4, radius_mm=5.0)
    tilt = np.array([0.3, -0.2, 1.0]) / np.linalg.norm([0.3, -0.2, 1.0])
    e1 = np.cross(tilt, [1.0, 0, 0])
    e1 /= np.linalg.norm(e1)
    e2 = np.cross(tilt, e1)
    local = np.stack([m.positions @ e1, m.positions @ e2], 1)
    pos, q = readouts.singularities(m, *_spiral(local, (0.0, 0.0)))
    assert len(q) == 2 and q.sum() == 0
    axis = pos / np.linalg.norm(pos, axis=1, keepdims=True)
    assert np.all(np.abs(axis @ tilt) > np.cos(np.radians(5)))       # within 5° of the axis: a cell


def test_a_straight_filament_pierces_the_faces_along_its_axis():
    raw = shapes.structured_slab(3.0, 3.0, 2.0, 0.5)
    m = fem.fem_mesh(raw, fem.Tissue(0.1, 0.1, 0.1))
    core = (1.27, 1.61)
    pos, q = readouts.singularities(m, *_spiral(m.positions, core))
    assert len(q) >= 4                                     # at least one face per layer of 0.5 mm
    assert np.all(np.hypot(pos[:, 0] - core[0], pos[:, 1] - core[1]) < 0.5)
    assert np.ptp(pos[:, 2]) > 1.5                        # the whole depth


def test_conduction_velocity_vectors_of_planar_activation_are_exact():
    """T linear in x: P1 gradients are exact, so every node has CV = c along the wave; nodes
    whose every element holds a never-activated node are NaN."""
    c, th = 0.6, np.radians(30)
    d = np.array([np.cos(th), np.sin(th), 0.0])
    for m in (shapes.sheet(12, 9, 0.2), fem.fem_mesh(shapes.structured_slab(2.0, 1.0, 1.0, 0.25),
                                                       fem.Tissue(0.1, 0.1, 0.1))):
        t = 2.0 + m.positions @ d / c
        np.testing.assert_allclose(readouts.conduction_velocity(m, t), np.tile(c * d, (m.n_cells, 1)), rtol=1e-9)
    m = shapes.sheet(5, 5, 0.2)
    t = 2.0 + m.positions @ d / c
    t[12] = np.nan                                      # the centre node never fired
    cv = readouts.conduction_velocity(m, t)
    assert np.isnan(cv[12]).all() and np.isfinite(cv[0]).all()


def test_velocity_field_at_chosen_nodes_equals_the_whole_field_there():
    """A live view asks for a few nodes: each vector must be the one of the whole-mesh field
    (every element around the node counted), on a surface and on a volume."""
    rng = np.random.default_rng(3)
    for m in (shapes.icosphere(3, radius_mm=5.0), fem.fem_mesh(shapes.structured_slab(2.0, 1.0, 1.0, 0.25),
                                                                fem.Tissue(0.1, 0.1, 0.1))):
        t = 1.0 + np.linalg.norm(m.positions - m.positions[0], axis=1) / 0.5 + rng.normal(0, 0.05, m.n_cells)
        t[rng.choice(m.n_cells, 5, replace=False)] = np.nan
        whole = readouts.conduction_velocity(m, t)
        nodes = rng.choice(m.n_cells, 40, replace=False)
        field = readouts.VelocityField(m, nodes)
        assert len(field.elements) < len(m.elements)
        np.testing.assert_allclose(field(t), whole[nodes], rtol=1e-12, atol=0)
        assert np.isfinite(whole[nodes]).any() and np.isnan(whole[nodes]).any() == np.isnan(field(t)).any()


def test_tracker_follows_a_rotating_spiral_with_the_delay():
    m = shapes.sheet(40, 40, 0.25)
    core, omega, tau = np.array([5.1, 4.9]), 2 * np.pi / 80.0, 20.0
    tracker = readouts.SingularityTracker(m, tau)
    for t in np.arange(0.0, 100.0, 5.0):
        phi = np.arctan2(m.positions[:, 1] - core[1], m.positions[:, 0] - core[0]) - omega * t
        tracker.observe(t, -40 + 40 * np.cos(phi))
    out = tracker.arrays()
    assert out["ps_t"].min() == pytest.approx(tau)            # the first time with a V τ before
    assert set(out["ps_charge"].tolist()) == {-1}             # the wave turns clockwise
    assert np.all(np.linalg.norm(out["ps_xyz"][:, :2] - core, axis=1) < 0.25)


def test_frames_carry_the_activation_so_far_for_live_cv_arrows():
    """Mid-run a frame holds the first activation times reached so far (NaN ahead of the
    wave) and no APD90; the last frame holds both."""
    from app.sims.cardiac.simulation import CardiacSimulation

    from .helpers import cable, config

    sim = CardiacSimulation(config(cable(0.2, t_end=20.0, dt=0.02)), "cpu")
    try:
        mid = None
        while not sim.finished:
            frame = sim.advance()
            act = frame.activation_time
            if not frame.done and act is not None and 0 < np.isfinite(act).sum() < act.size:
                mid = frame
        assert mid is not None and mid.apd90 is None
        first = np.flatnonzero(np.isfinite(mid.activation_time))
        assert first[0] == 0 and (np.diff(first) == 1).all()        # the wave from the stimulated end
        assert frame.done and frame.apd90 is not None and np.isfinite(frame.activation_time).all()
    finally:
        sim.close()


def _every_triangle(mesh, v_now, v_before):
    tri = readouts.loops(mesh)
    q = readouts.winding(readouts.phase(v_now, v_before)[tri])
    hit = np.flatnonzero(q)
    return mesh.positions[tri[hit]].mean(axis=1), q[hit]


def _fields(n: int, rng):
    """Fields that wind everywhere (noise), ties on the quadrants' edges, NaN, and rest."""
    yield rng.uniform(-85, 20, n), rng.uniform(-85, 20, n)
    yield rng.choice([-40.0, -39.0, -41.0, np.nan], n), rng.choice([-40.0, -39.0, -41.0], n)
    yield rng.choice([-40.0, -40.0 + 1e-12, -80.0, 20.0], n), rng.choice([-40.0, -40.0 - 1e-12, -80.0, 20.0], n)
    yield np.full(n, -80.0), np.full(n, -80.0)


@pytest.mark.parametrize("mesh", [shapes.icosphere(4, radius_mm=5.0),
                                  fem.fem_mesh(shapes.structured_slab(2.0, 1.0, 1.0, 0.25), fem.Tissue(0.1, 0.1, 0.1))],
                         ids=["sphere surface", "slab faces"])
def test_the_quadrant_pass_keeps_every_triangle_that_winds(mesh):
    rng = np.random.default_rng(7)
    found = 0
    for v_now, v_before in _fields(mesh.n_cells, rng):
        pos, q = readouts.singularities(mesh, v_now, v_before)
        ref_pos, ref_q = _every_triangle(mesh, v_now, v_before)
        np.testing.assert_array_equal(q, ref_q)
        np.testing.assert_array_equal(pos, ref_pos)
        found += len(q)
    assert found > 100            # the fields above do wind


def test_triangles_inside_one_quadrant_are_left_out_and_ties_kept():
    v_now = np.array([-30.0, -20.0, -10.0, -50.0, -40.0])
    v_before = np.array([-30.0, -35.0, -25.0, -30.0, -30.0])
    assert readouts.quadrants(v_now, v_before, -40.0).tolist() == [3, 3, 3, 2, readouts.ON_AN_AXIS | 2]
    tri = np.array([[0, 1, 2], [0, 1, 3], [0, 1, 4]])
    assert readouts.may_wind(readouts.quadrants(v_now, v_before, -40.0), tri).tolist() == [1, 2]


@pytest.mark.parametrize("mesh", [shapes.icosphere(3, radius_mm=5.0),
                                  fem.fem_mesh(shapes.structured_slab(2.0, 1.0, 1.0, 0.25), fem.Tissue(0.1, 0.1, 0.1))],
                         ids=["sphere surface", "slab faces"])
def test_candidates_kept_between_readouts_are_those_of_a_full_pass(mesh):
    """Codes that change a few nodes at a time, many at once, not at all, and on the axes: the
    triangles kept are always exactly those a pass over every triangle keeps."""
    rng = np.random.default_rng(11)
    tri = readouts.loops(mesh)
    keep = readouts.WindingCandidates(tri, mesh.n_cells)
    code = np.zeros(mesh.n_cells, np.uint8)
    tested = 0
    for changes in (0, 1, 3, 10, mesh.n_cells // 2, 5, 0, 2, mesh.n_cells, 4):
        nodes = rng.choice(mesh.n_cells, changes, replace=False)
        code = code.copy()
        code[nodes] = rng.choice([0, 1, 2, 3, readouts.ON_AN_AXIS | 1], changes)
        got = keep(code)
        np.testing.assert_array_equal(got, readouts.may_wind(code, tri))
        tested += len(got)
    assert tested > 0


def test_quadrants_of_float32_voltages_compare_in_float64():
    """A float32 V next to a v_mid that float32 cannot hold: its quadrant is that of
    float64(V) − v_mid, not of V against v_mid rounded to float32."""
    v = np.array([np.float32(-40.1), -40.0, np.nan, np.inf], np.float32)
    reference = np.asarray(v, np.float64) + 40.1
    code = readouts.quadrants(v, v, -40.1)
    np.testing.assert_array_equal(code & 1, reference > 0)
    np.testing.assert_array_equal(code >> 2, reference == 0)
    assert code[0] == 3            # float32(-40.1) lies above -40.1
