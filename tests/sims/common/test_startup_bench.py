"""bench startup: the bundle's first start is timed to its first frame (the CLI's first progress
line, the GUI's FIRST line), caches empty."""

from __future__ import annotations

import stat

import pytest

from app.sims.common.startup_bench import bundle_first_start


def _fake(tmp_path, body: str):
    exe = tmp_path / "biogpu-studio"
    exe.write_text("#!/bin/sh\n" + body)
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return str(exe)


def test_the_first_progress_line_ends_the_timing_and_the_caches_are_empty(tmp_path):
    seen = tmp_path / "seen"
    exe = _fake(tmp_path, f'echo "$1 $2 $4 $NUMBA_CACHE_DIR" > {seen}\necho "expected: 5 s"\n'
                          'echo "    0.4%  generation 0"\nsleep 30\n')
    seconds, after_run = bundle_first_start(exe, "ssa", "cli")
    assert 0 < seconds < 30 and after_run is None                   # not the sleep: the run is killed after the line
    command, preset, backend, cache = seen.read_text().split()
    assert command == "run" and preset.endswith("00-decay-dimerization.yaml") and backend == "cpu"
    assert "numba" in cache and str(tmp_path) not in cache     # a fresh temporary cache


def test_a_bundle_that_prints_no_progress_is_an_error(tmp_path):
    with pytest.raises(RuntimeError, match=r"no first frame from the ssa gui run \(Traceback\)"):
        bundle_first_start(_fake(tmp_path, 'echo "Traceback"\n'), "ssa", "gui")


def test_the_bundle_gui_is_timed_to_its_first_frame_line(tmp_path):
    seen = tmp_path / "seen"
    exe = _fake(tmp_path, f'echo "$1 $2 $3" > {seen}\necho "    0.4%  not this"\necho "FIRST 0.3"\nsleep 30\n')
    seconds, after_run = bundle_first_start(exe, "epidermis", "gui")
    assert 0 < seconds < 30 and after_run == 0.3
    assert seen.read_text().split() == ["gui", "--first-frame", "epidermis"]
