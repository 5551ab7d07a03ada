"""Tissue meshes from files: triangle surfaces in 3-D and tetrahedral volumes, with per-element
fibre (and sheet) directions and region tags where the file has them.

Formats: openCARP's text ``.pts/.elem/.lon`` (read here; coordinates in µm, as openCARP
writes them) and everything meshio reads (VTU/VTK, Gmsh, PLY, ...; coordinates in mm unless
``unit_mm`` says otherwise). What cannot be simulated is refused with the file and the element:
out-of-range or repeated node indices, degenerate or inverted elements, non-manifold surface
edges, nodes no element uses, elements other than triangles and tetrahedra, bad fibres, and
node or element counts the machine cannot hold (checked before the arrays are allocated).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from app.sims.common.memory import available_host_bytes, format_bytes

# Per node: positions, the FE operator's padded rows (width ~ 30 for tetrahedra) and a
# float32 model state of ~50 variables with the solver's stage copies; per element the
# connectivity, fibres and the assembly's 4x4 blocks.
BYTES_PER_NODE = 3 * 8 + 32 * 12 + 50 * 4 * 8
BYTES_PER_ELEMENT = 4 * 8 + 6 * 8 + 16 * 8 * 3
FIBRE_NAMES = ("fibres", "fibers", "fibre", "fiber", "fibre_direction", "fiber_direction")
SHEET_NAMES = ("sheets", "sheet", "sheet_direction")
TAG_NAMES = ("tag", "tags", "region", "elemTag", "gmsh:physical", "medit:ref", "CellEntityIds")
DEGENERATE = 1e-8           # element measure relative to (mean edge)^dim


class MeshFileError(ValueError):
    """A mesh file that cannot be simulated, with the file (and element) named."""


@dataclass(frozen=True)
class RawMesh:
    """A mesh as read: nodes (mm), elements (E, 3) triangles or (E, 4) tetrahedra, and
    optional per-element unit fibres, sheets (E, 3) and integer tags (E,)."""

    path: str
    points: np.ndarray
    elements: np.ndarray
    fibres: np.ndarray | None = None
    sheets: np.ndarray | None = None
    tags: np.ndarray | None = None

    @property
    def dim(self) -> int:
        return self.elements.shape[1] - 1


def check_size(path: str, n_nodes: int, n_elements: int) -> None:
    """Refuse counts whose arrays would not fit in the memory available now."""
    need = n_nodes * BYTES_PER_NODE + n_elements * BYTES_PER_ELEMENT
    avail = available_host_bytes()
    if avail is not None and need > avail:
        raise MeshFileError(f"{path}: {n_nodes:,} nodes and {n_elements:,} elements need about "
                            f"{format_bytes(need)}, more than the {format_bytes(avail)} available")


def _header_count(path: Path, what: str) -> int:
    with open(path, encoding="ascii", errors="replace") as fh:
        first = fh.readline().split()
    if len(first) != 1 or not first[0].isdigit():
        raise MeshFileError(f"{path}: the first line must be the number of {what}")
    return int(first[0])


def _read_table(path: Path, count: int, what: str, usecols=None, dtype=float) -> np.ndarray:
    try:
        rows = np.loadtxt(path, skiprows=1, usecols=usecols, dtype=dtype, ndmin=2, max_rows=count)
    except ValueError as exc:
        raise MeshFileError(f"{path}: unreadable {what}: {exc}") from None
    if len(rows) != count:
        raise MeshFileError(f"{path}: the header says {count} {what}, the file has {len(rows)}")
    return rows


def read_opencarp(base: str | Path, unit_mm: float = 1e-3) -> RawMesh:
    """openCARP's ``base.pts`` (count, then x y z per node), ``base.elem`` (count, then
    ``Tt n0 n1 n2 n3 tag`` or ``Tr n0 n1 n2 tag``) and, if present, ``base.lon`` (optional
    header 1 or 2, then 3 or 6 numbers per element: fibre, sheet)."""
    base = Path(base)
    stem = base.with_suffix("") if base.suffix in (".pts", ".elem", ".lon") else base
    pts, elem, lon = (stem.with_suffix(s) for s in (".pts", ".elem", ".lon"))
    for p in (pts, elem):
        if not p.is_file():
            raise MeshFileError(f"{p}: no such file (an openCARP mesh is base.pts + base.elem)")
    n, e = _header_count(pts, "nodes"), _header_count(elem, "elements")
    check_size(str(elem), n, e)
    points = _read_table(pts, n, "nodes", usecols=(0, 1, 2)) * unit_mm
    with open(elem, encoding="ascii", errors="replace") as fh:
        fh.readline()
        kinds = {line.split()[0] for line, _ in zip(fh, range(e)) if line.strip()}
    if kinds - {"Tt", "Tr"} or len(kinds) != 1:
        raise MeshFileError(f"{elem}: element types {sorted(kinds)}; only all-triangle (Tr) or "
                            "all-tetrahedron (Tt) meshes can be simulated")
    k = 4 if kinds == {"Tt"} else 3
    table = _read_table(elem, e, "elements", usecols=range(1, k + 2), dtype=np.int64)
    elements, tags = table[:, :k], table[:, k]
    fibres = sheets = None
    if lon.is_file():
        with open(lon, encoding="ascii", errors="replace") as fh:
            head = fh.readline().split()
        skip = 1 if len(head) == 1 else 0
        try:
            f = np.loadtxt(lon, skiprows=skip, ndmin=2, max_rows=e)
        except ValueError as exc:
            raise MeshFileError(f"{lon}: unreadable fibres: {exc}") from None
        if f.shape not in ((e, 3), (e, 6)):
            raise MeshFileError(f"{lon}: {f.shape[0]} rows of {f.shape[1]} numbers; one row of 3 "
                                f"(fibre) or 6 (fibre, sheet) per element is needed ({e} elements)")
        fibres, sheets = f[:, :3], (f[:, 3:] if f.shape[1] == 6 else None)
    return RawMesh(str(stem) + ".elem", points, elements, fibres, sheets, tags)


def write_opencarp(base: str | Path, raw: RawMesh) -> Path:
    """Write ``base.pts`` (µm), ``base.elem`` (with tags, 0 without) and, with fibres,
    ``base.lon`` (header 1 or 2); returns the ``.elem`` path."""
    base = Path(base)
    np.savetxt(base.with_suffix(".pts"), raw.points * 1000.0, fmt="%.6f", header=str(len(raw.points)),
               comments="")
    kind = "Tt" if raw.dim == 3 else "Tr"
    tags = raw.tags if raw.tags is not None else np.zeros(len(raw.elements), np.int64)
    table = np.column_stack([raw.elements, tags]).astype(np.int64)
    np.savetxt(base.with_suffix(".elem"), table, fmt=f"{kind}" + " %d" * table.shape[1],
               header=str(len(table)), comments="")
    if raw.fibres is not None:
        lon = raw.fibres if raw.sheets is None else np.hstack([raw.fibres, raw.sheets])
        np.savetxt(base.with_suffix(".lon"), lon, fmt="%.8f", header="1" if raw.sheets is None else "2",
                   comments="")
    return base.with_suffix(".elem")


def _cell_field(mesh, names, cell_type: str, block: int):
    for name in names:
        if name in mesh.cell_data:
            return name, np.asarray(mesh.cell_data[name][block])
    return None, None


def read_meshio(path: str | Path, unit_mm: float = 1.0) -> RawMesh:
    """Any format meshio reads. Tetrahedra make a volume (boundary triangles and lines are
    ignored); otherwise the triangles make a surface."""
    import meshio

    path = Path(path)
    if not path.is_file():
        raise MeshFileError(f"{path}: no such file")
    try:
        m = meshio.read(path)
    except Exception as exc:     # meshio raises many types for unreadable files
        raise MeshFileError(f"{path}: meshio cannot read it: {exc}") from None
    types = [c.type for c in m.cells]
    kind = "tetra" if "tetra" in types else "triangle" if "triangle" in types else None
    if kind is None:
        raise MeshFileError(f"{path}: no triangles or tetrahedra (cell types {sorted(set(types))})")
    other = set(types) - {"tetra", "triangle", "line", "vertex"}
    if other:
        raise MeshFileError(f"{path}: element types {sorted(other)} cannot be simulated (triangles "
                            "or tetrahedra only)")
    blocks = [i for i, c in enumerate(m.cells) if c.type == kind]
    n_el = sum(len(m.cells[i].data) for i in blocks)
    check_size(str(path), len(m.points), n_el)
    elements = np.concatenate([m.cells[i].data for i in blocks]).astype(np.int64)
    pts = np.zeros((len(m.points), 3))
    pts[:, :m.points.shape[1]] = m.points
    fields = {}
    for key, names in (("fibres", FIBRE_NAMES), ("sheets", SHEET_NAMES), ("tags", TAG_NAMES)):
        parts = [_cell_field(m, names, kind, i)[1] for i in blocks]
        if all(p is not None for p in parts):
            fields[key] = np.concatenate(parts)
    for key in ("fibres", "sheets"):
        if key in fields and fields[key].reshape(n_el, -1).shape[1] != 3:
            raise MeshFileError(f"{path}: cell data '{key}' must have 3 components per element")
        if key in fields:
            fields[key] = fields[key].reshape(n_el, 3).astype(float)
    if "tags" in fields:
        fields["tags"] = fields["tags"].reshape(n_el, -1)[:, 0].astype(np.int64)
    return RawMesh(str(path), pts * unit_mm, elements, **fields)


def read_mesh(path: str | Path, unit_mm: float = 0.0) -> RawMesh:
    """Read and check a mesh file; ``unit_mm`` = 0 takes the format's unit (openCARP µm,
    otherwise mm)."""
    p = Path(path)
    if p.suffix in (".pts", ".elem", ".lon") or (not p.suffix and p.with_suffix(".elem").is_file()):
        raw = read_opencarp(p, unit_mm or 1e-3)
    else:
        raw = read_meshio(p, unit_mm or 1.0)
    return check_mesh(raw)


def _unit_rows(v: np.ndarray, path: str, what: str) -> np.ndarray:
    norm = np.linalg.norm(v, axis=1)
    bad = ~np.isfinite(norm) | (norm < 1e-12)
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise MeshFileError(f"{path}: element {k}: the {what} direction {v[k].tolist()} is not a "
                            "nonzero finite vector")
    return v / norm[:, None]


def signed_measure(points: np.ndarray, elements: np.ndarray) -> np.ndarray:
    """Tetrahedra: signed volumes; triangles: areas (≥ 0)."""
    x = points[elements]
    a, b = x[:, 1] - x[:, 0], x[:, 2] - x[:, 0]
    if elements.shape[1] == 4:
        return np.einsum("ij,ij->i", np.cross(a, b), x[:, 3] - x[:, 0]) / 6.0
    return 0.5 * np.linalg.norm(np.cross(a, b), axis=1)


def element_edges(k: int) -> list[tuple[int, int]]:
    """The local node pairs (a, b), a < b, of an element of ``k`` nodes: its edges, in one order."""
    return [(a, b) for a in range(k) for b in range(a + 1, k)]


def edges_of(elements: np.ndarray) -> np.ndarray:
    """Every element's edges (E·k, 2), sorted within each edge, repeats kept."""
    e = np.concatenate([elements[:, [i, j]] for i, j in element_edges(elements.shape[1])])
    e.sort(axis=1)
    return e


def edge_lengths(points: np.ndarray, elements: np.ndarray) -> np.ndarray:
    """Each element's edge lengths (E, k(k−1)/2), edges in :func:`edges_of`'s order."""
    return np.stack([np.linalg.norm(points[elements[:, j]] - points[elements[:, i]], axis=1)
                     for i, j in element_edges(elements.shape[1])], 1)


def check_mesh(raw: RawMesh) -> RawMesh:
    """Refuse what cannot be simulated; tetrahedra are reoriented if all are inverted, fibres and
    sheets normalised (on surfaces projected onto the element's plane)."""
    path, pts, el = raw.path, raw.points, raw.elements
    if len(el) == 0:
        raise MeshFileError(f"{path}: no elements")
    if not np.all(np.isfinite(pts)):
        k = int(np.flatnonzero(~np.isfinite(pts).all(axis=1))[0])
        raise MeshFileError(f"{path}: node {k} has a non-finite coordinate")
    bad = (el < 0) | (el >= len(pts))
    if bad.any():
        k = int(np.flatnonzero(bad.any(axis=1))[0])
        raise MeshFileError(f"{path}: element {k} names node {int(el[k][bad[k]][0])}, outside "
                            f"0..{len(pts) - 1}")
    srt = np.sort(el, axis=1)
    rep = (srt[:, 1:] == srt[:, :-1]).any(axis=1)
    if rep.any():
        k = int(np.flatnonzero(rep)[0])
        raise MeshFileError(f"{path}: element {k} repeats a node ({el[k].tolist()})")
    used = np.zeros(len(pts), bool)
    used[el.ravel()] = True
    if not used.all():
        k = int(np.flatnonzero(~used)[0])
        raise MeshFileError(f"{path}: node {k} belongs to no element ({int((~used).sum())} such nodes)")
    mean_edge = float(edge_lengths(pts, el).mean())
    meas = signed_measure(pts, el)
    dim = raw.dim
    tiny = np.abs(meas) <= DEGENERATE * mean_edge ** dim
    if tiny.any():
        k = int(np.flatnonzero(tiny)[0])
        raise MeshFileError(f"{path}: element {k} ({el[k].tolist()}) is degenerate "
                            f"({'volume' if dim == 3 else 'area'} {meas[k]:.3g})")
    if dim == 3:
        neg = meas < 0
        if neg.all():
            el = el[:, [0, 2, 1, 3]]
        elif neg.any():
            k = int(np.flatnonzero(neg)[0] if neg.sum() <= (~neg).sum() else np.flatnonzero(~neg)[0])
            raise MeshFileError(f"{path}: element {k} ({el[k].tolist()}) is inverted: its volume has "
                                f"the opposite sign to {max(neg.sum(), (~neg).sum()):,} others")
    else:
        uniq, counts = np.unique(edges_of(el), axis=0, return_counts=True)
        if (counts > 2).any():
            a, b = uniq[np.flatnonzero(counts > 2)[0]]
            owner = int(np.flatnonzero(((el == a) | (el == b)).sum(axis=1) == 2)[0])
            raise MeshFileError(f"{path}: edge {int(a)}-{int(b)} (element {owner}) is shared by "
                                f"{int(counts.max())} triangles: the surface is not a manifold")
    fibres, sheets = raw.fibres, raw.sheets
    for name, v in (("fibre", fibres), ("sheet", sheets)):
        if v is not None and v.shape != (len(el), 3):
            raise MeshFileError(f"{path}: {v.shape[0]} {name} directions for {len(el)} elements")
    if fibres is not None:
        fibres = _unit_rows(fibres, path, "fibre")
        if dim == 2:
            fibres = _unit_rows(_tangential(pts, el, fibres), path, "fibre (in the surface's plane)")
    if sheets is not None:
        sheets = _unit_rows(sheets, path, "sheet")
    tags = None if raw.tags is None else np.asarray(raw.tags, np.int64)
    return RawMesh(path, pts, np.ascontiguousarray(el), fibres, sheets, tags)


def _tangential(pts: np.ndarray, el: np.ndarray, v: np.ndarray) -> np.ndarray:
    x = pts[el]
    n = np.cross(x[:, 1] - x[:, 0], x[:, 2] - x[:, 0])
    n /= np.linalg.norm(n, axis=1, keepdims=True)
    t = v - np.einsum("ij,ij->i", v, n)[:, None] * n
    small = np.linalg.norm(t, axis=1) < 0.1      # a fibre within ~6° of the normal
    return np.where(small[:, None], 0.0, t)


def quality(raw: RawMesh) -> dict[str, float]:
    """Edge lengths (mm), the worst aspect ratio (longest edge over the inradius, scaled to 1
    for the regular element) and the smallest angle (triangles) or dihedral angle (tetrahedra),
    in degrees."""
    pts, el = raw.points, raw.elements
    lengths = edge_lengths(pts, el)
    meas = np.abs(signed_measure(pts, el))
    x = pts[el]
    if raw.dim == 3:
        faces = [(1, 2, 3), (0, 2, 3), (0, 1, 3), (0, 1, 2)]
        normals = [np.cross(x[:, b] - x[:, a], x[:, c] - x[:, a]) for a, b, c in faces]
        area = sum(0.5 * np.linalg.norm(n, axis=1) for n in normals)
        inradius = 3 * meas / area
        aspect = lengths.max(axis=1) / (inradius * 2 * np.sqrt(6))
        unit = []
        for v, (a, _, _), n in zip(range(4), faces, normals):
            n = n / np.linalg.norm(n, axis=1, keepdims=True)
            inward = np.einsum("ij,ij->i", n, x[:, v] - x[:, a]) > 0
            unit.append(np.where(inward[:, None], -n, n))         # outward normals
        # the dihedral angle between faces i and j is pi minus the angle of their outward normals
        cosines = np.stack([np.einsum("ij,ij->i", unit[i], unit[j]) for i in range(4)
                            for j in range(i + 1, 4)], 1)
        angle = 180.0 - np.degrees(np.arccos(np.clip(cosines, -1, 1)))
        key = "min_dihedral_deg"
    else:
        semi = lengths.sum(axis=1) / 2
        inradius = meas / semi
        aspect = lengths.max(axis=1) / (inradius * 2 * np.sqrt(3))
        angles = []
        for i in range(3):
            u, w = x[:, (i + 1) % 3] - x[:, i], x[:, (i + 2) % 3] - x[:, i]
            c = np.einsum("ij,ij->i", u, w) / (np.linalg.norm(u, axis=1) * np.linalg.norm(w, axis=1))
            angles.append(np.degrees(np.arccos(np.clip(c, -1, 1))))
        angle = np.stack(angles, 1)
        key = "min_angle_deg"
    return {"nodes": float(len(pts)), "elements": float(len(el)), "min_edge_mm": float(lengths.min()),
            "max_edge_mm": float(lengths.max()), "mean_edge_mm": float(lengths.mean()),
            "max_aspect_ratio": float(aspect.max()), key: float(angle.min())}
