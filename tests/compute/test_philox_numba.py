"""The numba Philox twin is bit-identical to the NumPy one (which the CUDA header matches)."""

import numpy as np
import pytest

from app.compute import philox, philox_numba


@pytest.mark.parametrize("seed", [0, 2024, 0x0123456789ABCDEF, 2**64 - 1])
def test_words_bit_identical_to_numpy_twin_on_random_counters(seed):
    rng = np.random.default_rng(seed % 2**32)
    streams = rng.integers(0, 2**64, 4000, dtype=np.uint64, endpoint=False)
    counters = rng.integers(0, 2**64, 4000, dtype=np.uint64, endpoint=False)
    counters[:3] = [0, 2**32 - 1, 2**32]   # carries between the counter's two words
    assert np.array_equal(philox_numba.draw(seed, streams, counters), philox.draw(seed, streams, counters))


def test_unit_float64_matches_numpy_conversion_at_the_ends():
    words = np.array([0, 1, 0x80000000, 0xFFFFFFFF], np.uint32)
    compiled = np.array([philox_numba.unit_float64(w) for w in words])
    assert np.array_equal(compiled, philox.to_unit_float64(words))
    assert 0 < compiled.min() and compiled.max() < 1
