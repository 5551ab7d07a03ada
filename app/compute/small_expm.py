"""exp of small dense matrices (n up to ~20) for every cell of a tissue, the same algorithm in
NumPy (a batch at once: :func:`expm_taylor`), in numba (:func:`expm_in_place`, plain loops the
compiled engines jit) and in CUDA (``kernels/common/small_expm.cuh``): scaling by 2^-s until
the ∞-norm is at most :data:`THETA`, the Taylor polynomial of degree :data:`TAYLOR_DEGREE` by
Horner's rule, then s squarings. The truncation error of the scaled exponential is below
θ^11/11!·e^θ ≈ 2e-11 relative (SciPy's ``expm``, a Padé approximant, is the tests' reference).
"""

from __future__ import annotations

import numpy as np

THETA = 0.5               # ‖X‖∞ after scaling
TAYLOR_DEGREE = 10
MAX_SQUARINGS = 60        # a NaN or inf norm stops the scaling here (the result is then NaN)


def squarings(norm: float) -> int:
    """s with norm·2^-s ≤ THETA (at most MAX_SQUARINGS; 0 for NaN)."""
    s = 0
    while norm > THETA and s < MAX_SQUARINGS:
        norm *= 0.5
        s += 1
    return s


def expm_taylor(x: np.ndarray) -> np.ndarray:
    """exp(x) for a batch (..., m, m) of small matrices (one s for all: the largest any needs;
    a larger s than a matrix needs changes its result by rounding only)."""
    with np.errstate(all="ignore"):
        norm = float(np.max(np.abs(x).sum(axis=-1), initial=0.0))
        s = squarings(norm)
        scaled = x * (0.5 ** s)
        eye = np.eye(x.shape[-1], dtype=x.dtype)
        out = eye + scaled / TAYLOR_DEGREE
        for k in range(TAYLOR_DEGREE - 1, 0, -1):
            out = eye + (scaled @ out) / k
        for _ in range(s):
            out = out @ out
    return out


def expm_in_place(m: np.ndarray, work: np.ndarray, power: np.ndarray) -> None:
    """``m`` (size, size) becomes exp(m); ``work`` and ``power`` are scratch of its shape.
    Plain loops, for numba (the caller jits it; keep it free of calls to other functions)."""
    size = m.shape[0]
    norm = 0.0
    for i in range(size):
        row = 0.0
        for j in range(size):
            row += abs(m[i, j])
        norm = max(norm, row)
    s = 0
    while norm > THETA and s < MAX_SQUARINGS:
        norm *= 0.5
        s += 1
    scale = 0.5 ** s
    for i in range(size):
        for j in range(size):
            m[i, j] *= scale
            power[i, j] = m[i, j] / TAYLOR_DEGREE + (1.0 if i == j else 0.0)
    for k in range(TAYLOR_DEGREE - 1, 0, -1):
        for i in range(size):
            for j in range(size):
                total = 0.0
                for q in range(size):
                    total += m[i, q] * power[q, j]
                work[i, j] = total
        for i in range(size):
            for j in range(size):
                power[i, j] = work[i, j] / k + (1.0 if i == j else 0.0)
    for _ in range(s):
        for i in range(size):
            for j in range(size):
                total = 0.0
                for q in range(size):
                    total += power[i, q] * power[q, j]
                work[i, j] = total
        for i in range(size):
            for j in range(size):
                power[i, j] = work[i, j]
    for i in range(size):
        for j in range(size):
            m[i, j] = power[i, j]
