"""kernels/cardiac.cu compiled for the host with g++ over a stand-in for CUDA's intrinsics: the
threads of a launch run one after another (``threadIdx``/``blockIdx`` are plain globals the
wrappers set), so kernels whose threads do not wait on each other run as on the device."""

import ctypes
import hashlib
import re
import subprocess

from app.compute.kernels import COMMON_DIR

PRELUDE = """
#include <cmath>
#include <cstring>
#include <cstdint>
#include <cfloat>
using std::exp; using std::log; using std::sqrt; using std::pow; using std::fabs; using std::expm1;
using std::fmin; using std::fmax; using std::isnan; using std::isfinite; using std::floor; using std::fmaxf;
#define __device__
#define __global__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __constant__ static
#define __shared__ static
#define __restrict__
#define __launch_bounds__(...)
struct Dim { unsigned x, y, z; };
static Dim threadIdx = {0, 0, 0}, blockIdx = {0, 0, 0}, blockDim = {32, 1, 1};   // one warp's worth
struct float2 { float x, y; };
struct double2 { double x, y; };
template <class T> static inline T __ldg(const T* p) { return *p; }
#define __expf(x) std::exp((float)(x))
static inline void __syncthreads() {}
template <class T> static inline T __shfl_down_sync(unsigned, T v, int) { return v; }
static inline int __reduce_min_sync(unsigned, int v) { return v; }
static inline int __reduce_max_sync(unsigned, int v) { return v; }
static inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
static inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
static inline int atomicCAS(int* p, int cmp, int v) { const int old = *p; if (old == cmp) *p = v; return old; }
static inline unsigned long long atomicMax(unsigned long long* p, unsigned long long v)
{ const unsigned long long old = *p; if (v > old) *p = v; return old; }
"""


def compile_for_host(src: str, defines: dict, wrapper: str, tmp_path) -> ctypes.CDLL:
    """The filled kernel text, the PTX loads of reload() as plain loads, with ``wrapper`` (the
    host's entry points) appended, as a shared library."""
    src = re.sub(r'asm volatile\("ld\.global\.f(32|64) %0, \[%1\];" : "=[fd]"\(v\) : "l"\(p\)\);', "v = *p;", src)
    assert "asm" not in src
    flags = [f"-D{k}={v}" for k, v in defines.items()]
    text = PRELUDE + src + wrapper
    # a name of its own per variant: the loader hands out a library it has open by its path
    stem = "kernel-" + hashlib.sha1((text + " ".join(flags)).encode()).hexdigest()[:16]
    cpp, lib = tmp_path / f"{stem}.cpp", tmp_path / f"{stem}.so"
    cpp.write_text(text)
    subprocess.run(["g++", "-O1", "-std=c++17", "-shared", "-fPIC", "-ffp-contract=off", "-w", f"-I{COMMON_DIR}",
                    *flags, "-o", str(lib), str(cpp)], check=True, capture_output=True, text=True)
    return ctypes.CDLL(str(lib))
