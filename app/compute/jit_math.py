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


@njit(inline="always", cache=CACHE, error_model="numpy")
def log_normal_positive(x):
    """log(x) for a positive normal float64 (fdlibm's method, branch-free so loops vectorise;
    within 1 ulp)."""
    bits = _float64_as_bits(x)
    k = (bits >> 52) - 1023
    mantissa = bits & _MANTISSA
    carry = (mantissa + _SQRT2_MANTISSA_FLIP) & (1 << 52)       # 1.m > sqrt(2): halve, k + 1
    f = _bits_as_float64(mantissa | (carry ^ _ONE_BITS)) - 1.0
    dk = np.float64(k + (carry >> 52))
    hfsq = 0.5 * f * f
    s = f / (2.0 + f)
    z = s * s
    w = z * z
    t1 = w * (_LG[1] + w * (_LG[3] + w * _LG[5]))
    t2 = z * (_LG[0] + w * (_LG[2] + w * (_LG[4] + w * _LG[6])))
    return dk * _LN2_HI - ((hfsq - (s * (hfsq + t2 + t1) + dk * _LN2_LO)) - f)


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
