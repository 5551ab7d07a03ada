"""The tissue view's decimation of large surfaces (no Qt): small surfaces whole, large ones
clustered to about the face budget, drawn nodes are mesh nodes on the surface."""

import numpy as np

from app.gui.views.decimate import decimate_surface
from app.sims.cardiac.fem import boundary_faces
from app.sims.cardiac.shapes import icosphere_surface, ventricle_shell


def test_a_surface_within_the_budget_is_drawn_whole():
    raw = icosphere_surface(3)
    nodes, faces = decimate_surface(raw.points, raw.elements, 10_000)
    np.testing.assert_array_equal(nodes, np.arange(len(raw.points)))
    np.testing.assert_array_equal(nodes[faces], raw.elements)


def test_a_volume_is_drawn_as_its_surface_decimated_to_the_budget():
    raw = ventricle_shell(50_000)
    surface = boundary_faces(raw.elements)
    whole, _ = decimate_surface(raw.points, surface, len(surface))
    assert len(whole) < 0.5 * len(raw.points)                  # only the boundary's nodes
    nodes, faces = decimate_surface(raw.points, surface, 5_000)
    assert 2_500 < len(faces) < 1.25 * 5_000
    assert np.isin(nodes, whole).all() and faces.max() < len(nodes)
    lo, hi = raw.points[whole].min(axis=0), raw.points[whole].max(axis=0)
    span = hi - lo
    np.testing.assert_allclose(raw.points[nodes].min(axis=0), lo, atol=0.05 * span.max())
    np.testing.assert_allclose(raw.points[nodes].max(axis=0), hi, atol=0.05 * span.max())
    assert len(np.unique(np.sort(faces, axis=1), axis=0)) == len(faces)   # no repeated faces
