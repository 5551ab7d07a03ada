"""Solve small dense linear systems (n up to ~20) for every cell of a tissue, the same
algorithm in NumPy (a batch at once: :func:`solve_batch`, LAPACK's LU with partial pivoting), in
numba (:func:`solve_in_place`, plain loops the compiled engines jit) and in CUDA
(``kernels/common/small_solve.cuh``): Gaussian elimination with partial pivoting, then back
substitution. A singular matrix gives inf or NaN (never an exception), as the step it is in.
"""

from __future__ import annotations

import numpy as np


def solve_batch(m: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """x with m·x = rhs for a batch (..., n, n) and (..., n); inf/NaN rows where m is singular."""
    try:
        return np.linalg.solve(m, rhs[..., None])[..., 0]
    except np.linalg.LinAlgError:
        out = np.full(rhs.shape, np.nan)
        for k in np.ndindex(*rhs.shape[:-1]):
            try:
                out[k] = np.linalg.solve(m[k], rhs[k])
            except np.linalg.LinAlgError:
                pass
        return out


def solve_in_place(m: np.ndarray, x: np.ndarray) -> None:
    """``x`` (n,) becomes the solution of m·x = x; ``m`` (n, n) is overwritten (its LU factors).
    Plain loops, for numba (the caller jits it; keep it free of calls to other functions)."""
    n = m.shape[0]
    for k in range(n):
        pivot, best = k, abs(m[k, k])
        for i in range(k + 1, n):
            if abs(m[i, k]) > best:
                pivot, best = i, abs(m[i, k])
        if pivot != k:
            for j in range(n):
                m[k, j], m[pivot, j] = m[pivot, j], m[k, j]
            x[k], x[pivot] = x[pivot], x[k]
        for i in range(k + 1, n):
            factor = m[i, k] / m[k, k]
            for j in range(k + 1, n):
                m[i, j] -= factor * m[k, j]
            x[i] -= factor * x[k]
    for k in range(n - 1, -1, -1):
        total = x[k]
        for j in range(k + 1, n):
            total -= m[k, j] * x[j]
        x[k] = total / m[k, k]
