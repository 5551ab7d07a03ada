"""Threads of the compiled CPU engines (numba) and the cold-compile measurement the benches report."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator


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


def cold_compile_seconds(warm_up: str) -> float:
    """Seconds a first use takes with an empty on-disk cache: ``warm_up`` ('module:function',
    returning its own seconds) runs in a fresh interpreter with a temporary NUMBA_CACHE_DIR."""
    module, function = warm_up.split(":")
    code = f"from {module} import {function} as w; print(w())"
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                             check=True, cwd=os.getcwd())
    return float(out.stdout.strip().splitlines()[-1])
