"""Philox4x32-10 counter-based RNG in NumPy, bit-identical to ``kernels/common/philox.cuh``.

Stream convention shared by every engine: the key is the 64-bit ``seed`` split into two
32-bit words; the counter is ``(n_lo, n_hi, stream_lo, stream_hi)`` where ``n`` is the
draw index within the stream and ``stream`` identifies the realization, neuron or cell.
One draw yields four 32-bit words.
"""

from __future__ import annotations

import numpy as np

M0 = np.uint64(0xD2511F53)
M1 = np.uint64(0xCD9E8D57)
W0 = np.uint32(0x9E3779B9)
W1 = np.uint32(0xBB67AE85)
MASK32 = np.uint64(0xFFFFFFFF)
ROUNDS = 10


def philox4x32(counter: np.ndarray, key: np.ndarray, rounds: int = ROUNDS) -> np.ndarray:
    """Apply Philox4x32 to ``counter`` (4, N) with ``key`` (2, N) or (2,); returns (4, N) uint32."""
    c = [np.asarray(counter[i], dtype=np.uint32) for i in range(4)]
    k0 = np.asarray(key[0], dtype=np.uint32).copy()
    k1 = np.asarray(key[1], dtype=np.uint32).copy()
    with np.errstate(over="ignore"):
        for r in range(rounds):
            if r:
                k0 = k0 + W0
                k1 = k1 + W1
            p0 = M0 * c[0].astype(np.uint64)
            p1 = M1 * c[2].astype(np.uint64)
            hi0 = (p0 >> np.uint64(32)).astype(np.uint32)
            lo0 = (p0 & MASK32).astype(np.uint32)
            hi1 = (p1 >> np.uint64(32)).astype(np.uint32)
            lo1 = (p1 & MASK32).astype(np.uint32)
            c = [hi1 ^ c[1] ^ k0, lo1, hi0 ^ c[3] ^ k1, lo0]
    return np.stack(c)


def seed_key(seed: int) -> np.ndarray:
    """The Philox key (2,) for a 64-bit seed."""
    seed = int(seed) & 0xFFFFFFFFFFFFFFFF
    return np.array([seed & 0xFFFFFFFF, seed >> 32], dtype=np.uint32)


def draw(seed: int, stream: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Four uint32 words (4, N) of draw ``n`` in each ``stream`` under ``seed``."""
    stream = np.asarray(stream, dtype=np.uint64)
    n = np.broadcast_to(np.asarray(n, dtype=np.uint64), stream.shape)
    ctr = np.stack([
        (n & MASK32).astype(np.uint32), (n >> np.uint64(32)).astype(np.uint32),
        (stream & MASK32).astype(np.uint32), (stream >> np.uint64(32)).astype(np.uint32),
    ])
    return philox4x32(ctr, seed_key(seed))


def to_unit_float64(words: np.ndarray) -> np.ndarray:
    """uint32 -> float64 in the open interval (0, 1): (x + 0.5) / 2**32."""
    return (words.astype(np.float64) + 0.5) * 2.0**-32


def to_unit_float32(words: np.ndarray) -> np.ndarray:
    """uint32 -> float32 in (0, 1) from the top 23 bits, exactly as ``philox_uniform_f32``.

    23 bits, not 24: (2**24 - 1) + 0.5 is not a float32 and would round the top value to 1.
    """
    return ((words >> np.uint32(9)).astype(np.float32) + np.float32(0.5)) * np.float32(2.0**-23)
