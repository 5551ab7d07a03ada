"""Cardiac exports without extra dependencies: the mesh with per-cell values as legacy-ASCII
VTK PolyData or ASCII PLY (for ParaView), probe traces as CSV, maps as NPZ."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from app.sims.common.output import save_csv, save_text


def sheet_faces(shape: tuple[int, int]) -> np.ndarray:
    """Two triangles per square of a (ny, nx) sheet whose cells are numbered row by row."""
    ny, nx = shape
    i = np.arange(ny - 1)[:, None] * nx + np.arange(nx - 1)[None, :]
    i = i.ravel()
    return np.concatenate([np.stack([i, i + 1, i + nx + 1], 1), np.stack([i, i + nx + 1, i + nx], 1)])


def mesh_faces(mesh) -> np.ndarray:
    if mesh.faces is not None:
        return np.asarray(mesh.faces, int)
    if mesh.shape is not None and min(mesh.shape) > 1:
        return sheet_faces(mesh.shape)
    return np.zeros((0, 3), int)


def _fmt(values: np.ndarray) -> str:
    return "\n".join(" ".join(f"{x:.7g}" for x in row) for row in np.atleast_2d(values)) + "\n"


def write_vtk(path: str | Path, mesh, values: dict[str, np.ndarray]) -> Path:
    """Legacy ASCII VTK PolyData: points, triangles, one POINT_DATA scalar per entry
    (NaN written as -1e30 is avoided: ParaView reads 'nan')."""
    pos, faces = np.asarray(mesh.positions, float), mesh_faces(mesh)
    parts = ["# vtk DataFile Version 3.0\nBioGPU Studio cardiac tissue\nASCII\nDATASET POLYDATA\n",
             f"POINTS {len(pos)} double\n", _fmt(pos)]
    if len(faces):
        parts += [f"POLYGONS {len(faces)} {4 * len(faces)}\n",
                  _fmt(np.column_stack([np.full(len(faces), 3), faces]).astype(int))]
    parts.append(f"POINT_DATA {len(pos)}\n")
    for name, v in values.items():
        parts += [f"SCALARS {name} double 1\nLOOKUP_TABLE default\n",
                  "\n".join(f"{x:.7g}" for x in np.asarray(v, float)) + "\n"]
    return save_text(path, "".join(parts))


def write_ply(path: str | Path, mesh, values: dict[str, np.ndarray]) -> Path:
    """ASCII PLY: vertices with x, y, z and one float property per value, then faces."""
    pos, faces = np.asarray(mesh.positions, float), mesh_faces(mesh)
    names = list(values)
    header = ["ply", "format ascii 1.0", "comment BioGPU Studio cardiac tissue",
              f"element vertex {len(pos)}", "property float x", "property float y", "property float z",
              *[f"property float {n}" for n in names],
              f"element face {len(faces)}", "property list uchar int vertex_indices", "end_header"]
    cols = np.column_stack([pos, *[np.asarray(values[n], float) for n in names]])
    body = _fmt(cols) if len(cols) else ""
    if len(faces):
        body += _fmt(np.column_stack([np.full(len(faces), 3), faces]).astype(int))
    return save_text(path, "\n".join(header) + "\n" + body)


def write_traces_csv(path: str | Path, frame) -> Path:
    idx = np.asarray(frame.probe_index)
    t, v = np.asarray(frame.probe_t), np.asarray(frame.probe_V).reshape(len(frame.probe_t), -1)
    return save_csv(path, ["t_ms", *[f"V_cell_{i}" for i in idx]], [t, *[v[:, k] for k in range(v.shape[1])]])
