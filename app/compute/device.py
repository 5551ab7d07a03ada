"""Which engines can run here: CUDA device discovery with the reason when there is none."""

from __future__ import annotations

import contextlib
import functools
import threading
from dataclasses import dataclass
from typing import Any, Iterator


@dataclass(frozen=True)
class Device:
    """One place a simulation can run."""

    backend: str          # 'cpu' or 'cuda'
    index: int
    name: str
    detail: str = ""

    @property
    def label(self) -> str:
        return f"CUDA {self.index}: {self.name}" if self.backend == "cuda" else f"CPU ({self.name})"


@dataclass(frozen=True)
class CudaStatus:
    """Whether CUDA works here and, if not, why."""

    available: bool
    reason: str
    devices: tuple[Device, ...] = ()
    compiler: str = ""        # the kernel compiler that will be used, with its version


@functools.lru_cache(maxsize=1)
def cuda_status() -> CudaStatus:
    """Probe pycuda, the driver and a kernel compiler (NVRTC or nvcc) once per process."""
    try:
        import pycuda.driver as cuda
    except ImportError:
        return CudaStatus(False, "pycuda is not installed (install the 'cuda' extra)")
    try:
        cuda.init()
        count = cuda.Device.count()
    except Exception as exc:  # pycuda raises its own LogicError/RuntimeError subclasses
        return CudaStatus(False, f"no working CUDA driver: {exc}")
    if count == 0:
        return CudaStatus(False, "the CUDA driver reports no device")
    from app.compute.compilers import choose

    compiler, compiler_text = choose()
    if compiler is None:
        return CudaStatus(False, compiler_text)
    devices = []
    for i in range(count):
        dev = cuda.Device(i)
        major, minor = dev.compute_capability()
        mem = dev.total_memory() / 2**30
        devices.append(Device("cuda", i, dev.name(),
                              f"sm_{major}{minor}, {mem:.0f} GiB, "
                              f"{dev.get_attribute(cuda.device_attribute.MULTIPROCESSOR_COUNT)} SMs"))
    return CudaStatus(True, f"{count} CUDA device(s)", tuple(devices), compiler_text)


def driver_version() -> str:
    """The CUDA driver's version ('13.0'), or '' without PyCUDA or a driver."""
    try:
        import pycuda.driver as cuda

        cuda.init()
        version = cuda.get_driver_version()
    except Exception:   # no pycuda, no driver: nothing to report
        return ""
    return f"{version // 1000}.{version % 1000 // 10}"


def cpu_device() -> Device:
    import os
    import platform
    return Device("cpu", 0, platform.processor() or platform.machine(),
                  f"{os.cpu_count()} cores, compiled engine (numba); NumPy reference as 'cpu-reference'")


def list_devices() -> list[Device]:
    """Every device, CUDA ones first."""
    return [*cuda_status().devices, cpu_device()]


# What a user may ask for. 'cpu' is the compiled multi-core engine (numba), 'cpu-reference'
# the readable float64 NumPy engine the tests compare against; 'auto' is CUDA, else 'cpu'.
BACKENDS = ("auto", "cpu", "cpu-reference", "cuda")


def resolve_backend(requested: str = "auto", prefer_cpu: str | None = None) -> tuple[str, str]:
    """Map one of :data:`BACKENDS` to the backend that will run, with a reason line.

    ``prefer_cpu``: why this run is faster on the CPU engines than on a GPU (the domain's
    :meth:`~app.sims.common.registry.Domain.cpu_preference`); 'auto' then picks the CPU.
    Raises RuntimeError when 'cuda' is asked for and cannot run.
    """
    if requested not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {requested!r}")
    if requested == "cpu":
        return "cpu", "compiled CPU engine (asked for)"
    if requested == "cpu-reference":
        return "cpu-reference", "NumPy reference engine (asked for)"
    status = cuda_status()
    if status.available and requested == "auto" and prefer_cpu:
        return "cpu", f"compiled CPU engine: {prefer_cpu}"
    if status.available:
        return "cuda", f"CUDA engine on {status.devices[0].name}"
    if requested == "cuda":
        raise RuntimeError(f"CUDA was asked for but cannot run: {status.reason}")
    return "cpu", f"compiled CPU engine: {status.reason}"


_primary_contexts: dict[int, Any] = {}
_primary_lock = threading.Lock()


def _primary_context(device_index: int):
    """The device's primary context, retained once for the life of the process.

    Creating a primary context and destroying it again cost about 0.1 s each on the H100
    (measured: 0.2 s of a 0.44 s SSA run), so runs share one instead of retaining and
    releasing it per run; each run's own GPU objects are still freed when the run ends.
    """
    import pycuda.driver as cuda

    with _primary_lock:
        ctx = _primary_contexts.get(device_index)
        if ctx is None:
            ctx = _primary_contexts[device_index] = cuda.Device(device_index).retain_primary_context()
        return ctx


@contextlib.contextmanager
def backend_context(backend: str, device_index: int = 0) -> Iterator[None]:
    """Push the device's primary context in this thread for the duration (no-op for CPU).

    Every GPU object must be created and freed inside this block, in the same thread.
    """
    if backend != "cuda":
        yield
        return
    import pycuda.driver as cuda

    from app.compute.kernels import route_pycuda_compiler

    route_pycuda_compiler()
    cuda.init()
    ctx = _primary_context(device_index)
    ctx.push()
    try:
        yield
    finally:
        from app.compute.kernels import forget_modules

        forget_modules()
        cuda.Context.synchronize()
        cuda.Context.pop()
