"""Threads of the compiled CPU engines (numba) and the cold-compile measurement the benches report."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path


def max_threads() -> int:
    """Threads numba may use here (NUMBA_NUM_THREADS, default: every core)."""
    import numba
    return int(numba.config.NUMBA_NUM_THREADS)  # type: ignore[attr-defined]


def thread_counts() -> list[int]:
    """1, then powers of two, then every thread: the scaling series of a CPU bench."""
    top = max_threads()
    counts, k = [1], 2
    while k < top:
        counts.append(k)
        k *= 2
    return counts + ([top] if top > 1 else [])


_pool: ThreadPoolExecutor | None = None


def in_threads(run: Callable[[int, int], None], first: int, last: int, pieces_per_thread: int = 1) -> None:
    """``run(a, b)`` on contiguous pieces that split first .. last - 1, on the threads of
    ``numba.get_num_threads()`` (the caller's included): ``pieces_per_thread`` pieces per thread
    (at most one per item), taken in order by whichever thread is free, so a thread on a slower
    or busier core takes fewer. Every piece has finished when this returns or raises.

    For compiled functions that release the GIL (``nogil=True``) and are not numba parfors: a
    plain ``@njit`` compiles several times faster than a ``parallel=True`` one, which matters for
    code generated per model. Each piece is one call, so it allocates its scratch once."""
    global _pool
    import numba
    workers = max(1, min(numba.get_num_threads(), last - first))
    n_pieces = min(last - first, workers * max(1, pieces_per_thread))
    bounds = [first + k * (last - first) // n_pieces for k in range(n_pieces + 1)]
    pieces = iter(range(n_pieces))
    lock = threading.Lock()

    def drain() -> None:
        while True:
            with lock:
                k = next(pieces, None)
            if k is None:
                return
            run(bounds[k], bounds[k + 1])

    futures = []
    if workers > 1:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=max_threads(), thread_name_prefix="compiled-cpu")
        futures = [_pool.submit(drain) for _ in range(workers - 1)]
    try:
        drain()
    finally:
        for future in futures:     # not started (the pool busy elsewhere): every piece is taken
            future.cancel()
        wait(futures)              # no piece may still be writing into the caller's arrays
    for future in futures:
        if not future.cancelled():
            future.result()


def cpu_description() -> str:
    """The CPU a scaling row ran on: model, usable logical CPUs and the physical cores under
    them (hyperthreads share a core's units: 16 threads on 8 cores scale ~8x, not 16x)."""
    usable = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    name, cores = "unknown CPU", set()
    try:
        with open("/proc/cpuinfo") as info:
            fields: dict[str, str] = {}
            for line in list(info) + [""]:
                key, _, value = line.partition(":")
                if line.strip():
                    fields[key.strip()] = value.strip()
                    continue
                name = fields.get("model name", name)
                if int(fields.get("processor", -1)) in usable:
                    cores.add((fields.get("physical id"), fields.get("core id")))
                fields = {}
    except OSError:
        pass
    physical = f"{len(cores)} physical cores" if cores else "physical cores unknown"
    quota = ""
    with contextlib.suppress(OSError, ValueError):
        limit, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()
        quota = "" if limit == "max" else f", a CPU quota of {int(limit) / int(period):g} cores"
    return f"{name}: {len(usable) or os.cpu_count()} usable logical CPUs on {physical}{quota}"


@contextlib.contextmanager
def threads(n: int) -> Iterator[None]:
    """Run the compiled engines on ``n`` threads inside the block."""
    import numba
    before = numba.get_num_threads()
    numba.set_num_threads(n)
    try:
        yield
    finally:
        numba.set_num_threads(before)


def _fresh_interpreter_seconds(warm_up: str, cache: str | None) -> float:
    """Seconds ``warm_up`` ('module:function', returning its own seconds) reports in a fresh
    interpreter, with NUMBA_CACHE_DIR set to ``cache`` (None: numba's default cache)."""
    module, function = warm_up.split(":")
    code = f"from {module} import {function} as w; print(w())"
    env = dict(os.environ)
    if cache is not None:
        env["NUMBA_CACHE_DIR"] = cache
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True, cwd=os.getcwd())
    return float(out.stdout.strip().splitlines()[-1])


def cold_compile_seconds(warm_up: str) -> float:
    """Seconds a first use takes with an empty on-disk cache: ``warm_up`` ('module:function',
    returning its own seconds) runs in a fresh interpreter with a temporary NUMBA_CACHE_DIR."""
    with tempfile.TemporaryDirectory() as cache:
        return _fresh_interpreter_seconds(warm_up, cache)


def compile_seconds(warm_up: str) -> dict[str, float]:
    """First-use seconds of ``warm_up`` in a fresh interpreter: with an empty on-disk cache
    (``cold_seconds``) and loading from numba's cache (``cached_seconds``). The cache is filled
    by one fresh-interpreter run before the timed one, so a machine that never ran the engine
    (an empty cache) does not report a compile as a cache load."""
    cold = cold_compile_seconds(warm_up)
    _fresh_interpreter_seconds(warm_up, None)
    return {"cold_seconds": cold, "cached_seconds": _fresh_interpreter_seconds(warm_up, None)}
