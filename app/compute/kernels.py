"""Kernel loading from ``kernels/`` through PyCUDA ``SourceModule``, cached per thread.

Sources are compiled with ``kernels/common`` on the include path and compile-time sizes as
``-D`` defines. A failed compile raises :class:`KernelCompileError` carrying nvcc's log.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Mapping

KERNEL_DIR = Path(__file__).resolve().parents[2] / "kernels"
COMMON_DIR = KERNEL_DIR / "common"
NVCC_OPTIONS = ("-O3", "-std=c++17")
FAST_MATH = ("--use_fast_math",)

_cache = threading.local()


class KernelCompileError(RuntimeError):
    """nvcc rejected a kernel source; ``log`` holds its output."""

    def __init__(self, name: str, log: str):
        self.name, self.log = name, log
        super().__init__(f"CUDA compile of {name} failed:\n{log}")


def read_kernel(name: str) -> str:
    """Text of ``kernels/<name>`` (e.g. ``'ssa.cu'``)."""
    return (KERNEL_DIR / name).read_text(encoding="utf-8")


def define_flags(defines: Mapping[str, object] | None) -> list[str]:
    return [f"-D{k}={v}" for k, v in sorted((defines or {}).items())]


def load_module(source: str, name: str, defines: Mapping[str, object] | None = None,
                fast_math: bool = True):
    """Compile ``source`` (or return it from this thread's cache) into a PyCUDA module.

    ``fast_math`` trades a few ulp in exp/log/division for speed (right for SSA; off where
    the result is compared at 1e-4, as in the channel fit). Must be called inside
    :func:`app.compute.device.backend_context` in the owning thread.
    """
    from pycuda.compiler import SourceModule
    import pycuda.driver as cuda

    flags = [*define_flags(defines), *(FAST_MATH if fast_math else ())]
    key = hashlib.sha256((source + "\0" + " ".join(flags)).encode()).hexdigest()
    modules = _modules()
    if key not in modules:
        try:
            modules[key] = SourceModule(source, no_extern_c=True, include_dirs=[str(COMMON_DIR)],
                                        options=[*NVCC_OPTIONS, *flags])
        except cuda.CompileError as exc:
            log = "\n".join(s for s in (getattr(exc, "stdout", ""), getattr(exc, "stderr", ""))
                            if s) or str(exc)
            raise KernelCompileError(name, log) from None
    return modules[key]


def _modules() -> dict:
    if not hasattr(_cache, "modules"):
        _cache.modules = {}
    return _cache.modules


def forget_modules() -> None:
    """Drop this thread's modules (their context is about to be popped)."""
    _cache.modules = {}


def nvcc_available() -> bool:
    return shutil.which("nvcc") is not None


def compile_cubin(source: str, name: str, defines: Mapping[str, object] | None = None,
                  arch: str = "sm_90", fast_math: bool = True) -> bytes:
    """Compile with plain ``nvcc -cubin`` (no GPU needed); raise KernelCompileError on failure."""
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / (Path(name).stem + ".cu")
        out = Path(tmp) / "out.cubin"
        src.write_text(source, encoding="utf-8")
        cmd = ["nvcc", f"-arch={arch}", "-cubin", *NVCC_OPTIONS, *(FAST_MATH if fast_math else ()),
               f"-I{COMMON_DIR}",
               *define_flags(defines), "-o", str(out), str(src)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise KernelCompileError(name, proc.stdout + proc.stderr)
        return out.read_bytes()
