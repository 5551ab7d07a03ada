"""The Rush-Larsen factor phi1(z) = (e^z - 1)/z of kernels/common/rush_larsen.cuh on the GPU,
against float64 on the host."""

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

SOURCE = """
#include "rush_larsen.cuh"
extern "C" __global__ void phi1_of(const REAL* z, REAL* out, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = phi1(z[i]);
}
"""


def device_phi1(z: np.ndarray) -> np.ndarray:
    import pycuda.driver as cuda

    from app.compute.kernels import load_module

    real = "float" if z.dtype == np.float32 else "double"
    kernel = load_module(SOURCE, "phi1.cu", {"REAL": real}).get_function("phi1_of")
    out = np.empty_like(z)
    kernel(cuda.In(z), cuda.Out(out), np.int32(z.size), block=(256, 1, 1), grid=((z.size + 255) // 256, 1))
    return out


def exact(z: np.ndarray) -> np.ndarray:
    z = z.astype(np.float64)
    safe = np.where(z == 0, 1.0, z)
    return np.where(z == 0, 1.0, np.expm1(safe) / safe)


def test_float_phi1_within_its_error_model(cuda_context):
    """Inside |z| <= 1/2 the polynomial is exact to float rounding (a few ulp of FMA chain);
    outside, the fast exponential's error (2 ulp, plus |z| log2(e) ulp from rounding its
    argument) grows by the cancellation e^z / |e^z - 1| (at most 2.6 there), plus 3 ulp for the
    subtraction and division."""
    rng = np.random.default_rng(7)
    z = np.concatenate([rng.uniform(-0.5, 0.5, 200_000), rng.uniform(-80, 10, 200_000),
                        -np.logspace(-12, 2, 20_000), np.logspace(-12, 1, 20_000),
                        np.nextafter(np.float32([0.5, -0.5]), 0), np.float32([0.5, -0.5, 0.0])]).astype(np.float32)
    got = device_phi1(z).astype(np.float64)
    want = exact(z)
    rel = np.abs(got - want) / want
    ulp = 2.0 ** -23
    ez = np.exp(z.astype(np.float64))
    inside = np.abs(z) <= 0.5
    with np.errstate(divide="ignore", invalid="ignore"):     # z = 0 is inside: its outer bound is unused
        outside = (2 * ulp + np.abs(z) * np.log2(np.e) * ulp) * ez / np.abs(ez - 1) + 3 * ulp
    bound = np.where(inside, 4 * ulp, outside)
    worst = np.argmax(rel / bound)
    assert np.all(rel <= bound), f"phi1({z[worst]!r}) = {got[worst]!r}, want {want[worst]!r} (rel {rel[worst]:.2e})"
    assert got[-1] == 1.0


def test_double_phi1_to_its_series_cut(cuda_context):
    """expm1(z)/z to 2 ulp; below |z| = 1e-5 the series 1 + z/2 leaves out z^2/6."""
    rng = np.random.default_rng(8)
    z = np.concatenate([rng.uniform(-80, 10, 100_000), -np.logspace(-12, 2, 10_000), [0.0]])
    got = device_phi1(z)
    rel = np.abs(got - exact(z)) / exact(z)
    bound = np.where(np.abs(z) < 1e-5, z * z / 6 * 1.01, 0) + 4 * 2.0 ** -52
    assert np.all(rel <= bound)
