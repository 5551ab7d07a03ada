"""The shared VTK / PLY writers: point clouds and meshes, ASCII and binary, read back."""

from __future__ import annotations

import numpy as np
import pytest

from app.gui.mesh_export import read_ply, write_ply, write_vtk


@pytest.mark.parametrize("binary", [False, True])
def test_point_cloud_ply_round_trip(tmp_path, binary):
    rng = np.random.default_rng(1)
    pos = rng.uniform(-5, 5, (50, 3)).astype(np.float32)
    cell = np.arange(50, dtype=np.int32) // 5
    value = rng.normal(size=50)
    path = write_ply(tmp_path / "p.ply", pos, {"cell": cell, "value": value}, binary=binary)
    xyz, cols = read_ply(path)
    assert np.allclose(xyz, pos, atol=1e-5)
    assert cols["cell"].dtype == np.int32 and np.array_equal(cols["cell"], cell)
    assert np.allclose(cols["value"], value, rtol=1e-6, atol=1e-6)
    head = path.read_bytes().split(b"end_header")[0].decode()
    assert "element vertex 50" in head and "element face 0" in head
    assert "property int cell" in head and "property float value" in head


def test_vtk_point_cloud_and_mesh(tmp_path):
    pos = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0]], float)
    text = write_vtk(tmp_path / "c.vtk", pos, {"kind": np.array([0, 1, 2], np.int8)}).read_text()
    assert "POINTS 3 double" in text and "VERTICES 3 6" in text and "POLYGONS" not in text
    assert "SCALARS kind int 1" in text
    lines = text.splitlines()
    i = lines.index("LOOKUP_TABLE default")
    assert [int(x) for x in lines[i + 1:i + 4]] == [0, 1, 2]
    mesh = write_vtk(tmp_path / "m.vtk", pos, {"v": np.array([0.5, np.nan, 2.0])}, faces=[[0, 1, 2]])
    text = mesh.read_text()
    assert "POLYGONS 1 4\n3 0 1 2\n" in text and "VERTICES" not in text and "nan" in text
    big = write_vtk(tmp_path / "b.vtk", pos, {"v": np.ones(3)}, binary=True).read_bytes()
    head, _, rest = big.partition(b"POINTS 3 double\n")
    assert b"BINARY" in head
    assert np.array_equal(np.frombuffer(rest[:72], ">f8").reshape(3, 3), pos)
