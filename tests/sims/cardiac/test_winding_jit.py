"""The compiled pre-pass of the phase-singularity count: it may only leave out triangles whose
winding is 0, so the singularities it gives are those of counting every triangle."""

import numpy as np
import pytest

from app.sims.cardiac import fem, readouts, shapes
from app.sims.cardiac.winding_jit import ON_AN_AXIS, candidates, quadrants


def _every_triangle(mesh, v_now, v_before):
    tri = readouts.loops(mesh)
    q = readouts.winding(readouts.phase(v_now, v_before), tri)
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
def test_the_compiled_pass_keeps_every_triangle_that_winds(mesh):
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
    assert quadrants(v_now, v_before, -40.0).tolist() == [3, 3, 3, 2, ON_AN_AXIS | 2]
    tri = np.array([[0, 1, 2], [0, 1, 3], [0, 1, 4]])
    assert candidates(v_now, v_before, -40.0, tri).tolist() == [1, 2]
