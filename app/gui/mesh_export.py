"""Point clouds and triangle meshes with per-point values as legacy VTK PolyData or PLY (for
ParaView, MeshLab, Blender), without extra dependencies; written atomically.

ASCII by default (readable, what the tests read back); ``binary=True`` writes the same
structure in the formats' binary encodings (big-endian VTK, little-endian PLY), which is
what a frame of millions of points needs (ASCII formatting runs at about 1 µs a value).
Integer values stay integers; everything else is written as float32 (PLY) or double (VTK).
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

import numpy as np

from app.sims.common.output import atomic_write_bytes


def _fmt(values: np.ndarray, ints: list[bool] | None = None) -> str:
    """Rows of ``values`` as text; columns flagged in ``ints`` (default: by dtype) as integers."""
    values = np.atleast_2d(values)
    if not values.size:
        return ""
    if ints is None:
        ints = [np.issubdtype(values.dtype, np.integer)] * values.shape[1]
    fmt = " ".join("%d" if i else "%.7g" for i in ints)
    return "\n".join(fmt % tuple(row) for row in values.tolist()) + "\n"


def _columns(values: Mapping[str, np.ndarray], n: int) -> dict[str, np.ndarray]:
    out = {}
    for name, v in values.items():
        v = np.asarray(v)
        if v.shape != (n,):
            raise ValueError(f"value {name!r} has shape {v.shape}, expected ({n},)")
        out[name.replace(" ", "_")] = v.astype(np.int32) if _is_int(v) else v.astype(float)
    return out


def _is_int(v: np.ndarray) -> bool:
    return np.issubdtype(v.dtype, np.integer) or v.dtype == bool


def write_vtk(path: str | Path, positions: np.ndarray, values: Mapping[str, np.ndarray] | None = None,
              faces: np.ndarray | None = None, title: str = "BioGPU Studio", *,
              binary: bool = False) -> Path:
    """Legacy VTK PolyData: POINTS, then POLYGONS (triangles ``faces``) or, for a point cloud
    (no faces), one VERTICES cell per point so viewers draw the points; one POINT_DATA
    scalar per entry of ``values`` (NaN is written as 'nan', which ParaView reads)."""
    pos = np.asarray(positions, float).reshape(-1, 3)
    n = len(pos)
    cols = _columns(values or {}, n)
    faces = np.zeros((0, 3), int) if faces is None else np.asarray(faces, int).reshape(-1, 3)
    title = title.replace("\n", " ")[:250]
    parts: list[bytes] = [f"# vtk DataFile Version 3.0\n{title}\n{'BINARY' if binary else 'ASCII'}\n"
                          f"DATASET POLYDATA\nPOINTS {n} double\n".encode()]

    def block(array: np.ndarray, dtype: str) -> bytes:
        if binary:
            return np.ascontiguousarray(array, dtype=dtype).tobytes() + b"\n"
        return _fmt(array).encode()

    parts.append(block(pos, ">f8"))
    if len(faces):
        parts.append(f"POLYGONS {len(faces)} {4 * len(faces)}\n".encode())
        parts.append(block(np.column_stack([np.full(len(faces), 3), faces]), ">i4"))
    elif n:
        parts.append(f"VERTICES {n} {2 * n}\n".encode())
        parts.append(block(np.column_stack([np.ones(n, int), np.arange(n)]), ">i4"))
    if cols:
        parts.append(f"POINT_DATA {n}\n".encode())
    for name, v in cols.items():
        kind = "int" if v.dtype == np.int32 else "double"
        parts.append(f"SCALARS {name} {kind} 1\nLOOKUP_TABLE default\n".encode())
        parts.append(block(v[:, None], ">i4" if kind == "int" else ">f8"))
    return atomic_write_bytes(path, b"".join(parts))


def write_ply(path: str | Path, positions: np.ndarray, values: Mapping[str, np.ndarray] | None = None,
              faces: np.ndarray | None = None, title: str = "BioGPU Studio", *,
              binary: bool = False) -> Path:
    """PLY: vertices with x, y, z and one property per value (int or float), then faces
    (a point cloud has none: ``element face 0``)."""
    pos = np.asarray(positions, float).reshape(-1, 3)
    n = len(pos)
    cols = _columns(values or {}, n)
    faces = np.zeros((0, 3), int) if faces is None else np.asarray(faces, int).reshape(-1, 3)
    fmt = "binary_little_endian" if binary else "ascii"
    header = ["ply", f"format {fmt} 1.0", f"comment {title.replace(chr(10), ' ')}",
              f"element vertex {n}", "property float x", "property float y", "property float z",
              *[f"property {'int' if v.dtype == np.int32 else 'float'} {name}" for name, v in cols.items()],
              f"element face {len(faces)}", "property list uchar int vertex_indices", "end_header"]
    head = ("\n".join(header) + "\n").encode()
    if binary:
        dtype = np.dtype([("x", "<f4"), ("y", "<f4"), ("z", "<f4"),
                          *[(name, "<i4" if v.dtype == np.int32 else "<f4") for name, v in cols.items()]])
        rec = np.empty(n, dtype)
        rec["x"], rec["y"], rec["z"] = pos[:, 0], pos[:, 1], pos[:, 2]
        for name, v in cols.items():
            rec[name] = v
        body = rec.tobytes()
        if len(faces):
            fdt = np.dtype([("k", "u1"), ("v", "<i4", (3,))])
            frec = np.empty(len(faces), fdt)
            frec["k"], frec["v"] = 3, faces
            body += frec.tobytes()
        return atomic_write_bytes(path, head + body)
    ints = [False] * 3 + [v.dtype == np.int32 for v in cols.values()]
    body = _fmt(np.column_stack([pos, *cols.values()]), ints) if n else ""
    if len(faces):
        body += _fmt(np.column_stack([np.full(len(faces), 3), faces]))
    return atomic_write_bytes(path, head + body.encode())


def read_ply(path: str | Path) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Vertices (n, 3) and their properties from a PLY this module wrote (ASCII or binary)."""
    data = Path(path).read_bytes()
    end = data.index(b"end_header\n") + len(b"end_header\n")
    header = data[:end].decode().splitlines()
    binary = "binary_little_endian" in header[1]
    props: list[tuple[str, str]] = []
    n = 0
    in_vertex = False
    for line in header:
        words = line.split()
        if words[:2] == ["element", "vertex"]:
            n, in_vertex = int(words[2]), True
        elif words[:1] == ["element"]:
            in_vertex = False
        elif words[:1] == ["property"] and in_vertex:
            props.append((words[2], words[1]))
    if binary:
        dtype = np.dtype([(name, "<i4" if kind == "int" else "<f4") for name, kind in props])
        rec = np.frombuffer(data, dtype, count=n, offset=end)
        cols = {name: rec[name].copy() for name, _ in props}
    else:
        rows = data[end:].decode().split("\n")[:n]
        table = np.array([r.split() for r in rows], float).reshape(n, len(props))
        cols = {name: table[:, k].astype(np.int32 if kind == "int" else np.float32)
                for k, (name, kind) in enumerate(props)}
    xyz = np.column_stack([cols.pop("x"), cols.pop("y"), cols.pop("z")]) if n else np.zeros((0, 3))
    return xyz, cols
