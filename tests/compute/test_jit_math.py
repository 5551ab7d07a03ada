"""The vectorisable exponential, log and cosine of the compiled CPU engines against NumPy."""

import numpy as np

from app.compute.jit_math import (EXP_FLOOR, EXP_FLOOR_F32, exp_nonpositive_array,
                                   exp_nonpositive_f32_array, log_cos_arrays)


def test_exp_nonpositive_is_within_two_ulp_of_numpy():
    rng = np.random.default_rng(3)
    a = np.concatenate([-rng.random(200_000) * 700.0, -rng.random(100_000) * 2.0,
                        [0.0, -0.0, -1e-300, -0.5 * np.log(2), 0.5 * np.log(2) * -3, EXP_FLOOR]])
    got, want = exp_nonpositive_array(a), np.exp(a)
    ulp = np.spacing(want)
    assert np.all(np.abs(got - want) <= 2 * ulp), np.max(np.abs(got - want) / ulp)
    assert exp_nonpositive_array(np.array([0.0]))[0] == 1.0


def test_below_the_floor_it_stays_tiny_and_positive():
    got = exp_nonpositive_array(np.array([-800.0, -1e300, -np.inf]))
    assert np.all(got == np.exp(EXP_FLOOR))


def test_log_and_cosine_are_within_one_and_two_ulp_of_extended_precision():
    """Box-Muller's log and cos(2 pi u), on its float32-grid uniforms and on any float64 in
    (0, 1], against 80-bit long double results rounded to float64 (the cosine's angle u pi/2
    is rounded once, hence 2 ulp; near the cosine's zeros
    the long double angle itself is off by up to 3e-19, hence the absolute 1e-18)."""
    rng = np.random.default_rng(5)
    grid = ((rng.integers(0, 2**32, 200_000, dtype=np.uint64) >> np.uint64(9)) + 0.5) * 2.0**-23
    u = np.concatenate([grid, rng.random(100_000), [2.0**-24, 0.125, 0.25, 0.5, 0.75, 1.0,
                                                     np.sqrt(0.5), np.nextafter(1.0, 0.0)]])
    logs, cosines = log_cos_arrays(u)
    wide = u.astype(np.longdouble)
    two_pi = 2 * np.arccos(np.longdouble(-1.0))
    for got, want, ulps in ((logs, np.log(wide), 1), (cosines, np.cos(two_pi * wide), 2)):
        want = want.astype(np.float64)
        ulp = np.spacing(np.maximum(np.abs(want), 1e-300))
        assert np.all(np.abs(got - want) <= ulps * ulp + 1e-18), np.max(np.abs(got - want) / ulp)
    assert log_cos_arrays(np.array([1.0]))[0][0] == 0.0
    assert list(log_cos_arrays(np.array([0.0, 0.5]))[1]) == [1.0, -1.0]


def test_the_float32_exponential_is_within_two_float32_ulp_of_the_exact_value():
    rng = np.random.default_rng(4)
    a = np.concatenate([-rng.random(200_000) * 87.0, -rng.random(100_000) * 2.0,
                        [0.0, -0.0, -1e-30, -0.5 * np.log(2), 0.5 * np.log(2) * -3,
                         EXP_FLOOR_F32]]).astype(np.float32)
    got, exact = exp_nonpositive_f32_array(a), np.exp(a.astype(np.float64))
    ulp = np.spacing(exact.astype(np.float32)).astype(np.float64)
    assert got.dtype == np.float32
    assert np.all(np.abs(got - exact) <= 2 * ulp), np.max(np.abs(got - exact) / ulp)
    assert exp_nonpositive_f32_array(np.zeros(1, np.float32))[0] == 1.0
    below = exp_nonpositive_f32_array(np.array([-100.0, -1e30, -np.inf], np.float32))
    assert np.all(below == np.float32(np.exp(EXP_FLOOR_F32)))
