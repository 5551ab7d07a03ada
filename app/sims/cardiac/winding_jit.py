"""The compiled pre-pass of :func:`app.sims.cardiac.readouts.singularities`: which triangles can
hold a phase singularity. Around a triangle whose three points (V(t) − v_mid, V(t−τ) − v_mid)
lie inside one open quadrant of the phase plane the phase differences stay below π/2, so its
winding is 0 whatever the rounding; only the others (few: along the isolines V = v_mid) are
counted."""

from __future__ import annotations

import numpy as np
from numba import njit

from app.compute.jit import CACHE

ON_AN_AXIS = 4          # a point on a quadrant's edge: its triangles are always counted


@njit(cache=CACHE)
def _mixed(code, triangles, out):
    n = 0
    for t in range(triangles.shape[0]):
        c = code[triangles[t, 0]]
        if c < ON_AN_AXIS and c == code[triangles[t, 1]] and c == code[triangles[t, 2]]:
            continue
        out[n] = t
        n += 1
    return n


def quadrants(v_now: np.ndarray, v_before: np.ndarray, v_mid: float) -> np.ndarray:
    """Each node's quadrant of the phase plane (0–3), or :data:`ON_AN_AXIS` and more where a
    coordinate is exactly 0."""
    a = np.asarray(v_now, np.float64) - v_mid
    b = np.asarray(v_before, np.float64) - v_mid
    return ((a > 0).view(np.uint8) | ((b > 0).view(np.uint8) << 1)
            | (((a == 0) | (b == 0)).view(np.uint8) << 2))


def candidates(v_now: np.ndarray, v_before: np.ndarray, v_mid: float, triangles: np.ndarray) -> np.ndarray:
    """Indices of the triangles whose points do not all lie inside one open quadrant."""
    out = np.empty(len(triangles), np.int64)
    return out[:_mixed(quadrants(v_now, v_before, v_mid), triangles, out)]
