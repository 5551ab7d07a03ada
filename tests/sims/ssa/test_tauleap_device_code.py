"""The device tau-leaping code of ``kernels/ssa.cu`` (float32 Poisson sampler, pooled Philox
words, the leap loop) built for the host with a C++ compiler and a small shim of the CUDA
qualifiers, so its statistics are checked on machines without a GPU. The fast intrinsics become
their libm twins and ``float4`` a plain struct here; the ``gpu`` tests in test_cuda_tauleap.py
check the device build."""

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from app.compute.kernels import COMMON_DIR, read_kernel
from app.sims.ssa.codegen import model_block
from app.sims.ssa.cuda import INVERSION_BELOW

from .helpers import assert_law, assert_poisson_streams, poisson_pmf
from .test_tauleap import IMMIGRATION_DEATH, load_config, parse_yaml

CXX = shutil.which("g++") or shutil.which("clang++")
pytestmark = pytest.mark.skipif(CXX is None, reason="no host C++ compiler")

SHIM = """
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
using std::max; using std::min;
#define __device__
#define __forceinline__ inline
#define __constant__ static
#define __restrict__
#define __global__
#define __align__(n) __attribute__((aligned(n)))
struct float4 { float x, y, z, w; };
#define __logf logf
#define __expf expf
static inline uint32_t __umulhi(uint32_t a, uint32_t b) { return (uint32_t)(((uint64_t)a * b) >> 32); }
static inline float __fdividef(float a, float b) { return a / b; }
static inline float __uint_as_float(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline float __int_as_float(int32_t i) { float f; memcpy(&f, &i, 4); return f; }
static inline int32_t __float_as_int(float f) { int32_t i; memcpy(&i, &f, 4); return i; }
struct host_dim3 { unsigned x; };
static host_dim3 blockIdx = {0}, blockDim = {1}, threadIdx = {0};
#define SSA_COUNT_LIMIT 1073741824
"""

MAIN = """
int main(int argc, char** argv) {
    if (argv[1][0] == 'p') {           // p threads per lam: Poisson samples, per in turn per stream
        const int threads = atoi(argv[2]), per = atoi(argv[3]);
        int* out = (int*)malloc(sizeof(int) * threads * per);
        for (unsigned r = 0; r < (unsigned)threads; ++r) {
            threadIdx.x = r;
            ssa_poisson_draws(out, threads, per, (float)atof(argv[4]), 11ull);
        }
        for (int i = 0; i < threads * per; ++i) printf("%d\\n", out[i]);
        return 0;
    }
    // l R eps t rate...: R realizations of the network leaped from x0 to t
    const int R = atoi(argv[2]);
    const float eps = (float)atof(argv[3]);
    const double t_end = atof(argv[4]);
    float rate[SSA_NR];
    for (int j = 0; j < SSA_NR; ++j) rate[j] = (float)atof(argv[5 + j]);
    for (int r = 0; r < R; ++r) {
        int x[SSA_NS] = {0};
        float a[SSA_NR];
        unsigned long long n = 0;
        int bad = 0;
        for (int k = 1; k <= 4; ++k) {
            ssa_init(rate, x, a);
            ssa_tau_run(x, a, rate, t_end * (k - 1) / 4, t_end * k / 4, eps, 5ull, (unsigned long long)r, &n, &bad);
            if (bad) return 3;
        }
        printf("%d\\n", x[0]);
    }
    return 0;
}
"""


@pytest.fixture(scope="module")
def program(tmp_path_factory) -> Path:
    """The host build for the immigration-death network (X starts at 0)."""
    net = load_config(parse_yaml(IMMIGRATION_DEATH % 0.03)).network()
    kernel = read_kernel("ssa.cu")
    tau = kernel[kernel.index("#if SSA_TAU"):kernel.index("#if SSA_NE > 0")]
    philox = (COMMON_DIR / "philox.cuh").read_text().replace('#include "portable.cuh"', "")
    source = SHIM + philox + model_block(net, [0], "tau-leap") + "\n" + tau + MAIN
    folder = tmp_path_factory.mktemp("tau-host")
    (folder / "tau.cpp").write_text(source)
    subprocess.run([CXX, "-O2", f"-DSSA_INVERSION_BELOW={INVERSION_BELOW!r}f", "-o", str(folder / "tau"),
                    str(folder / "tau.cpp")], check=True, capture_output=True, text=True)
    return folder / "tau"


def run(program: Path, *args) -> np.ndarray:
    out = subprocess.run([str(program), *map(str, args)], check=True, capture_output=True, text=True).stdout
    return np.array(out.split(), np.int64)


@pytest.mark.parametrize("lam", [0.7, 6.5, 25.0, 42.0, 75.0, 1234.5])
def test_host_built_sampler_follows_the_law(program, lam):
    """2^16 draws, 8 in turn per stream (pooled words), against the exact pmf of the float32
    mean, and successive draws of a stream uncorrelated (the float64 PTRS past 2^16 is the CPU
    engines' sampler, tested in test_tauleap.py)."""
    threads, per = 1 << 13, 8
    samples = run(program, "p", threads, per, lam)
    assert_poisson_streams(samples, lam, threads, per)


def test_host_built_leaps_converge_to_the_exact_law(program):
    """Immigration-death (k = 1000, g = 0.1) from 0 to t = 5 is Poisson(k/g (1 - e^{-g t}));
    the device leap loop at eps = 0.003 gives it (assert_law)."""
    exact = 1000.0 / 0.1 * (1 - np.exp(-0.1 * 5.0))
    final = run(program, "l", 4000, 0.003, 5.0, 1000.0, 0.1)
    assert_law(final, poisson_pmf(exact, int(exact + 12 * np.sqrt(exact))))
