"""Kernel loading: sources from ``kernels/``, compiled by NVRTC or nvcc, cached on disk.

Sources are compiled with ``kernels/common`` on the include path and compile-time sizes as
``-D`` defines, for the architecture of the current context's device, and loaded with
``pycuda.driver.module_from_buffer``. Compiled images are kept in the kernel cache
(:mod:`app.compute.kernel_cache`), so a second start compiles nothing, and modules are kept per
thread (their CUDA context is the thread's). A failed compile raises :class:`KernelCompileError`
carrying the compiler's log.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Mapping

from app.compute import compilers, kernel_cache
from app.package_data import data_dir

KERNEL_DIR = data_dir("kernels")
COMMON_DIR = KERNEL_DIR / "common"

log = logging.getLogger(__name__)
_cache = threading.local()


class KernelCompileError(RuntimeError):
    """The compiler rejected a kernel source; ``log`` holds its output."""

    def __init__(self, name: str, log: str):
        self.name, self.log = name, log
        super().__init__(f"CUDA compile of {name} failed:\n{log}")


@dataclass
class CompileStats:
    """What this process compiled and what it found in the cache."""

    compiled: int = 0
    compile_seconds: float = 0.0
    from_cache: int = 0


STATS = CompileStats()
_stats_lock = threading.Lock()


def read_kernel(name: str) -> str:
    """Text of ``kernels/<name>`` (e.g. ``'ssa.cu'``)."""
    return (KERNEL_DIR / name).read_text(encoding="utf-8")


def _headers_text() -> str:
    """The shared headers a source may include: part of every cache key."""
    return "".join(p.name + "\0" + p.read_text(encoding="utf-8") for p in sorted(COMMON_DIR.glob("*.cuh")))


def _options(defines: Mapping[str, object] | None, fast_math: bool,
             include_dirs: tuple[str, ...] = ()) -> compilers.Options:
    return compilers.Options(tuple((str(k), str(v)) for k, v in sorted((defines or {}).items())),
                             (str(COMMON_DIR), *include_dirs), fast_math)


def compile_image(source: str, name: str, defines: Mapping[str, object] | None = None,
                  arch: int = 90, fast_math: bool = True,
                  compiler: compilers.Compiler | None = None,
                  include_dirs: tuple[str, ...] = ()) -> compilers.Image:
    """The compiled image of ``source`` for compute capability ``arch``, from the cache or the
    chosen compiler (which needs no GPU)."""
    if compiler is None:
        compiler, reason = compilers.choose()
        if compiler is None:
            raise KernelCompileError(name, reason)
    options = _options(defines, fast_math, include_dirs)
    try:
        target = compiler.target(arch)
    except compilers.CompileFailed as exc:
        raise KernelCompileError(name, exc.log) from None
    key = kernel_cache.cache_key(source, _headers_text(), options.describe(), f"{target}",
                                 compiler.name, compiler.version)
    image = kernel_cache.load(key)
    if image is not None:
        with _stats_lock:
            STATS.from_cache += 1
        log.debug("%s from the kernel cache", name)
        return image
    start = time.perf_counter()
    try:
        image = compiler.compile(source, name, options, arch)
    except compilers.CompileFailed as exc:
        raise KernelCompileError(name, exc.log) from None
    seconds = time.perf_counter() - start
    with _stats_lock:
        STATS.compiled += 1
        STATS.compile_seconds += seconds
    log.info("compiled %s with %s %s for sm_%d (%s) in %.2f s", name, compiler.name,
             compiler.version, image.arch, image.kind, seconds)
    kernel_cache.store(key, image, f"{name} {compiler.name} {compiler.version} sm_{image.arch}")
    return image


def load_module(source: str, name: str, defines: Mapping[str, object] | None = None,
                fast_math: bool = True):
    """Compile ``source`` (or take it from the caches) into a module of the current context.

    ``fast_math`` trades a few ulp in exp/log/division for speed (right for SSA; off where
    the result is compared at 1e-4, as in the channel fit). Must be called inside
    :func:`app.compute.device.backend_context` in the owning thread.
    """
    import pycuda.driver as cuda

    major, minor = cuda.Context.get_device().compute_capability()
    arch = 10 * major + minor
    memo = (source, tuple(sorted((str(k), str(v)) for k, v in (defines or {}).items())), fast_math, arch)
    modules = _modules()
    if memo not in modules:
        image = compile_image(source, name, defines, arch, fast_math)
        try:
            modules[memo] = cuda.module_from_buffer(image.data)
        except cuda.Error as exc:
            raise KernelCompileError(name, f"the CUDA driver refused the compiled {image.kind} "
                                           f"for sm_{image.arch}: {exc}") from None
    return modules[memo]


def route_pycuda_compiler() -> None:
    """Make PyCUDA's own kernels (``gpuarray.fill``, elementwise and reduction kernels) compile
    through :func:`compile_image` too, so no part of the app needs nvcc and all of it is cached."""
    import pycuda.compiler

    if getattr(pycuda.compiler.compile, "_biogpu", False):
        return

    def compile_for_pycuda(source, nvcc="nvcc", options=None, keep=False, no_extern_c=False,
                           arch=None, code=None, cache_dir=None, include_dirs=None, target="cubin"):
        import pycuda.driver as cuda

        if not no_extern_c:
            source = 'extern "C" {\n%s\n}\n' % source
        opts = list(options or [])
        defines = {}
        for i, flag in enumerate(opts):
            text = flag[2:] if flag.startswith("-D") and len(flag) > 2 else (
                opts[i + 1] if flag == "-D" and i + 1 < len(opts) else None)
            if text:
                key, _, value = text.partition("=")
                defines[key] = value or "1"
        major, minor = cuda.Context.get_device().compute_capability()
        dirs = (*(include_dirs or ()), pycuda.compiler._find_pycuda_include_path())
        return compile_image(source, "pycuda-kernel.cu", defines, 10 * major + minor,
                             fast_math="--use_fast_math" in opts, include_dirs=tuple(dirs)).data

    compile_for_pycuda._biogpu = True  # type: ignore[attr-defined]
    pycuda.compiler.compile = compile_for_pycuda


def _modules() -> dict:
    if not hasattr(_cache, "modules"):
        _cache.modules = {}
    return _cache.modules


def forget_modules() -> None:
    """Drop this thread's modules (their context is about to be popped)."""
    _cache.modules = {}


def compiler_available() -> bool:
    """Whether any CUDA compiler (NVRTC or nvcc) works here."""
    return bool(compilers.available())


def compile_with_every_compiler(source: str, name: str, defines: Mapping[str, object] | None = None,
                                arch: int = 90, fast_math: bool = True) -> dict[str, bytes]:
    """Compile with NVRTC and with nvcc, each where present, bypassing the cache (the CPU tests
    of every kernel and generated variant); {compiler name: image}."""
    out = {}
    for compiler in compilers.available():
        try:
            out[compiler.name] = compiler.compile(source, name, _options(defines, fast_math), arch).data
        except compilers.CompileFailed as exc:
            raise KernelCompileError(f"{name} ({compiler.name})", exc.log) from None
    return out
