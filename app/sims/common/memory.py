"""Memory a run will need, estimated from its config before anything is allocated.

Each domain's config module exports ``estimate_memory(cfg, backend) -> MemoryEstimate``: plain
arithmetic over the config (realizations x species x samples, cells x states, ...), counting
the arrays its engines allocate, so that a run that cannot fit is refused in milliseconds with
the estimate and the limit instead of swapping, being killed, or running for minutes first.

Limits: the host's available memory (``MemAvailable`` of ``/proc/meminfo``, else
``sysconf``), the GPU's free memory when the CUDA backend runs, each capped by the
``BIOGPU_MEMORY_LIMIT`` environment variable (bytes, or with a K/M/G/T suffix) where set.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

from app.sims.common.config import ConfigError

#: headroom left to the rest of the process (Python, Qt, the kernels' own buffers)
USABLE_FRACTION = 0.9


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes of host and GPU memory a run needs at its largest, with the main parts named.

    ``parts`` maps a short description (``"states: 67,108,864 realizations x 4,096 species x
    8 B"``) to its bytes; ``key`` is the config key that sets the size most (for the message).
    """

    host: int
    gpu: int = 0
    parts: dict[str, int] = field(default_factory=dict)
    key: tuple = ()


def estimate(parts_host: dict[str, float], parts_gpu: dict[str, float] | None = None,
             key: tuple = (), keys: dict[str, tuple] | None = None) -> MemoryEstimate:
    """A :class:`MemoryEstimate` from named parts (bytes; float, so products never overflow).

    ``key`` is the config key named in a refusal, unless ``keys`` names one for the largest part.
    """
    parts_gpu = parts_gpu or {}
    named = {**{k: int(v) for k, v in parts_host.items()},
             **{f"GPU {k}": int(v) for k, v in parts_gpu.items()}}
    largest = max(named, key=lambda k: named[k]) if named else ""
    key = (keys or {}).get(largest.removeprefix("GPU "), key)
    return MemoryEstimate(int(sum(parts_host.values())), int(sum(parts_gpu.values())), named, key)


def format_bytes(n: float) -> str:
    """1536 -> '1.5 KiB'; binary units up to PiB (and beyond as PiB)."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:,.1f} PiB"


def _limit_from_env() -> int | None:
    return parse_memory_limit(os.environ.get("BIOGPU_MEMORY_LIMIT", ""))


def parse_memory_limit(text: str) -> int | None:
    """Bytes of a ``BIOGPU_MEMORY_LIMIT`` value (None when empty); ConfigError naming the
    setting when it is not a positive size."""
    text = text.strip().upper()
    if not text:
        return None
    body = text[:-1] if text.endswith("B") else text          # 8G, 8GB, 8192
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}.get(body[-1:], 1)
    digits = body[:-1] if body[-1:] in ("K", "M", "G", "T") else body
    try:
        value = float(digits) * scale
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 1):
        raise ConfigError(f"{text!r} is not a memory size (a positive number of bytes, or e.g. 8G)",
                          "environment setting BIOGPU_MEMORY_LIMIT") from None
    return int(value)


def available_host_bytes() -> int | None:
    """Memory the OS can give this process now (``MemAvailable``), or None where unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def free_gpu_bytes() -> int | None:
    """Free memory of the current CUDA context's device, or None where no context is current."""
    try:
        import pycuda.driver as cuda
        free, _total = cuda.mem_get_info()
        return int(free)
    except Exception:               # no pycuda, no context, no driver: nothing to compare with
        return None


def limits(backend: str) -> tuple[int | None, int | None]:
    """(host limit, GPU limit) in bytes for a run on ``backend``; None where unknown."""
    cap = _limit_from_env()
    host = available_host_bytes()
    host = None if host is None else int(host * USABLE_FRACTION)
    gpu = None
    if backend == "cuda":
        gpu = free_gpu_bytes()
        gpu = None if gpu is None else int(gpu * USABLE_FRACTION)
    if cap is not None:
        host = cap if host is None else min(host, cap)
        gpu = cap if gpu is None and backend == "cuda" else (min(gpu, cap) if gpu is not None else None)
    return host, gpu


def check_fits(est: MemoryEstimate, backend: str, what: str = "this run",
               available: tuple[int | None, int | None] | None = None) -> None:
    """Raise :class:`ConfigError` with the estimate, its largest parts and the limit when
    ``est`` does not fit the host (or, on CUDA, the GPU); ``available``: :func:`limits` taken
    once for many checks."""
    host_limit, gpu_limit = available if available is not None else limits(backend)
    for name, need, limit in (("host memory", est.host, host_limit), ("GPU memory", est.gpu, gpu_limit)):
        if limit is None or need <= limit:
            continue
        gpu = name.startswith("GPU")
        parts = sorted(((v, k) for k, v in est.parts.items() if k.startswith("GPU ") == gpu), reverse=True)
        detail = "; ".join(f"{k.removeprefix('GPU ')} = {format_bytes(v)}" for v, k in parts[:3])
        raise ConfigError(f"{what} needs about {format_bytes(need)} of {name} ({detail}); "
                          f"{format_bytes(limit)} is available here", path=est.key)


def describe(est: MemoryEstimate, backend: str) -> str:
    """'about 3.6 GiB of host memory (largest: ...), 18.9 GiB available here': the estimate
    printed before a run starts."""
    host_limit, gpu_limit = limits(backend)
    text = []
    for name, need, limit, gpu in (("host memory", est.host, host_limit, False),
                                   ("GPU memory", est.gpu, gpu_limit, True)):
        if need <= 0 and gpu:
            continue
        parts = [(v, k) for k, v in est.parts.items() if k.startswith("GPU ") == gpu]
        largest = f" (largest: {max(parts)[1].removeprefix('GPU ')})" if parts else ""
        free = f", {format_bytes(limit)} available here" if limit is not None else ""
        text.append(f"about {format_bytes(need)} of {name}{largest}{free}")
    return "; ".join(text)
