"""Conduction-velocity arrows for the tissue view: which nodes carry one (spread evenly, a few
thousand at most on any mesh) and the line segments that draw them (a shaft and two barbs in
the tissue's tangent plane). No Qt."""

from __future__ import annotations

import numpy as np

MAX_ARROWS = 1000
HEAD = 0.35              # barb length over shaft length
BARB_ANGLE = np.radians(25.0)
SCALE_QUANTILE = 0.9     # speeds above it are drawn at full length


def arrow_nodes(positions: np.ndarray, candidates: np.ndarray,
                max_arrows: int = MAX_ARROWS) -> tuple[np.ndarray, float]:
    """About ``max_arrows`` of ``candidates`` (mesh node indices), one per cell of a uniform grid
    over them (the cell's node nearest its centre), and the grid spacing (mm): arrows that do not
    crowd each other on a sheet, a sphere or a large mesh's surface alike."""
    candidates = np.asarray(candidates, np.int64)
    pts = np.asarray(positions, float)[candidates]
    if len(candidates) <= max_arrows:
        return candidates, _mean_spacing(pts)
    lo, span = pts.min(axis=0), np.ptp(pts, axis=0)
    dims = span > 1e-9 * max(span.max(), 1e-300)
    # a surface spread over the box's faces (3-D) or the sheet's area (2-D): cells ~ measure / h^d
    measure = (span[0] * span[1] + span[1] * span[2] + span[0] * span[2]) if dims.sum() == 3 else np.prod(span[dims])
    d = 2 if dims.sum() >= 2 else 1
    h = (measure / max_arrows) ** (1.0 / d)
    while True:
        key = np.floor((pts - lo) / h).astype(np.int64)
        cells, inverse = np.unique(key, axis=0, return_inverse=True)
        if len(cells) <= max_arrows:
            break
        h *= 1.15
    inverse = inverse.ravel()
    off = np.linalg.norm(pts - (lo + (key + 0.5) * h), axis=1)
    order = np.lexsort((off, inverse))                       # by cell, nearest the centre first
    first = order[np.r_[True, inverse[order][1:] != inverse[order][:-1]]]
    return candidates[np.sort(first)], float(h)


def _mean_spacing(pts: np.ndarray) -> float:
    if len(pts) < 2:
        return 1.0
    span = np.ptp(pts, axis=0)
    dims = span[span > 1e-9 * max(span.max(), 1e-300)]
    return float((np.prod(dims) / len(pts)) ** (1.0 / max(len(dims), 1))) if len(dims) else 1.0


def arrow_segments(origins: np.ndarray, vectors: np.ndarray, normals: np.ndarray,
                   longest: float) -> np.ndarray:
    """(6·M, 3) segment end points (shaft, two barbs) of the M arrows with a finite, non-zero
    vector: length in proportion to the speed, ``longest`` at the SCALE_QUANTILE of the speeds
    and at most that (near a wave's source or collision ∇T → 0 and |∇T|⁻¹ has no bound).
    Barbs lie in the plane of the vector and the surface normal's cross product."""
    v = np.asarray(vectors, float)
    speed = np.linalg.norm(v, axis=1)
    ok = np.isfinite(speed) & (speed > 0)
    if not ok.any():
        return np.zeros((0, 3))
    p, v, n, speed = np.asarray(origins, float)[ok], v[ok], np.asarray(normals, float)[ok], speed[ok]
    top = np.quantile(speed, SCALE_QUANTILE)
    shaft = v * (longest / np.maximum(speed, top))[:, None]
    tip = p + shaft
    side = np.cross(n, shaft)
    side_len = np.linalg.norm(side, axis=1, keepdims=True)
    side = np.where(side_len > 0, side / np.where(side_len > 0, side_len, 1.0), 0.0)
    back = -shaft * HEAD * np.cos(BARB_ANGLE)
    across = side * (np.linalg.norm(shaft, axis=1, keepdims=True) * HEAD * np.sin(BARB_ANGLE))
    segments = np.stack([p, tip, tip, tip + back + across, tip, tip + back - across], axis=1)
    return segments.reshape(-1, 3)


def vertex_normals(positions: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """Unit area-weighted vertex normals of a triangle surface, turned away from its centroid
    (outwards on a closed, roughly convex surface); (0, 0, 1) where undefined."""
    pts = np.asarray(positions, float)
    f = np.asarray(faces, np.int64)
    fn = np.cross(pts[f[:, 1]] - pts[f[:, 0]], pts[f[:, 2]] - pts[f[:, 0]])
    out = np.zeros_like(pts)
    for k in range(3):
        np.add.at(out, f[:, k], fn)
    size = np.linalg.norm(out, axis=1, keepdims=True)
    out = np.where(size > 0, out / np.where(size > 0, size, 1.0), np.array([0.0, 0.0, 1.0]))
    outward = np.einsum("ij,ij->i", out, pts - pts.mean(axis=0))
    return np.where((outward < 0)[:, None], -out, out)
