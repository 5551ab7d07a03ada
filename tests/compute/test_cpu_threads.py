"""The thread split of the compiled CPU engines (in_threads) and the CPU description of benches."""

import threading
import time

import numba
import pytest

from app.compute.cpu_threads import cpu_description, in_threads, threads


def test_in_threads_runs_contiguous_pieces_concurrently_and_covers_the_range_once():
    n = min(3, numba.config.NUMBA_NUM_THREADS)
    together = threading.Barrier(n, timeout=30)      # passes only with n pieces running at once
    calls = []

    def run(a: int, b: int) -> None:
        calls.append((a, b))
        if len(calls) <= n:
            together.wait()

    with threads(n):
        in_threads(run, 5, 105, pieces_per_thread=3)
        pieces = sorted(calls)
        assert len(pieces) == 3 * n and pieces[0][0] == 5 and pieces[-1][1] == 105
        assert all(x[1] == y[0] for x, y in zip(pieces, pieces[1:]))      # no gap, no overlap
        calls.clear()
        in_threads(lambda a, b: calls.append((a, b)), 0, 2, pieces_per_thread=8)
        assert sorted(calls) == [(0, 1), (1, 2)]                           # at most one per item


def test_in_threads_leaves_no_piece_running_when_it_raises():
    started, finished = [], []

    def run(a: int, b: int) -> None:
        started.append(a)
        if a == 0:
            raise ValueError("first piece failed")
        time.sleep(0.05)
        finished.append(a)

    with threads(min(2, numba.config.NUMBA_NUM_THREADS)):
        with pytest.raises(ValueError, match="first piece"):
            in_threads(run, 0, 10, pieces_per_thread=2)
    assert len(finished) == len(started) - 1


def test_cpu_description_names_the_cpus():
    assert "usable logical CPUs" in cpu_description()


def test_in_threads_does_not_wait_for_a_pool_busy_with_another_caller():
    """A second caller whose pool tasks are queued behind a long one runs its pieces itself."""
    n = numba.config.NUMBA_NUM_THREADS
    if n < 2:
        pytest.skip("one thread: no pool")
    release = threading.Event()
    with threads(n):
        first = threading.Thread(target=in_threads, args=(lambda a, b: release.wait(30), 0, n))
        first.start()
        time.sleep(0.2)                       # the pool's threads now wait inside the first call
        done = []
        start = time.perf_counter()
        in_threads(lambda a, b: done.append((a, b)), 0, 10)
        assert time.perf_counter() - start < 5 and sorted(done)[-1][1] == 10
        release.set()
        first.join()


def test_compile_seconds_reports_a_cache_load_even_on_a_machine_that_never_ran_the_engine(tmp_path, monkeypatch):
    """On an empty default cache the 'cached' figure must still be a load, not a compile."""
    from app.compute.cpu_threads import compile_seconds

    body = "".join(f"        s += np.sin(i * {k}.0) ** {k % 5} / (1.0 + np.exp(-s * {k}.0))\n" for k in range(60))
    (tmp_path / "tiny_jit_module.py").write_text(
        "import time\nimport numba\nimport numpy as np\n\n\n@numba.njit(cache=True)\ndef f(x):\n"
        "    s = 0.0\n    for i in range(x):\n" + body + "    return s\n\n\n"
        "def warm_up():\n    t = time.perf_counter()\n    f(10)\n    return time.perf_counter() - t\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    seconds = compile_seconds("tiny_jit_module:warm_up")
    assert list((tmp_path / "__pycache__").glob("tiny_jit_module.f-*.nbi"))      # the default cache
    assert seconds["cached_seconds"] < 0.5 * seconds["cold_seconds"], seconds
