"""Conduction-velocity arrows of the tissue view (no Qt): evenly spread nodes, at most the
budget on any mesh, and segments that point along the vector with barbs in the tangent plane."""

import numpy as np

from app.gui.views.arrows import arrow_nodes, arrow_segments, vertex_normals
from app.sims.cardiac.shapes import grid_sheet, icosphere_surface


def test_small_meshes_get_an_arrow_at_every_node_large_ones_an_even_spread_within_budget():
    sheet = grid_sheet(10, 8, 0.2).points
    nodes, spacing = arrow_nodes(sheet, np.arange(80), 100)
    assert nodes.tolist() == list(range(80)) and 0.15 < spacing < 0.25
    big = grid_sheet(300, 200, 0.1).points
    nodes, spacing = arrow_nodes(big, np.arange(len(big)), 1500)
    assert 700 < len(nodes) <= 1500 and len(np.unique(nodes)) == len(nodes)
    # even: every 2-spacing square of the sheet holds at least one arrow
    cells = np.unique(np.floor(big[nodes, :2] / (2 * spacing)).astype(int), axis=0)
    assert len(cells) >= np.prod(np.floor(np.ptp(big[:, :2], axis=0) / (2 * spacing)))
    sphere = icosphere_surface(6).points
    nodes, spacing = arrow_nodes(sphere, np.arange(len(sphere)), 1500)
    assert 500 < len(nodes) <= 1500
    nearest = np.sort(np.linalg.norm(sphere[nodes][:, None] - sphere[nodes][None], axis=2), axis=1)[:, 1]
    assert nearest.min() > 0.3 * spacing                   # no two arrows on top of each other


def test_segments_point_along_the_vector_in_proportion_to_speed_with_barbs_beside_the_tip():
    """Lengths in proportion to speed up to the 90th percentile; an unbounded speed (∇T → 0 at
    a wave's source) is drawn at full length, not shrinking every other arrow to a dot."""
    n = 12
    origins = np.stack([np.arange(n, dtype=float), np.zeros(n), np.zeros(n)], 1)
    vectors = np.zeros((n, 3))
    vectors[:, 0] = 0.5
    vectors[1] = [0.0, 0.25, 0.0]
    vectors[2] = np.nan
    vectors[3] = [1e6, 0.0, 0.0]
    normals = np.tile([0.0, 0.0, 1.0], (n, 1))
    seg = arrow_segments(origins, vectors, normals, 0.4).reshape(-1, 6, 3)
    assert seg.shape == (n - 1, 6, 3)                     # the NaN vector draws nothing
    np.testing.assert_allclose(seg[0, 1], [0.4, 0.0, 0.0])            # the common speed: full length
    np.testing.assert_allclose(seg[1, 1], [1.0, 0.2, 0.0])            # half the speed: half as long
    np.testing.assert_allclose(seg[2, 1], [3.4, 0.0, 0.0])            # unbounded: full length only
    for arrow, direction in zip(seg, ([1, 0, 0], [0, 1, 0])):
        barbs = arrow[[3, 5]] - arrow[1]
        assert (barbs @ direction < 0).all()                          # behind the tip
        assert np.allclose(barbs[:, 2], 0) and np.allclose(barbs.sum(axis=0) @ np.cross([0, 0, 1], direction), 0)
    assert arrow_segments(origins, np.zeros((3, 3)), normals, 1.0).shape == (0, 3)


def test_vertex_normals_of_a_sphere_point_outwards():
    raw = icosphere_surface(3, radius_mm=2.0)
    normals = vertex_normals(raw.points, raw.elements[:, ::-1])       # either face orientation
    np.testing.assert_allclose(normals, raw.points / 2.0, atol=0.02)
