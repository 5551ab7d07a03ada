"""Math for numba-compiled loops that LLVM can vectorise.

numba calls the C library's ``exp`` (one value at a time) unless Intel's SVML is installed,
so a loop with ``math.exp`` stays scalar. :func:`exp_nonpositive` is plain arithmetic
(Cody-Waite reduction, a degree-13 Taylor polynomial on [-ln2/2, ln2/2], the power of two
put into the exponent bits), which vectorises; within 2 ulp of ``math.exp`` (tested).
:func:`log_normal_positive` and :func:`cos_two_pi` (Box-Muller's two functions) are fdlibm's
kernels written the same way (tested against long double).
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from app.compute.jit import CACHE

_LOG2E = 1.4426950408889634
_LN2_HI = 0.6931471803691238          # ln 2 split in two: k·_LN2_HI is exact for |k| < 2**20
_LN2_LO = 1.9082149292705877e-10
EXP_FLOOR = -700.0                     # arguments below give exp(-700) ~ 1e-304, not 0


@intrinsic
def _bits_as_float64(typingctx, bits):
    """The int64 ``bits`` read as a float64 (no conversion)."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())
    return types.float64(types.int64), codegen


@njit(inline="always", cache=CACHE, error_model="numpy")
def exp_nonpositive(a):
    """exp(a) for a <= 0 (a below EXP_FLOOR counts as EXP_FLOOR)."""
    a = max(a, EXP_FLOOR)
    k = np.rint(a * _LOG2E)
    r = (a - k * _LN2_HI) - k * _LN2_LO
    p = 1.0 / 6227020800.0
    p = p * r + 1.0 / 479001600.0
    p = p * r + 1.0 / 39916800.0
    p = p * r + 1.0 / 3628800.0
    p = p * r + 1.0 / 362880.0
    p = p * r + 1.0 / 40320.0
    p = p * r + 1.0 / 5040.0
    p = p * r + 1.0 / 720.0
    p = p * r + 1.0 / 120.0
    p = p * r + 1.0 / 24.0
    p = p * r + 1.0 / 6.0
    p = p * r + 0.5
    p = p * r + 1.0
    p = p * r + 1.0
    return p * _bits_as_float64((np.int64(k) + 1023) << 52)


@intrinsic
def _bits_as_float32(typingctx, bits):
    """The int32 ``bits`` read as a float32 (no conversion)."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.FloatType())
    return types.float32(types.int32), codegen


_F32 = np.float32
EXP_FLOOR_F32 = -87.0                  # exp(-87) ~ 1.6e-38, the smallest normal float32 above


@njit(inline="always", cache=CACHE, error_model="numpy")
def exp_nonpositive_f32(a):
    """exp(a) in float32 for a float32 a <= 0 (a below EXP_FLOOR_F32 counts as it): Cody-Waite
    reduction and a degree-7 Taylor polynomial (truncation < 6e-9, 0.1 ulp), within 2 ulp."""
    a = max(a, _F32(EXP_FLOOR_F32))
    k = np.rint(a * _F32(1.442695))
    r = (a - k * _F32(0.693359375)) - k * _F32(-2.12194440e-4)   # ln 2 = hi + lo, hi·k exact
    p = _F32(1.0 / 5040.0)
    p = p * r + _F32(1.0 / 720.0)
    p = p * r + _F32(1.0 / 120.0)
    p = p * r + _F32(1.0 / 24.0)
    p = p * r + _F32(1.0 / 6.0)
    p = p * r + _F32(0.5)
    p = p * r + _F32(1.0)
    p = p * r + _F32(1.0)
    return p * _bits_as_float32((np.int32(k) + np.int32(127)) << np.int32(23))


@njit(cache=CACHE)
def exp_nonpositive_f32_array(a: np.ndarray) -> np.ndarray:
    """:func:`exp_nonpositive_f32` over a float32 array (the test entry point)."""
    out = np.empty_like(a)
    for i in range(a.shape[0]):
        out[i] = exp_nonpositive_f32(a[i])
    return out


@njit(cache=CACHE)
def exp_nonpositive_array(a: np.ndarray) -> np.ndarray:
    """:func:`exp_nonpositive` over an array (the test entry point)."""
    out = np.empty_like(a)
    for i in range(a.shape[0]):
        out[i] = exp_nonpositive(a[i])
    return out


@intrinsic
def _float64_as_bits(typingctx, value):
    """The float64 ``value``'s bits as an int64 (no conversion)."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(64))
    return types.int64(types.float64), codegen


# fdlibm's log(1+f) and kernel sin/cos coefficients
_LG = (6.666666666666735130e-01, 3.999999999940941908e-01, 2.857142874366239149e-01,
       2.222219843214978396e-01, 1.818357216161805012e-01, 1.531383769920937332e-01,
       1.479819860511658591e-01)
_S1, _S2, _S3 = -1.66666666666666324348e-01, 8.33333333332248946124e-03, -1.98412698298579493134e-04
_S4, _S5, _S6 = 2.75573137070700676789e-06, -2.50507602534068634195e-08, 1.58969099521155010221e-10
_C1, _C2, _C3 = 4.16666666666666019037e-02, -1.38888888888741095749e-03, 2.48015872894767294178e-05
_C4, _C5, _C6 = -2.75573143513906633035e-07, 2.08757232129817482790e-09, -1.13596475577881948265e-11
_MANTISSA = 0x000FFFFFFFFFFFFF
_ONE_BITS = 0x3FF0000000000000
_SQRT2_MANTISSA_FLIP = 0x00095F6400000000    # mantissas above sqrt(2)'s carry into the exponent bit


@njit(forceinline=True, cache=CACHE, error_model="numpy")
def _log_tail(f):
    """fdlibm's log(1 + f) = f - hfsq + s·(hfsq + R): returns hfsq and s·(hfsq + R)."""
    hfsq = 0.5 * f * f
    s = f / (2.0 + f)
    z = s * s
    w = z * z
    t1 = w * (_LG[1] + w * (_LG[3] + w * _LG[5]))
    t2 = z * (_LG[0] + w * (_LG[2] + w * (_LG[4] + w * _LG[6])))
    return hfsq, s * (hfsq + t2 + t1)


@njit(forceinline=True, cache=CACHE, error_model="numpy")
def _split_bits(bits, bias):
    """k (as a float64) and f with 2**k·(1 + f), sqrt(1/2) <= 1 + f < sqrt(2), the float64
    of ``bits`` scaled by 2**(1023 - bias)."""
    k = (bits >> 52) - bias
    mantissa = bits & _MANTISSA
    carry = (mantissa + _SQRT2_MANTISSA_FLIP) & (1 << 52)       # 1.m > sqrt(2): halve, k + 1
    f = _bits_as_float64(mantissa | (carry ^ _ONE_BITS)) - 1.0
    return np.float64(k + (carry >> 52)), f


@njit(forceinline=True, cache=CACHE, error_model="numpy")
def _log_of_split(dk, f):
    """log(2**dk·(1 + f)) (see :func:`_split_bits`)."""
    hfsq, tail = _log_tail(f)
    return dk * _LN2_HI - ((hfsq - (tail + dk * _LN2_LO)) - f)


@njit(inline="always", cache=CACHE, error_model="numpy")
def log_normal_positive(x):
    """log(x) for a positive normal float64 (fdlibm's method, branch-free so loops vectorise;
    within 1 ulp)."""
    dk, f = _split_bits(_float64_as_bits(x), 1023)
    return _log_of_split(dk, f)


@njit(inline="always", cache=CACHE, error_model="numpy")
def cos_two_pi(u):
    """cos(2 pi u) for 0 <= u <= 1: the quarter turn taken exactly (4u - q), then fdlibm's
    kernel sine or cosine on [-pi/4, pi/4]; branch-free, within 2 ulp (1e-18 near zeros)."""
    t = 4.0 * u
    q = np.rint(t)
    x = (t - q) * 1.5707963267948966
    z = x * x
    sine = x + z * x * (_S1 + z * (_S2 + z * (_S3 + z * (_S4 + z * (_S5 + z * _S6)))))
    hz = 0.5 * z
    w = 1.0 - hz
    cosine = w + (((1.0 - w) - hz) + z * z * (_C1 + z * (_C2 + z * (_C3 + z * (_C4 + z * (_C5 + z * _C6))))))
    quarter = np.int64(q) & 3
    value = sine if quarter & 1 else cosine
    return -value if (quarter + 1) & 2 else value


@njit(cache=CACHE)
def log_cos_arrays(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`log_normal_positive` and :func:`cos_two_pi` over an array (the test entry point)."""
    logs, cosines = np.empty_like(a), np.empty_like(a)
    for i in range(a.shape[0]):
        logs[i] = log_normal_positive(a[i])
        cosines[i] = cos_two_pi(a[i])
    return logs, cosines


# ---- the full-domain functions the vectorising printer calls (codegen.SIMD_FUNCTIONS) -----------
# Each is straight-line arithmetic (selects, no branches, no C library call), so a loop over
# cells that calls them is vectorised by LLVM once they are inlined: ``forceinline=True``
# (LLVM's alwaysinline; numba's own inline="always" inlines its IR before typing, and made the
# CRN model compile in 38 s instead of 5.6 s, and ~0.25 s per pow call). Edge cases as the C
# library: overflow to inf, underflow through the subnormals to 0, NaN in gives NaN, log of 0
# is -inf, of a negative number NaN. Accuracy against long double (tests/compute/
# test_jit_math.py): exp 0.96 and log 0.79 ulp, expm1 1.76 ulp, pow 1.24 ulp for |y·log x| up
# to 240 (its log carried in two floats).

_SHIFTER = 6755399441055744.0            # 1.5·2**52: x + it rounds x to an integer in the low bits
_SHIFTER_BITS = 0x4338000000000000
# (e^r - 1 - r)/r² on [-ln2/2, ln2/2] to degree 10, highest first: a Chebyshev fit computed
# with 50 digits (mpmath.chebyfit), near minimax; with float64 coefficients r + r²·q(r) is
# within 0.008 ulp of expm1(r) (the Taylor series needs degree 11 for 0.1 ulp)
_EXPM1_Q = (2.0914679376583935e-09, 2.510520637395701e-08, 2.7557273661348637e-07, 2.7557255425746435e-06,
            2.4801587325533363e-05, 0.00019841269874800493, 0.0013888888888883752, 0.008333333333326141,
            0.04166666666666667, 0.1666666666666667, 0.5)
_TINY_NORMAL = 2.2250738585072014e-308
_TWO_54 = 18014398509481984.0


@njit(forceinline=True, cache=CACHE, error_model="numpy")
def _reduce_exp(x):
    """k (int64) and r with x = k·ln2 + r, |r| <= ln2/2 (rounding to nearest by the shifter,
    so no float-to-int conversion, defined for NaN too)."""
    t = x * _LOG2E + _SHIFTER
    k_float = t - _SHIFTER
    r = (x - k_float * _LN2_HI) - k_float * _LN2_LO
    return r, _float64_as_bits(t) - _SHIFTER_BITS


@njit(forceinline=True, cache=CACHE, error_model="numpy")
def _expm1_small(r):
    """exp(r) - 1 for |r| <= ln2/2: r + r²·q(r), q of degree 10 (:data:`_EXPM1_Q`)."""
    c = _EXPM1_Q
    q = c[0]
    q = q * r + c[1]
    q = q * r + c[2]
    q = q * r + c[3]
    q = q * r + c[4]
    q = q * r + c[5]
    q = q * r + c[6]
    q = q * r + c[7]
    q = q * r + c[8]
    q = q * r + c[9]
    q = q * r + c[10]
    return r + (r * r) * q


@njit(forceinline=True, cache=CACHE, error_model="numpy")
def _two_to(k):
    """2**k as a float64 for an int64 -1022 <= k <= 1023."""
    return _bits_as_float64((k + 1023) << 52)


@njit(forceinline=True, cache=CACHE, error_model="numpy")
def _scaled(value, k):
    """value·2**k for -2044 <= k <= 2046 in two exact-or-once-rounded steps (so a subnormal
    result is rounded once and an overflow gives inf)."""
    half = k >> 1
    return value * _two_to(half) * _two_to(k - half)


@njit(forceinline=True, cache=CACHE, error_model="numpy")
def exp(x):
    """exp(x) in float64 over its whole domain (within 1 ulp)."""
    x = -746.0 if x < -746.0 else x      # exp(-746) rounds to 0, exp(710) overflows; NaN stays
    x = 710.0 if x > 710.0 else x
    r, k = _reduce_exp(x)
    return _scaled(1.0 + _expm1_small(r), k)


@njit(forceinline=True, cache=CACHE, error_model="numpy")
def expm1(x):
    """exp(x) - 1 in float64 over its whole domain (within 2 ulp; exact for |x| < 2**-60)."""
    xc = -40.0 if x < -40.0 else x       # below, exp(x) - 1 rounds to -1
    xc = 710.0 if xc > 710.0 else xc
    r, k = _reduce_exp(xc)
    half = _two_to(k - 1)                # 2^k/2: normal for -58 <= k <= 1024, so no overflow before the end
    value = 2.0 * (half * _expm1_small(r) + (half - 0.5))    # 2^k/2 - 1/2 is exact for -53 <= k <= 54
    return x if abs(x) < 8.673617379884035e-19 else value     # keeps -0.0 and subnormals exact


@njit(forceinline=True, cache=CACHE, error_model="numpy")
def _log_reduce(x):
    """k and f with x = 2**k·(1 + f), sqrt(1/2) <= 1 + f < sqrt(2), for a positive x
    (subnormals scaled up first)."""
    subnormal = x < _TINY_NORMAL
    return _split_bits(_float64_as_bits(x * _TWO_54 if subnormal else x), 1023 + 54 if subnormal else 1023)


@njit(forceinline=True, cache=CACHE, error_model="numpy")
def _log_special(x, value):
    """log's edge cases: NaN for x < 0 or NaN, -inf at 0, inf at inf, else ``value``."""
    value = np.inf if x == np.inf else value
    value = -np.inf if x == 0.0 else value
    return value if x >= 0.0 else np.nan


@njit(forceinline=True, cache=CACHE, error_model="numpy")
def log(x):
    """Natural log in float64 over its whole domain (fdlibm's method; within 1 ulp)."""
    dk, f = _log_reduce(x)
    return _log_special(x, _log_of_split(dk, f))


@intrinsic
def fma(typingctx, a, b, c):
    """a·b + c rounded once (LLVM's fma: one instruction on x86-64 with FMA, vectorised)."""
    def codegen(context, builder, signature, args):
        double = ir.DoubleType()
        callee = builder.module.declare_intrinsic("llvm.fma", [double], ir.FunctionType(double, [double] * 3))
        return builder.call(callee, args)
    return types.float64(types.float64, types.float64, types.float64), codegen


@njit(forceinline=True, cache=CACHE, error_model="numpy")
def _two_sum(a, b):
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


@njit(forceinline=True, cache=CACHE, error_model="numpy")
def pow(x, y):
    """x**y in float64 as the C library's pow: exp(y·log|x|) with log|x| carried in two
    floats (hi + lo, ~2**-56 relative) and y·hi's rounding error fed into exp's reduced
    argument; negative x with an integer y takes the sign of the parity."""
    ax = abs(x)
    dk, f = _log_reduce(ax)
    hfsq, tail = _log_tail(f)
    hi, lo = _two_sum(dk * _LN2_HI, f)                # both exact, their sum rounded once
    hfsq_error = fma(0.5 * f, f, -hfsq)                 # hfsq's rounding error, exactly
    hi, lo2 = _two_sum(hi, -hfsq)
    lo = lo + lo2 + (tail + dk * _LN2_LO + hfsq_error)
    log_hi = hi + lo
    log_lo = lo - (log_hi - hi)
    log_hi = _log_special(ax, log_hi)
    z = y * log_hi
    z_lo = fma(y, log_hi, -z) + y * log_lo             # y·log_hi's rounding error, exactly
    z_lo = z_lo if abs(z) < 709.0 else 0.0             # near and past the limits: inf/0 as exp
    zc = -746.0 if z < -746.0 else z
    zc = 710.0 if zc > 710.0 else zc
    r, k = _reduce_exp(zc)
    value = _scaled(1.0 + _expm1_small(r + z_lo), k)
    is_integer = np.rint(y) == y
    odd = is_integer and np.rint(0.5 * y) != 0.5 * y
    value = -value if odd and _float64_as_bits(x) < 0 else value
    value = np.nan if x < 0.0 and x > -np.inf and not is_integer else value
    value = (np.inf if (ax > 1.0) == (y > 0.0) else 0.0) if abs(y) == np.inf and ax != 1.0 and ax == ax else value
    return 1.0 if y == 0.0 or x == 1.0 or (ax == 1.0 and abs(y) == np.inf) else value


@njit(forceinline=True, cache=CACHE)
def select(condition, if_true, if_false):
    """``where(condition, if_true, if_false)`` of two computed values (a select, no branch)."""
    return if_true if condition else if_false


@njit(forceinline=True, cache=CACHE)
def fmin(a, b):
    """The smaller of a and b, ignoring one NaN (np.fmin)."""
    return a if a < b or b != b else b


@njit(forceinline=True, cache=CACHE)
def fmax(a, b):
    """The larger of a and b, ignoring one NaN (np.fmax)."""
    return a if a > b or b != b else b


@njit(cache=CACHE, error_model="numpy", fastmath={"contract"})
def simd_math_arrays(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """exp(x), expm1(x), log(x), pow(x, y) over arrays, compiled as the engines compile them
    (the test entry point)."""
    n = x.shape[0]
    exps, expm1s, logs, powers = np.empty(n), np.empty(n), np.empty(n), np.empty(n)
    for i in range(n):
        exps[i], expm1s[i], logs[i], powers[i] = exp(x[i]), expm1(x[i]), log(x[i]), pow(x[i], y[i])
    return exps, expm1s, logs, powers
