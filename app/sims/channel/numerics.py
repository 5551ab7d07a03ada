"""Exact propagation of Markov state probabilities under piecewise-constant voltage (NumPy,
float64, batched over individuals): the matrix exponential by scaling and squaring with a
(6, 6) Padé approximant, and the steady state by the GTH algorithm (Grassmann, Taksar &
Heyman 1985). ``kernels/channel.cu`` implements the same algorithms in float32 registers.

Why these choices hold in float32 too: exp(Q t) of a generator is column-stochastic, so its
columns are renormalised to sum 1 after the Padé step and after every squaring; without that
the rounding drift of the total probability doubles with each of the up to ~20 squarings a
stiff model needs (2^20 x 6e-8 is several per cent). GTH uses only sums and products of
non-negative rates, so the steady state keeps full relative accuracy even when the rates
span eight orders of magnitude, where Gaussian elimination on Q loses it.
"""

from __future__ import annotations

from math import factorial

import numpy as np

PADE_DEGREE = 6
PADE = np.array([factorial(2 * PADE_DEGREE - k) * factorial(PADE_DEGREE)
                 / (factorial(2 * PADE_DEGREE) * factorial(k) * factorial(PADE_DEGREE - k))
                 for k in range(PADE_DEGREE + 1)])
SCALE_NORM = 0.5   # scale A until its 1-norm is at most this


def squarings(a: np.ndarray) -> np.ndarray:
    """Number of squarings s per matrix so that ||A / 2^s||_1 <= SCALE_NORM."""
    norm = np.abs(a).sum(axis=-2).max(axis=-1)
    with np.errstate(divide="ignore"):
        s = np.ceil(np.log2(np.maximum(norm, 1e-300) / SCALE_NORM))
    return np.clip(np.nan_to_num(s, nan=0.0), 0, 200).astype(np.int64)


def expm(a: np.ndarray) -> np.ndarray:
    """exp(A) for a batch of square matrices (..., N, N)."""
    s = squarings(a)
    a = a / np.ldexp(1.0, s)[..., None, None]
    n = a.shape[-1]
    eye = np.broadcast_to(np.eye(n), a.shape)
    power = eye
    even = PADE[0] * eye
    odd = np.zeros_like(a)
    for k in range(1, PADE_DEGREE + 1):
        power = power @ a
        if k % 2:
            odd = odd + PADE[k] * power
        else:
            even = even + PADE[k] * power
    e = stochastic(gauss_solve(even - odd, even + odd))
    with np.errstate(over="ignore", invalid="ignore"):
        for it in range(int(s.max(initial=0))):
            todo = it < s
            e[todo] = stochastic(e[todo] @ e[todo])
    return e


def stochastic(e: np.ndarray) -> np.ndarray:
    """Columns rescaled to sum to one (exp(Q t) of a generator Q is column-stochastic)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return e / e.sum(axis=-2, keepdims=True)


def gauss_solve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Solve A X = B for batches (..., N, N) and (..., N, K) or (..., N) by Gaussian
    elimination with partial pivoting; a singular A yields inf/nan rows (never an exception)."""
    vector = b.ndim == a.ndim - 1
    a = np.array(a, dtype=np.float64, copy=True)
    b = np.array(b[..., None] if vector else b, dtype=np.float64, copy=True)
    n = a.shape[-1]
    idx = np.arange(a.shape[0]) if a.ndim == 3 else None
    with np.errstate(all="ignore"):
        for k in range(n):
            pivot = k + np.argmax(np.abs(a[..., k:, k]), axis=-1)
            if idx is not None:
                a[idx, k], a[idx, pivot] = a[idx, pivot].copy(), a[idx, k].copy()
                b[idx, k], b[idx, pivot] = b[idx, pivot].copy(), b[idx, k].copy()
            else:
                p = int(pivot)
                a[[k, p]], b[[k, p]] = a[[p, k]], b[[p, k]]
            for r in range(k + 1, n):
                f = a[..., r, k] / a[..., k, k]
                a[..., r, :] -= f[..., None] * a[..., k, :]
                b[..., r, :] -= f[..., None] * b[..., k, :]
        x = np.zeros_like(b)
        for k in range(n - 1, -1, -1):
            rest = np.einsum("...j,...jm->...m", a[..., k, k + 1:], x[..., k + 1:, :])
            x[..., k, :] = (b[..., k, :] - rest) / a[..., k, k][..., None]
    return x[..., 0] if vector else x


def steady_state(q: np.ndarray) -> np.ndarray:
    """p with Q p = 0 and sum(p) = 1 for generators Q (..., N, N), by GTH state reduction on
    the rates a[i, j] = Q[j, i] (i -> j). A state that cannot be left downwards makes the
    chain reducible; its row comes out inf/nan (the individual then scores as failed)."""
    a = np.swapaxes(q, -1, -2).copy()
    n = a.shape[-1]
    with np.errstate(divide="ignore", invalid="ignore"):
        for k in range(n - 1, 0, -1):
            s = a[..., k, :k].sum(axis=-1)
            a[..., :k, k] /= s[..., None]
            a[..., :k, :k] += a[..., :k, k][..., :, None] * a[..., k, :k][..., None, :]
        p = np.zeros(q.shape[:-1])
        p[..., 0] = 1.0
        for k in range(1, n):
            p[..., k] = (p[..., :k] * a[..., :k, k]).sum(axis=-1)
        return p / p.sum(axis=-1, keepdims=True)


def propagate(e: np.ndarray, p: np.ndarray, n: int) -> np.ndarray:
    """States after 1..n applications of E (pop, N, N) to p (pop, N): (pop, n, N).

    Doubling: with P_1..P_m known and M = E^m, M P_1..M P_m are P_{m+1}..P_{2m}.
    """
    block = (e @ p[:, :, None]).transpose(0, 2, 1)           # rows are states: (pop, m, N)
    power = e
    while block.shape[1] < n:
        block = np.concatenate([block, block @ power.transpose(0, 2, 1)], axis=1)
        power = power @ power
    return block[:, :n]
