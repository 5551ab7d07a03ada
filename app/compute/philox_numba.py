"""Philox4x32-10 for numba-compiled engines, bit-identical to :mod:`app.compute.philox`.

Same stream convention: key = the 64-bit seed split into two 32-bit words; counter =
``(n_lo, n_hi, stream_lo, stream_hi)``. Call these from ``@njit`` code; they also run as
plain Python (slowly), which the tests use only through the compiled entry point.
"""

from __future__ import annotations

import numpy as np
from numba import njit, uint32, uint64

from app.compute.jit import CACHE

_M0 = 0xD2511F53
_M1 = 0xCD9E8D57
_W0 = 0x9E3779B9
_W1 = 0xBB67AE85
_MASK = 0xFFFFFFFF


@njit(inline="always", cache=CACHE)
def philox_words(key_lo, key_hi, n, stream):
    """Four uint32 words of draw ``n`` (uint64) in ``stream`` (uint64) under key (lo, hi)."""
    mask = uint64(_MASK)
    c0 = uint64(n) & mask
    c1 = uint64(n) >> uint64(32)
    c2 = uint64(stream) & mask
    c3 = uint64(stream) >> uint64(32)
    k0 = uint64(key_lo)
    k1 = uint64(key_hi)
    for r in range(10):
        if r:
            k0 = (k0 + uint64(_W0)) & mask
            k1 = (k1 + uint64(_W1)) & mask
        p0 = uint64(_M0) * c0
        p1 = uint64(_M1) * c2
        hi0 = p0 >> uint64(32)
        lo0 = p0 & mask
        hi1 = p1 >> uint64(32)
        lo1 = p1 & mask
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
    return uint32(c0), uint32(c1), uint32(c2), uint32(c3)


@njit(inline="always", cache=CACHE)
def unit_float64(word):
    """uint32 -> float64 in (0, 1): (x + 0.5) / 2**32, as ``philox.to_unit_float64``."""
    return (np.float64(word) + 0.5) * 2.3283064365386963e-10


@njit(cache=CACHE)
def draw_block(key_lo, key_hi, streams, counters):
    """(4, N) uint32 words for arrays of streams and counters (the test entry point)."""
    out = np.empty((4, streams.shape[0]), np.uint32)
    for i in range(streams.shape[0]):
        w0, w1, w2, w3 = philox_words(key_lo, key_hi, counters[i], streams[i])
        out[0, i], out[1, i], out[2, i], out[3, i] = w0, w1, w2, w3
    return out


def draw(seed: int, stream: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Same contract as :func:`app.compute.philox.draw`, computed by the compiled twin."""
    seed = int(seed) & 0xFFFFFFFFFFFFFFFF
    stream = np.ascontiguousarray(stream, dtype=np.uint64)
    n = np.ascontiguousarray(np.broadcast_to(np.asarray(n, dtype=np.uint64), stream.shape))
    return draw_block(np.uint64(seed & _MASK), np.uint64(seed >> 32), stream.ravel(), n.ravel())
