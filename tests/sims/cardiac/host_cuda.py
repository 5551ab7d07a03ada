"""kernels/cardiac.cu compiled for the host with g++ over a stand-in for CUDA's intrinsics: the
threads of a launch run one after another (``threadIdx``/``blockIdx`` are plain globals the
wrappers set), so kernels whose threads do not wait on each other run as on the device; and
pycuda's driver and arrays as stand-ins in host memory (:func:`install_host_pycuda`), so that
``CudaTissue`` itself runs on those kernels."""

import ctypes
import hashlib
import re
import subprocess
import sys
from types import SimpleNamespace

import numpy as np

from app.compute.kernels import COMMON_DIR
from app.sims.cardiac import cuda as cuda_engine

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
static inline float host_half_bits_to_float(unsigned short h)     // IEEE half bits to float, exactly
{
    const int e = (h >> 10) & 31, m = h & 1023;
    const float mag = e == 0 ? std::ldexp((float)m, -24) : e == 31 ? (m ? NAN : INFINITY)
                                                                   : std::ldexp((float)(m | 1024), e - 25);
    return (h & 0x8000) ? -mag : mag;
}
#define half_bits_to_float host_half_bits_to_float
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
    src = src.replace('asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));', "f = host_half_bits_to_float(h);")
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


# Each kernel the CUDA engine launches (fixed steps: the one-stage step or the split step's),
# thread by thread (its threads do not wait on each other), and the constants' addresses.
ENGINE_WRAPPER = """
#define THREADS(call) for (unsigned b_ = 0; b_ < (unsigned)blocks; ++b_) for (unsigned t_ = 0; t_ < (unsigned)threads; ++t_) \\
    { blockIdx.x = b_; threadIdx.x = t_; blockDim.x = threads; call; }
#if SPLIT
extern "C" void host_cell_substeps(int blocks, int threads, real* YA, const unsigned* mask, real* maps, double* cd,
    int* ci, const real* pfield, int first, int n_sub, int observe_step, double t, double t_prev)
{ THREADS(cell_substeps(YA, mask, maps, cd, ci, pfield, first, n_sub, observe_step, t, t_prev)) }
extern "C" void host_rkc_stage(int blocks, int threads, const real* u1, const real* u2, real* out, const nbr_t* nbr,
    const weight_t* w, real* maps, double* cd, int* ci, double mu, double nu, double mu_t_h, int observe_step,
    double t, double t_prev)
{ THREADS(rkc_stage(u1, u2, out, nbr, w, maps, cd, ci, mu, nu, mu_t_h, observe_step, t, t_prev)) }
extern "C" void host_stage_cell_substeps(int blocks, int threads, real* YA, const unsigned* mask, const real* pfield,
    const real* u1, const real* u2, const nbr_t* nbr, const weight_t* w, int* ci, double mu, double nu,
    double mu_t_h, int first, int n_sub)
{ THREADS(stage_cell_substeps(YA, mask, pfield, u1, u2, nbr, w, ci, mu, nu, mu_t_h, first, n_sub)) }
#else
extern "C" void host_stage0(int blocks, int threads, STAGE_ARGS) { THREADS(stage_body<0>(STAGE_PASS)) }
#endif   // (fixed steps: the split step's kernels or the stage's)
extern "C" void host_record(int blocks, int threads, const real* Y, const int* probes, double* rec_t, double* rec_v,
    const int* ci, double t, int slot)
{ THREADS(record(Y, probes, rec_t, rec_v, ci, t, slot)) }
extern "C" void host_to_file_order(int blocks, int threads, const real* v, const int* position, real* out)
{ THREADS(to_file_order(v, position, out)) }
extern "C" void host_observe_final(int blocks, int threads, const real* YA, const real* YB, real* maps,
    const double* cd, const int* ci)
{ THREADS(observe_final(YA, YB, maps, cd, ci)) }
extern "C" void* global_ptr(int which)
{
    if (which == 0) return (void*)c_params;
    if (which == 1) return (void*)c_stim;
    if (which == 2) return (void*)c_solver;
#if MODEL_TABLES
    return (void*)&c_lut;
#else
    return nullptr;
#endif
}
extern "C" unsigned long global_size(int which)
{
    if (which == 0) return sizeof(c_params);
    if (which == 1) return sizeof(c_stim);
    if (which == 2) return sizeof(c_solver);
    return sizeof(void*);
}
"""
GLOBALS = ("c_params", "c_stim", "c_solver", "c_lut")


class Pointer(int):
    def free(self) -> None:
        pass


class HostArray:
    """A pycuda GPUArray in host memory: ``gpudata`` is its address."""

    def __init__(self, values: np.ndarray):
        self.a = values
        self.gpudata = Pointer(values.ctypes.data)
        self.dtype, self.nbytes = values.dtype, values.nbytes

    def get(self) -> np.ndarray:
        return self.a.copy()

    def set(self, values) -> None:
        self.a[...] = np.asarray(values, self.dtype).reshape(self.a.shape)

    def __getitem__(self, index) -> "HostArray":
        return HostArray(self.a[index])


class HostKernel:
    def __init__(self, dll: ctypes.CDLL, name: str):
        self.dll, self.name, self.fmt = dll, name, ""

    def prepare(self, fmt: str) -> None:
        self.fmt = fmt

    def prepared_async_call(self, grid, block, stream, *args) -> None:
        kinds = {"P": lambda a: ctypes.c_void_p(int(a)), "i": ctypes.c_int, "d": ctypes.c_double}
        assert len(args) == len(self.fmt), self.name
        converted = [kinds[f](a) for f, a in zip(self.fmt, args)]
        getattr(self.dll, f"host_{self.name}")(ctypes.c_int(grid[0]), ctypes.c_int(block[0]), *converted)


class HostPackedLaunch:
    """:class:`app.compute.launch.PackedLaunch` on a :class:`HostKernel`: the arguments kept,
    the patched ones replaced per launch."""

    def __init__(self, func, fmt, grid, block, stream, args, patch=None, name=""):
        self.func, self.grid, self.block, self.stream, self.args = func, grid, block, stream, list(args)
        func.prepare(fmt)

    def __call__(self, **values: int) -> None:
        for index, value in values.items():
            self.args[int(index[1:])] = value
        self.func.prepared_async_call(self.grid, self.block, self.stream, *self.args)


class HostModule:
    def __init__(self, dll: ctypes.CDLL):
        self.dll = dll
        dll.global_ptr.restype, dll.global_size.restype = ctypes.c_void_p, ctypes.c_ulong

    def get_function(self, name: str) -> HostKernel:
        return HostKernel(self.dll, name)

    def get_global(self, name: str):
        which = GLOBALS.index(name)
        return Pointer(self.dll.global_ptr(which)), int(self.dll.global_size(which))


def _copy(dst, src, size, *_stream) -> None:
    ctypes.memmove(int(dst), int(src), int(size))


def install_host_pycuda(monkeypatch, tmp_path) -> None:
    """pycuda's driver and gpuarray as host stand-ins, and the CUDA engine's ``load_module``
    compiling with g++ (its launches: :class:`HostKernel`, :class:`HostPackedLaunch`)."""
    driver = SimpleNamespace(Stream=lambda: SimpleNamespace(synchronize=lambda: None, wait_for_event=lambda e: None),
                             Event=lambda: SimpleNamespace(record=lambda stream: None),
                             memcpy_htod=lambda dst, src: _copy(dst, np.ascontiguousarray(src).ctypes.data,
                                                                np.ascontiguousarray(src).nbytes),
                             memcpy_dtoh_async=lambda dst, src, stream: _copy(dst.ctypes.data, src, dst.nbytes),
                             memcpy_dtod=_copy, memcpy_dtod_async=_copy, pagelocked_empty=np.empty)
    gpuarray = SimpleNamespace(to_gpu=lambda a: HostArray(np.array(a)),
                               zeros=lambda n, dtype: HostArray(np.zeros(n, dtype)),
                               empty=lambda n, dtype: HostArray(np.empty(n, dtype)))
    package = SimpleNamespace(driver=driver, gpuarray=gpuarray)
    for name, module in (("pycuda", package), ("pycuda.driver", driver), ("pycuda.gpuarray", gpuarray)):
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(cuda_engine, "load_module",
                        lambda src, name, defines: HostModule(compile_for_host(src, defines, ENGINE_WRAPPER, tmp_path)))
    monkeypatch.setattr(cuda_engine, "PackedLaunch", HostPackedLaunch)


def assert_same_run(cuda, cpu, atol: float = 1e-11) -> None:
    """The CUDA engine's run against the NumPy engine's, to float64 roundings: probe times and V,
    end states, first and last activation times (never-activated nodes in both)."""
    (ct, cv), (nt, nv) = cuda.recordings(), cpu.recordings()
    np.testing.assert_allclose(ct, nt, rtol=0, atol=1e-12)
    np.testing.assert_allclose(cv, nv, rtol=0, atol=atol)
    np.testing.assert_allclose(cuda.states(), cpu.states(), rtol=0, atol=atol)
    np.testing.assert_allclose(cuda.voltage(), cpu.voltage(), rtol=0, atol=atol)
    got, ref = cuda.activation(), cpu.activation()
    for key in ("activation_time", "activation_last"):
        np.testing.assert_allclose(got[key], ref[key], rtol=0, atol=atol)
    np.testing.assert_array_equal(cuda.activation_time(), got["activation_time"])
    np.testing.assert_allclose(got["apd90"], ref["apd90"], rtol=0, atol=2 * atol)
