"""Cardiac exports without extra dependencies: the mesh with per-cell values as legacy-ASCII
VTK PolyData or ASCII PLY (for ParaView; writers shared in :mod:`app.gui.mesh_export`), probe
traces as CSV, maps as NPZ."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from app.gui import mesh_export
from app.sims.common.output import save_csv


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


def write_vtk(path: str | Path, mesh, values: dict[str, np.ndarray]) -> Path:
    """Legacy ASCII VTK PolyData: points, triangles, one POINT_DATA scalar per entry."""
    return mesh_export.write_vtk(path, mesh.positions, values, mesh_faces(mesh), "BioGPU Studio cardiac tissue")


def write_ply(path: str | Path, mesh, values: dict[str, np.ndarray]) -> Path:
    """ASCII PLY: vertices with x, y, z and one float property per value, then faces."""
    return mesh_export.write_ply(path, mesh.positions, values, mesh_faces(mesh), "BioGPU Studio cardiac tissue")


def write_traces_csv(path: str | Path, frame) -> Path:
    idx = np.asarray(frame.probe_index)
    t, v = np.asarray(frame.probe_t), np.asarray(frame.probe_V).reshape(len(frame.probe_t), -1)
    return save_csv(path, ["t_ms", *[f"V_cell_{i}" for i in idx]], [t, *[v[:, k] for k in range(v.shape[1])]])
