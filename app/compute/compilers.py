"""The two CUDA compilers: NVRTC (a library, what most installs use) and nvcc (the toolkit's).

NVRTC comes from the ``nvidia-cuda-nvrtc`` wheel of the ``cuda`` extra or from a system
toolkit; nvcc from ``PATH``. ``BIOGPU_COMPILER=nvrtc|nvcc`` picks one; by default NVRTC is
used where it is found, else nvcc. Both compile a source to a cubin for the device's
architecture, or to PTX for the newest architecture they know when the device is newer (the
driver then finishes the job). Neither needs a GPU.
"""

from __future__ import annotations

import ctypes
import functools
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path


class CompileFailed(RuntimeError):
    """The compiler rejected the source; ``log`` holds its output."""

    def __init__(self, log: str):
        self.log = log
        super().__init__(log)


@dataclass(frozen=True)
class Image:
    """A compiled module: cubin (``kind='cubin'``) or PTX text (``kind='ptx'``)."""

    data: bytes
    kind: str
    arch: int


@dataclass(frozen=True)
class Options:
    """What both compilers are told (each spells it its own way)."""

    defines: tuple[tuple[str, str], ...] = ()
    include_dirs: tuple[str, ...] = ()
    fast_math: bool = True
    std: str = "c++17"

    def describe(self) -> str:
        """A stable text of the options (part of the kernel-cache key)."""
        defs = " ".join(f"-D{k}={v}" for k, v in self.defines)
        return f"{defs} fast_math={self.fast_math} std={self.std}"


class Compiler:
    """A CUDA C++ compiler: ``name``, ``version`` and :meth:`compile`."""

    name: str
    version: str
    location: str

    def supported_archs(self) -> tuple[int, ...]:
        raise NotImplementedError

    def target(self, arch: int) -> tuple[int, str]:
        """(architecture, 'cubin' or 'ptx') to build for a device of compute capability ``arch``."""
        archs = self.supported_archs()
        if arch in archs:
            return arch, "cubin"
        older = [a for a in archs if a <= arch]
        if not older:
            raise CompileFailed(f"{self.name} {self.version} cannot build for sm_{arch} "
                                f"(it knows {', '.join(f'sm_{a}' for a in archs)})")
        return max(older), "ptx"          # the driver JIT-compiles PTX for the newer device

    def compile(self, source: str, name: str, options: Options, arch: int) -> Image:
        raise NotImplementedError

    def describe(self) -> str:
        return f"{self.name} {self.version} ({self.location})"


# ---- NVRTC ----------------------------------------------------------------------------------------
def nvrtc_candidates() -> list[str]:
    """Where libnvrtc may be: an explicit path, the pip wheel, a toolkit, the loader's path."""
    out = []
    if os.environ.get("BIOGPU_NVRTC"):
        out.append(os.environ["BIOGPU_NVRTC"])
    for base in sys.path:
        for sub in ("nvidia/cu13/lib", "nvidia/cuda_nvrtc/lib", "nvidia/cu12/lib"):
            out += sorted(glob.glob(os.path.join(base, sub, "libnvrtc.so.*[0-9]")))
    for root in filter(None, (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda")):
        out += sorted(glob.glob(os.path.join(root, "lib64", "libnvrtc.so*")))
    out += ["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"]
    return [p for p in out if "builtins" not in p and "alt" not in Path(p).name]


class Nvrtc(Compiler):
    """NVRTC through ctypes (no toolkit needed)."""

    name = "nvrtc"

    def __init__(self, lib: ctypes.CDLL, location: str):
        self.lib, self.location = lib, location
        major, minor = ctypes.c_int(), ctypes.c_int()
        self._check(lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
        self.version = f"{major.value}.{minor.value}"

    @classmethod
    def load(cls) -> "Nvrtc | None":
        for path in nvrtc_candidates():
            try:
                return cls(ctypes.CDLL(path), path)
            except OSError:
                continue
        return None

    def _check(self, status: int, what: str) -> None:
        if status != 0:
            self.lib.nvrtcGetErrorString.restype = ctypes.c_char_p
            raise CompileFailed(f"{what}: {self.lib.nvrtcGetErrorString(status).decode()}")

    @functools.lru_cache(maxsize=1)
    def supported_archs(self) -> tuple[int, ...]:
        n = ctypes.c_int()
        self._check(self.lib.nvrtcGetNumSupportedArchs(ctypes.byref(n)), "nvrtcGetNumSupportedArchs")
        archs = (ctypes.c_int * n.value)()
        self._check(self.lib.nvrtcGetSupportedArchs(archs), "nvrtcGetSupportedArchs")
        return tuple(archs)

    def compile(self, source: str, name: str, options: Options, arch: int) -> Image:
        target, kind = self.target(arch)
        prefix = "sm" if kind == "cubin" else "compute"
        flags = [f"--gpu-architecture={prefix}_{target}", f"--std={options.std}",
                 *(f"--include-path={d}" for d in options.include_dirs),
                 *(f"-D{k}={v}" for k, v in options.defines),
                 *(["--use_fast_math"] if options.fast_math else [])]
        lib, prog = self.lib, ctypes.c_void_p()
        self._check(lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), name.encode(),
                                           0, None, None), "nvrtcCreateProgram")
        try:
            argv = (ctypes.c_char_p * len(flags))(*(f.encode() for f in flags))
            status = lib.nvrtcCompileProgram(prog, len(flags), argv)
            size = ctypes.c_size_t()
            lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
            log = ctypes.create_string_buffer(size.value)
            lib.nvrtcGetProgramLog(prog, log)
            if status != 0:
                raise CompileFailed(log.value.decode(errors="replace"))
            get_size, get = ((lib.nvrtcGetCUBINSize, lib.nvrtcGetCUBIN) if kind == "cubin"
                             else (lib.nvrtcGetPTXSize, lib.nvrtcGetPTX))
            self._check(get_size(prog, ctypes.byref(size)), "image size")
            image = ctypes.create_string_buffer(size.value)
            self._check(get(prog, image), "image")
            return Image(image.raw, kind, target)
        finally:
            lib.nvrtcDestroyProgram(ctypes.byref(prog))


# ---- nvcc -----------------------------------------------------------------------------------------
class Nvcc(Compiler):
    """The toolkit's nvcc, run as a process."""

    name = "nvcc"

    def __init__(self, path: str):
        self.location = path
        text = subprocess.run([path, "--version"], capture_output=True, text=True).stdout
        found = re.search(r"release (\d+\.\d+)", text)
        self.version = found.group(1) if found else "unknown"

    @classmethod
    def load(cls) -> "Nvcc | None":
        path = shutil.which("nvcc")
        return cls(path) if path else None

    @functools.lru_cache(maxsize=1)
    def supported_archs(self) -> tuple[int, ...]:
        proc = subprocess.run([self.location, "--list-gpu-arch"], capture_output=True, text=True)
        archs = tuple(int(m) for m in re.findall(r"compute_(\d+)", proc.stdout))
        return archs or (90,)

    def compile(self, source: str, name: str, options: Options, arch: int) -> Image:
        target, kind = self.target(arch)
        with tempfile.TemporaryDirectory() as tmp:
            src = Path(tmp) / (Path(name).stem + ".cu")
            out = Path(tmp) / f"out.{kind}"
            src.write_text(source, encoding="utf-8")
            arch_flag = f"-arch=sm_{target}" if kind == "cubin" else f"-arch=compute_{target}"
            cmd = [self.location, arch_flag, f"-{kind}", "-O3", f"-std={options.std}",
                   *(["--use_fast_math"] if options.fast_math else []),
                   *(f"-I{d}" for d in options.include_dirs),
                   *(f"-D{k}={v}" for k, v in options.defines), "-o", str(out), str(src)]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                raise CompileFailed(proc.stdout + proc.stderr)
            return Image(out.read_bytes(), kind, target)


# ---- choosing -------------------------------------------------------------------------------------
CHOICES = ("auto", "nvrtc", "nvcc")


@functools.lru_cache(maxsize=None)
def find(name: str) -> Compiler | None:
    """The compiler called ``name`` if it works here, else None."""
    return Nvrtc.load() if name == "nvrtc" else Nvcc.load() if name == "nvcc" else None


def available() -> list[Compiler]:
    """Every compiler that works here, NVRTC first."""
    return [c for c in (find("nvrtc"), find("nvcc")) if c is not None]


def choose(preference: str | None = None) -> tuple[Compiler | None, str]:
    """The compiler to use and why: ``preference`` or ``BIOGPU_COMPILER`` (auto|nvrtc|nvcc)."""
    preference = (preference or os.environ.get("BIOGPU_COMPILER") or "auto").lower()
    if preference not in CHOICES:
        return None, f"BIOGPU_COMPILER must be one of {', '.join(CHOICES)}, not {preference!r}"
    if preference != "auto":
        found = find(preference)
        if found is None:
            return None, (f"{preference} was asked for (BIOGPU_COMPILER) but is not found: "
                          + ("install the 'cuda' extra (nvidia-cuda-nvrtc)" if preference == "nvrtc"
                             else "nvcc is not on PATH"))
        return found, f"{found.describe()} (asked for)"
    for compiler in available():
        return compiler, compiler.describe()
    return None, ("no CUDA compiler: install the 'cuda' extra (it brings NVRTC), "
                  "or put a CUDA toolkit's nvcc on PATH")
