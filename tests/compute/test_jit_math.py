"""The vectorisable exponential of the compiled CPU engines against NumPy's."""

import numpy as np

from app.compute.jit_math import EXP_FLOOR, exp_nonpositive_array


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
