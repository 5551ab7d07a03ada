"""The vectorisable exponential of the compiled CPU engines against NumPy's."""

import numpy as np

from app.compute.jit_math import (EXP_FLOOR, EXP_FLOOR_F32, exp_nonpositive_array,
                                   exp_nonpositive_f32_array)


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
