"""Meshes from files: openCARP text and meshio formats read to the same operator, refusals
naming the file and the element, quality figures, the config path."""

import numpy as np
import pytest

from app.sims.cardiac import fem, mesh_io, shapes
from app.sims.cardiac.mesh_io import MeshFileError, RawMesh, check_mesh, quality, read_mesh

meshio = pytest.importorskip("meshio")


def _write_opencarp(base, raw: RawMesh, um=True, header=True):
    s = 1000.0 if um else 1.0
    with open(f"{base}.pts", "w") as fh:
        fh.write(f"{len(raw.points)}\n")
        for p in raw.points * s:
            fh.write(f"{p[0]:.9g} {p[1]:.9g} {p[2]:.9g}\n")
    kind = "Tt" if raw.elements.shape[1] == 4 else "Tr"
    with open(f"{base}.elem", "w") as fh:
        fh.write(f"{len(raw.elements)}\n")
        for e, tag in zip(raw.elements, raw.tags if raw.tags is not None else np.zeros(len(raw.elements), int)):
            fh.write(f"{kind} {' '.join(map(str, e))} {tag}\n")
    if raw.fibres is not None:
        with open(f"{base}.lon", "w") as fh:
            two = raw.sheets is not None
            if header:
                fh.write("2\n" if two else "1\n")
            for i, f in enumerate(raw.fibres):
                row = list(f) + (list(raw.sheets[i]) if two else [])
                fh.write(" ".join(f"{v:.9g}" for v in row) + "\n")


def _slab():
    raw = shapes.structured_slab(2.0, 1.0, 1.0, 0.5)
    return RawMesh(raw.path, raw.points, raw.elements, raw.fibres, raw.sheets,
                   np.arange(len(raw.elements)) % 3)


@pytest.mark.parametrize("header", [True, False])
def test_opencarp_and_vtu_give_the_same_operator(tmp_path, header):
    raw = _slab()
    _write_opencarp(tmp_path / "slab", raw, header=header)
    meshio.write(tmp_path / "slab.vtu", meshio.Mesh(raw.points, [("tetra", raw.elements)], cell_data={
        "fibres": [raw.fibres], "sheets": [raw.sheets], "tag": [raw.tags]}))
    a, b = read_mesh(tmp_path / "slab.elem"), read_mesh(tmp_path / "slab.vtu")
    for r in (a, b):
        np.testing.assert_allclose(r.points, raw.points, atol=1e-9)
        np.testing.assert_array_equal(r.elements, raw.elements)
        np.testing.assert_array_equal(r.tags, raw.tags)
        np.testing.assert_allclose(r.sheets, raw.sheets)
    t = fem.Tissue(0.3, 0.05, 0.02)
    np.testing.assert_allclose(fem.fem_mesh(a, t).matrix(1.0), fem.fem_mesh(b, t).matrix(1.0), atol=1e-9)


def test_quality_of_a_regular_tetrahedron_and_an_equilateral_triangle():
    tet = np.array([[1, 1, 1], [1, -1, -1], [-1, 1, -1], [-1, -1, 1]], float)
    q = quality(check_mesh(RawMesh("<t>", tet, np.array([[0, 1, 2, 3]]))))
    assert q["max_aspect_ratio"] == pytest.approx(1.0)
    assert q["min_dihedral_deg"] == pytest.approx(np.degrees(np.arccos(1 / 3)))
    assert q["min_edge_mm"] == q["max_edge_mm"] == pytest.approx(np.sqrt(8))
    tri = np.array([[0, 0, 0], [1, 0, 0], [0.5, np.sqrt(3) / 2, 0]])
    q = quality(check_mesh(RawMesh("<t>", tri, np.array([[0, 1, 2]]))))
    assert q["max_aspect_ratio"] == pytest.approx(1.0) and q["min_angle_deg"] == pytest.approx(60.0)


def test_all_inverted_tetrahedra_are_reoriented_one_is_refused():
    raw = _slab()
    flipped = raw.elements[:, [1, 0, 2, 3]]
    fixed = check_mesh(RawMesh("f.vtu", raw.points, flipped))
    assert (mesh_io.signed_measure(raw.points, fixed.elements) > 0).all()
    one = raw.elements.copy()
    one[5] = one[5][[1, 0, 2, 3]]
    with pytest.raises(MeshFileError, match=r"f.vtu: element 5 .* is inverted"):
        check_mesh(RawMesh("f.vtu", raw.points, one))


@pytest.mark.parametrize("change,message", [
    (lambda p, e: (p, np.concatenate([e, [[0, 1, 3], [0, 1, 6]]])), r"m.ply: edge 0-1 \(element \d+\) is shared by 3"),
    (lambda p, e: (p, np.concatenate([e, [[0, 0, 2]]])), r"m.ply: element 8 repeats a node"),
    (lambda p, e: (p, np.concatenate([e, [[0, 1, 99]]])), r"m.ply: element 8 names node 99, outside 0..8"),
    (lambda p, e: (np.concatenate([p, [[9, 9, 0]]]), e), r"m.ply: node 9 belongs to no element"),
    (lambda p, e: (np.concatenate([p, [[0.5, 0, 0]]]), np.concatenate([e, [[0, 1, 9]]])),
     r"m.ply: element 8 \(\[0, 1, 9\]\) is degenerate"),
])
def test_bad_surfaces_are_refused_naming_file_and_element(change, message):
    raw = shapes.grid_sheet(3, 3, 1.0)
    pts, el = change(raw.points, raw.elements)
    with pytest.raises(MeshFileError, match=message):
        check_mesh(RawMesh("m.ply", pts, el))


def test_anisotropy_without_fibres_is_refused(tmp_path):
    raw = _slab()
    path = tmp_path / "plain.vtu"
    meshio.write(path, meshio.Mesh(raw.points, [("tetra", raw.elements)]))
    r = read_mesh(path)
    with pytest.raises(MeshFileError, match="plain.vtu: conductivity along fibres .* no fibre directions"):
        fem.fem_mesh(r, fem.Tissue(0.3, 0.05, 0.05))
    with pytest.raises(MeshFileError, match="plain.vtu: conductivity normal to the sheets"):
        fem.fem_mesh(RawMesh(r.path, r.points, r.elements, raw.fibres), fem.Tissue(0.3, 0.05, 0.02))
    fem.fem_mesh(r, fem.Tissue(0.1, 0.1, 0.1))           # isotropic needs none


def test_sizes_beyond_memory_are_refused_before_reading(tmp_path, monkeypatch):
    (tmp_path / "big.pts").write_text("90000000\n0 0 0\n")
    (tmp_path / "big.elem").write_text("500000000\nTt 0 0 0 0 0\n")
    monkeypatch.setattr(mesh_io, "available_host_bytes", lambda: 8 << 30)
    with pytest.raises(MeshFileError, match=r"big.elem: 90,000,000 nodes and 500,000,000 elements need"):
        read_mesh(tmp_path / "big.elem")


def test_opencarp_header_and_count_mismatch(tmp_path):
    (tmp_path / "m.pts").write_text("4\n0 0 0\n1000 0 0\n0 1000 0\n")
    (tmp_path / "m.elem").write_text("1\nTr 0 1 2 0\n")
    with pytest.raises(MeshFileError, match="m.pts: the header says 4 nodes, the file has 3"):
        read_mesh(tmp_path / "m.pts")
    (tmp_path / "m.pts").write_text("4\n0 0 0\n1000 0 0\n0 1000 0\n1000 1000 0\n")
    (tmp_path / "m.elem").write_text("1\nQd 0 1 2 3 0\n")
    with pytest.raises(MeshFileError, match=r"m.elem: element types \['Qd'\]"):
        read_mesh(tmp_path / "m")


def test_file_mesh_config_resolves_the_path_and_refuses_an_unstable_step(tmp_path):
    from app.sims.cardiac.config import load_config
    from app.sims.common.config import ConfigError, load_yaml
    raw = shapes.grid_sheet(6, 4, 0.2)
    meshio.write(tmp_path / "sheet.vtu", meshio.Mesh(raw.points, [("triangle", raw.elements)]))
    cfg_path = tmp_path / "run.yaml"
    cfg_path.write_text("domain: cardiac\nmesh: {kind: file, path: sheet.vtu, conductivity: {along: 0.1, "
                        "across: 0.1}}\noutput: {random_probes: 3}\nsolver: {dt: 0.05}\n")
    cfg = load_config(load_yaml(cfg_path))
    assert cfg.mesh.path == str(tmp_path / "sheet.vtu")
    cfg_path.write_text(cfg_path.read_text().replace("dt: 0.05", "dt: 0.2"))
    with pytest.raises(ConfigError, match=r"run.yaml:\d+: solver.dt: .* exceeds the stable diffusion step"):
        load_config(load_yaml(cfg_path))
    cfg_path.write_text("domain: cardiac\nmesh: {kind: file, path: missing.vtu}\n")
    with pytest.raises(ConfigError, match=r"mesh.path: .*missing.vtu: no such file"):
        load_config(load_yaml(cfg_path))
    cfg_path.write_text("domain: cardiac\nmesh: {kind: file, path: sheet.vtu}\n")
    with pytest.raises(ConfigError, match=r"sheet.vtu: conductivity along fibres"):
        load_config(load_yaml(cfg_path))


def test_write_opencarp_round_trips(tmp_path):
    raw = _slab()
    back = read_mesh(mesh_io.write_opencarp(tmp_path / "w", raw))
    np.testing.assert_allclose(back.points, raw.points, atol=1e-9)
    np.testing.assert_array_equal(back.elements, raw.elements)
    np.testing.assert_array_equal(back.tags, raw.tags)
    np.testing.assert_allclose(back.fibres, raw.fibres)
    np.testing.assert_allclose(back.sheets, raw.sheets)
