"""The thread split of the compiled CPU engines (in_threads) and the CPU description of benches."""

import threading
import time

import numba
import pytest

from app.compute.cpu_threads import cpu_description, in_threads, threads


def test_in_threads_covers_the_range_once_in_contiguous_ranges_one_per_thread():
    n = min(3, numba.config.NUMBA_NUM_THREADS)
    calls = []
    with threads(n):
        in_threads(lambda a, b: calls.append((a, b, threading.get_ident())), 5, 105)
        assert len(calls) == n
        starts = sorted(calls)
        assert starts[0][0] == 5 and starts[-1][1] == 105
        assert all(x[1] == y[0] for x, y in zip(starts, starts[1:]))      # no gap, no overlap
        assert len({c[2] for c in calls}) == n
        calls.clear()
        in_threads(lambda a, b: calls.append((a, b, 0)), 0, 1)            # never more ranges than items
        assert calls == [(0, 1, 0)]


def test_in_threads_waits_for_every_range_before_raising():
    finished = []

    def run(a: int, b: int) -> None:
        if a == 0:
            raise ValueError("first range failed")
        time.sleep(0.05)
        finished.append(a)

    with threads(min(2, numba.config.NUMBA_NUM_THREADS)):
        expected = numba.get_num_threads() - 1
        with pytest.raises(ValueError, match="first range"):
            in_threads(run, 0, 10)
    assert len(finished) == expected


def test_cpu_description_names_the_cpus():
    assert "usable logical CPUs" in cpu_description()
