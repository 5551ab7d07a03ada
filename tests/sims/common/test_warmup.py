"""The compile service: a damaged numba cache is rebuilt, never crashes; one preparation per
domain; a helper that dies (a signal) is retried with the cache ignored."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from app.sims.common import warmup
from app.sims.common.warmup import CompileService, Preparation

CHILD = textwrap.dedent("""
    from app.sims.common.warmup import CompileService
    service = CompileService()
    service.request("ssa")
    prep = service.wait("ssa", timeout=600)
    print("state", prep.state, "rebuilt", prep.rebuilt, prep.message)
    from app.sims.ssa.compiled import warm_up
    print("warm", warm_up())
""")


def _child(cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    return subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True,
                          timeout=900, cwd=os.getcwd())


@pytest.mark.slow
def test_a_damaged_cache_is_rebuilt(tmp_path):
    cache = tmp_path / "numba"
    first = _child(cache)
    assert first.returncode == 0, first.stderr[-2000:]
    assert "state ready rebuilt False" in first.stdout
    data = [p for p in cache.rglob("*.nbc")]
    assert data, "the helper left no compiled code in the cache"
    for path in data:                      # what a run killed while writing can leave
        path.write_bytes(path.read_bytes()[:40] + b"\x00garbage" * 8)
    second = _child(cache)
    assert second.returncode == 0, second.stderr[-2000:]
    assert "state ready rebuilt True" in second.stdout   # and stage 2 loaded it in the child
    assert "warm " in second.stdout


def test_a_helper_killed_by_a_signal_is_retried_without_the_cache(monkeypatch):
    calls = []

    def helper(self, domain, rebuild):
        calls.append(rebuild)
        return (0, "") if rebuild else (-11, "")      # SIGSEGV loading the cache, then fine

    monkeypatch.setattr(CompileService, "_helper", helper)
    monkeypatch.setattr(warmup, "warm_in_process", lambda domain: 0.0)
    service = CompileService(helper=True)
    assert service.request("ssa").state == "preparing"
    prep = service.wait("ssa", timeout=60)
    assert prep.state == "ready" and prep.rebuilt and calls == [False, True]
    assert service.request("ssa").state == "ready"    # prepared once per process
    service.shutdown()


def test_a_helper_that_always_fails_leaves_the_domain_failed(monkeypatch):
    monkeypatch.setattr(CompileService, "_helper", lambda self, d, r: (1, "Traceback\nValueError: boom"))
    service = CompileService(helper=True)
    service.request("ssa")
    prep = service.wait("ssa", timeout=60)
    assert prep.state == "failed" and "ValueError: boom" in prep.message
    service.shutdown()


def test_preparing_says_stage_and_seconds():
    prep = Preparation("ssa", "preparing", 1, started=0.0)
    text = prep.describe()
    assert text.startswith("preparing the compiled engine: stage 1 of 2 (compiling), ")
    assert text.endswith(" s")


def test_a_held_domain_loads_in_process_only_once_released(monkeypatch):
    """A run waiting for its first frame holds the in-process stage (numba's import and cache
    load would share the GIL with the reference engine's first slice)."""
    import threading

    compiled, loads = threading.Event(), []
    monkeypatch.setattr(CompileService, "_helper", lambda self, domain, rebuild: (compiled.set(), (0, ""))[1])
    monkeypatch.setattr(warmup, "warm_in_process", lambda domain: loads.append(domain) or 0.0)
    service = CompileService(helper=True)
    try:
        service.hold("ssa")
        assert service.request("ssa").state == "preparing"
        assert compiled.wait(60)                               # stage 1 ran while held
        assert service.wait("ssa", timeout=0.5).state == "preparing" and not loads
        service.release("ssa")
        assert service.wait("ssa", timeout=60).state == "ready" and loads == ["ssa"]
    finally:
        service.shutdown()
