"""What the tissue view draws of a large mesh: its surface only (the nodes its triangles use),
and past a face budget a vertex-clustering decimation (Rossignac & Borrel 1993): nodes are
binned on a uniform grid, each bin drawn as one of its nodes, faces that collapse dropped. The
drawn nodes keep their mesh index, so colours are read from, and clicks reported as, the
simulation's nodes. No Qt."""

from __future__ import annotations

import numpy as np

MAX_FACES = 200_000      # drawn triangles: recolouring stays well inside a live-view interval


def decimate_surface(positions: np.ndarray, faces: np.ndarray,
                     max_faces: int = MAX_FACES) -> tuple[np.ndarray, np.ndarray]:
    """The nodes to draw (M,) (mesh indices) and the faces over them (F, 3) (indices into those
    nodes): every face if there are at most ``max_faces``, else a clustered surface of about
    that many."""
    faces = np.asarray(faces, np.int64)
    pts = np.asarray(positions, float)
    if len(faces) > max_faces:
        used = np.unique(faces)
        lo, hi = pts[used].min(axis=0), pts[used].max(axis=0)
        span = np.maximum(hi - lo, 1e-12)
        cells = max_faces / 2.0                        # a closed surface: about 2 faces per vertex
        area = span[0] * span[1] + span[1] * span[2] + span[0] * span[2]
        h = np.sqrt(2.0 * area / cells)                # bins a surface crosses ~ its area / h²
        key = np.floor((pts[used] - lo) / h).astype(np.int64)
        _, first, cluster = np.unique(key, axis=0, return_index=True, return_inverse=True)
        rep = np.zeros(len(pts), np.int64)
        rep[used] = used[first][cluster.ravel()]
        faces = rep[faces]
        keep = (faces[:, 0] != faces[:, 1]) & (faces[:, 1] != faces[:, 2]) & (faces[:, 0] != faces[:, 2])
        faces = faces[keep]
        faces = faces[np.unique(np.sort(faces, axis=1), axis=0, return_index=True)[1]]
    nodes, local = np.unique(faces, return_inverse=True)
    return nodes, local.reshape(-1, 3).astype(np.uint32)
