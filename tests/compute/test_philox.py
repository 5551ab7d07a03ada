import numpy as np
import pytest

from app.compute import philox

# Random123 kat_vectors for philox4x32_10: (counter, key, expected)
KAT = [
    ([0, 0, 0, 0], [0, 0], [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]),
    ([0xFFFFFFFF] * 4, [0xFFFFFFFF] * 2, [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]),
    ([0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344], [0xA4093822, 0x299F31D0],
     [0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1]),
]


@pytest.mark.parametrize("counter,key,expected", KAT)
def test_known_answers(counter, key, expected):
    out = philox.philox4x32(np.array(counter, np.uint32)[:, None], np.array(key, np.uint32))
    assert out[:, 0].tolist() == expected


def test_draw_layout_matches_counter_convention():
    seed, stream, n = 0x0123456789ABCDEF, 0xFEDCBA9876543210, 0x1122334455667788
    direct = philox.philox4x32(
        np.array([n & 0xFFFFFFFF, n >> 32, stream & 0xFFFFFFFF, stream >> 32], np.uint32)[:, None],
        np.array([seed & 0xFFFFFFFF, seed >> 32], np.uint32))
    assert np.array_equal(philox.draw(seed, np.array([stream], np.uint64), n), direct)


def test_streams_differ_and_are_uniform():
    words = philox.draw(1, np.arange(20000, dtype=np.uint64), 0)
    u = philox.to_unit_float64(words[0])
    assert 0 < u.min() and u.max() < 1
    # mean of 20000 uniforms: SE = sqrt(1/12/20000) = 0.002
    assert abs(u.mean() - 0.5) < 5 * 0.002
    assert len(np.unique(words[0])) > 19990


def test_float32_uniform_stays_inside_open_interval():
    words = np.array([0, 0xFFFFFFFF, 0x80000000], np.uint32)
    u = philox.to_unit_float32(words)
    assert u.dtype == np.float32
    assert u[0] == np.float32(0.5 * 2**-23)
    assert u[1] == np.float32(1 - 0.5 * 2**-23) and u[1] < 1.0
    assert u[2] == np.float32(0.5 + 0.5 * 2**-23)
