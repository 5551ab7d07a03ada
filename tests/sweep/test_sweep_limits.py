"""Sweeps refuse before Dask starts what would hang or thrash: a worker count the machine
cannot run, a scheduler address in a scheme Dask does not speak, a scheduler that accepts and
never answers (the timeout is kept on our clock), a grid above the point limit, a point whose
memory estimate does not fit; each message names the option or key, the value and the limit."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.sims.common.config import ConfigError
from app.sweep import runner
from app.sweep.runner import check_cluster_options
from app.sweep.spec import MAX_POINTS

SWEEP = Path(__file__).resolve().parents[2] / "resources" / "sweeps" / "ssa-dimerization-c2.yaml"


@settings(derandomize=True, max_examples=40, deadline=None)
@given(workers=st.one_of(st.integers(-10**6, 0), st.integers((os.cpu_count() or 1) + 1, 10**6)))
def test_worker_counts_out_of_range_are_refused(workers):
    with pytest.raises(ConfigError, match=f"--workers {workers}: a local cluster runs from 1 to") as info:
        check_cluster_options(workers, None)
    assert info.value.source == "command line"


@pytest.mark.parametrize("workers", list(range(1, (os.cpu_count() or 1) + 1)))
def test_worker_counts_in_range_pass(workers):
    check_cluster_options(workers, None)


@pytest.mark.parametrize("address", ["http://127.0.0.1:8786", "https://h:1", "ftp://x:2", "ws://a:1",
                                     "HTTP://A:1", "file:///tmp/s"])
def test_unsupported_schemes_are_named(address):
    scheme = address.split("://")[0]
    with pytest.raises(ConfigError, match=f"the scheme {scheme}:// is not supported"):
        check_cluster_options(None, address)


@pytest.mark.parametrize("address", ["tcp://127.0.0.1:8786", "tls://h:1", "127.0.0.1:8786", "ucx://h:2"])
def test_supported_addresses_pass(address):
    check_cluster_options(None, address)


@pytest.mark.parametrize("address", ["tcp://", "   "])
def test_empty_addresses_are_refused(address):
    with pytest.raises(ConfigError, match="no host and port"):
        check_cluster_options(None, address)


def test_scheduler_that_never_answers_times_out_on_our_clock():
    pytest.importorskip("distributed")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)                     # the kernel accepts connections; nothing ever answers
    port = server.getsockname()[1]
    try:
        start = time.monotonic()
        with pytest.raises(ConfigError, match=f"tcp://127.0.0.1:{port}: cannot reach a Dask scheduler"):
            runner.connect(f"tcp://127.0.0.1:{port}", timeout_s=1.0)
        assert time.monotonic() - start < 15
    finally:
        server.close()


def test_cli_refusals_exit_2_before_planning(tmp_path, capsys):
    from app.cli import main

    for args, words in ((["--workers", "5000"], "--workers 5000"),
                        (["--scheduler", "http://127.0.0.1:8786"], "http:// is not supported")):
        start = time.monotonic()
        assert main(["sweep", str(SWEEP), "--out", str(tmp_path / "s")] + args) == 2
        assert words in capsys.readouterr().err and time.monotonic() - start < 30


def test_grid_above_the_point_limit_is_refused_at_once(tmp_path, capsys):
    from app.cli import main

    text = SWEEP.read_text().replace("num: 5, scale: log}}", "num: 1000, scale: log}}\n"
                                     "    - {key: model.parameters.c1, range: {start: 0.5, stop: 2, num: 1000}}")
    path = tmp_path / "grid.yaml"
    path.write_text(text)
    start = time.monotonic()
    assert main(["sweep", str(path), "--out", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert f"more than the limit of {MAX_POINTS:,}" in err and str(path) in err
    assert time.monotonic() - start < 20


def test_planner_refuses_a_point_that_cannot_fit(tmp_path, monkeypatch):
    monkeypatch.setenv("BIOGPU_MEMORY_LIMIT", "1G")
    text = SWEEP.read_text().replace("realizations: 128", "realizations: 67108864")
    path = tmp_path / "huge.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=r"sweep point p00000-r00 \(model.parameters.c2=.*\) needs about") as info:
        runner.plan_sweep(path, tmp_path / "s", "cpu")
    assert "1.0 GiB is available" in str(info.value) and str(path) in str(info.value)


def _size_sweep(tmp_path: Path, t_end_stop: float, preset: str = "00-decay-dimerization") -> Path:
    """A shipped SSA preset (a measured model class), swept in t_end only."""
    preset_path = Path(__file__).resolve().parents[2] / "resources" / "presets" / "ssa" / f"{preset}.yaml"
    text = preset_path.read_text() + ("sweep:\n  parameters:\n    - {key: ensemble.t_end, range: "
                                 f"{{start: 10, stop: {t_end_stop}, num: 4, scale: log}}}}\n")
    path = tmp_path / "sizes.yaml"
    path.write_text(text)
    return path


def test_the_whole_sweeps_time_is_the_sum_of_its_points(tmp_path):
    from app.sims.common.estimate import estimate_seconds, format_duration

    plan = runner.plan_sweep(_size_sweep(tmp_path, 1000), tmp_path / "s", "cpu")
    total = sum(estimate_seconds("ssa", cfg, "cpu") for cfg in plan.configs)
    assert total > 0 and f"expected: {format_duration(total)} of runs for 4 points" in plan.estimate


def test_a_sweep_over_the_time_limit_is_refused_before_dask_unless_raised(tmp_path, capsys, monkeypatch):
    """Birth-death fires about 20 reactions a time unit in each of its 20,000 realizations at
    stationarity, so points up to t_end 1e9 are many days of work at its measured event rate
    (a hundred times the 24-h limit, whatever this machine's calibration): refused naming the
    estimate, the limit and the flag; --max-hours lets it by."""
    from app.cli import main

    path = _size_sweep(tmp_path, 1.0e9, "birth-death")
    started = []
    monkeypatch.setattr(runner, "start_cluster", lambda *a, **k: started.append(1) or 1 / 0)
    assert main(["sweep", str(path), "--out", str(tmp_path / "s"), "--no-png"]) == 2
    err = capsys.readouterr().err
    assert "expected to take about" in err and "above the limit of 24 h" in err and "--max-hours" in err
    assert str(path) in err and not started and not (tmp_path / "s").exists()
    plan = runner.plan_sweep(path, tmp_path / "s", "cpu", max_hours=1_000_000)
    assert "days of runs for 4 points" in plan.estimate
    with pytest.raises(ConfigError, match="above the limit of 1 h"):
        runner.plan_sweep(path, tmp_path / "s", "cpu", max_hours=1)


@pytest.mark.parametrize("value", ["0", "-3", "nan", "inf"])
def test_bad_max_hours_are_named(tmp_path, capsys, value):
    from app.cli import main

    assert main(["sweep", str(SWEEP), "--out", str(tmp_path / "s"), f"--max-hours={value}"]) == 2
    assert f"--max-hours must be a positive number of hours, got {float(value)}" in capsys.readouterr().err
