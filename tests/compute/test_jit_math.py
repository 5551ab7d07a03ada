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


# ---- the full-domain functions of the vectorising printer (codegen.SIMD_FUNCTIONS) ------------

def _ulp_error(got: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """|got - exact| in float64 ulp of the exact value (80-bit long double), finite values."""
    ulp = np.spacing(np.abs(exact.astype(np.float64))).astype(np.longdouble)
    return np.abs(got.astype(np.longdouble) - exact) / ulp


def test_exp_and_expm1_are_within_one_and_two_ulp_over_their_domain():
    from app.compute.jit_math import simd_math_arrays
    rng = np.random.default_rng(13)
    x = np.concatenate([rng.uniform(-745.0, 709.7, 300_000), rng.uniform(-2.0, 2.0, 200_000),
                        rng.uniform(-1e-6, 1e-6, 20_000), rng.uniform(-745.0, -708.0, 20_000), rng.uniform(709.0, 709.78, 2_000),
                        [-0.5 * np.log(2), 0.5 * np.log(2), np.log(2), 1e-300, -1e-300, 709.78]])
    exps, expm1s, _, _ = simd_math_arrays(x, x)
    wide = x.astype(np.longdouble)
    assert np.max(_ulp_error(exps, np.exp(wide))) <= 1.0
    assert np.max(_ulp_error(expm1s, np.expm1(wide))) <= 2.0


def test_log_is_within_one_ulp_over_positive_floats_subnormals_included():
    from app.compute.jit_math import simd_math_arrays
    rng = np.random.default_rng(14)
    x = np.concatenate([np.exp(rng.uniform(-744.0, 709.0, 300_000)), rng.uniform(0.5, 2.0, 200_000),
                        [5e-324, 1e-310, 2.2250738585072014e-308, np.nextafter(1.0, 2.0), np.nextafter(1.0, 0.0),
                         np.sqrt(2.0), 1.7976931348623157e308]])
    _, _, logs, _ = simd_math_arrays(x, x)
    assert np.max(_ulp_error(logs, np.log(x.astype(np.longdouble)))) <= 1.0


def test_pow_is_within_two_ulp_with_the_sign_of_negative_bases():
    from app.compute.jit_math import simd_math_arrays
    rng = np.random.default_rng(15)
    x = np.exp(rng.uniform(-40.0, 40.0, 400_000))
    y = rng.uniform(-6.0, 6.0, x.size)
    y[:50_000] = np.round(y[:50_000])                   # integer exponents of negative bases
    x[:50_000] *= -1.0
    *_, powers = simd_math_arrays(x, y)
    exact = np.power(x.astype(np.longdouble), y.astype(np.longdouble))
    finite = np.isfinite(exact.astype(np.float64)) & (exact != 0)
    assert np.max(_ulp_error(powers[finite], exact[finite])) <= 2.0


SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, np.inf, -np.inf, np.nan,
                    1e-310, -1e-310, 700.0, -700.0, 710.0, -746.0, 1e300, -1e300])


def test_edge_cases_are_those_of_the_c_library():
    """inf, nan, signed zeros, over- and underflow, log of 0 and of negatives, pow's C99 rules."""
    from app.compute.jit_math import simd_math_arrays
    x, y = (a.ravel() for a in np.meshgrid(SPECIAL, SPECIAL))
    got = simd_math_arrays(x, y)
    with np.errstate(all="ignore"):
        want = (np.exp(x), np.expm1(x), np.log(x), np.power(x, y))
        for name, g, w in zip(("exp", "expm1", "log", "pow"), got, want):
            same = (g == w) | (np.isnan(g) & np.isnan(w)) | (np.abs(g - w) <= 2 * np.spacing(np.abs(w)))
            same &= (np.signbit(g) == np.signbit(w)) | np.isnan(w)
            assert same.all(), (name, x[~same], y[~same], g[~same], w[~same])


def test_a_loop_over_the_functions_is_vectorised():
    """The point of these functions: LLVM turns a loop calling them into SIMD code (a fresh
    compile, since a function loaded from numba's cache has no IR to inspect)."""
    from numba import njit

    from app.compute import jit_math as vm

    @njit(error_model="numpy", fastmath={"contract"})
    def loop(x, out):
        for i in range(x.shape[0]):
            v = x[np.uint64(i)]
            out[np.uint64(i)] = vm.select(v < 1.0, vm.exp(v) + vm.log(v), vm.expm1(v) * vm.pow(v, 0.3))

    x = np.linspace(0.1, 3.0, 64)
    out = np.empty_like(x)
    loop(x, out)
    np.testing.assert_allclose(out, np.where(x < 1, np.exp(x) + np.log(x), np.expm1(x) * x ** 0.3), rtol=1e-15)
    assert " x double>" in loop.inspect_llvm(loop.signatures[0])
