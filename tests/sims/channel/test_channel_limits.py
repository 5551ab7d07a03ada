"""Channel fits: a recordings CSV above the size limit (a 300 MB file used to parse for
minutes) and a GA whose generation would cost hours (population 4e6 on 12,500 points on the
CPU) are refused before work starts, naming the file or key, the value and the limit."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from app.sims.channel import data, recordings
from app.sims.channel.config import GENERATION_WORK_LIMIT
from app.sims.common.config import ConfigError

PRESET = Path(__file__).resolve().parents[3] / "resources" / "presets" / "channel" / "00-model-b-surrogate.yaml"


@pytest.mark.parametrize("size", [data.MAX_CSV_BYTES + 1, 300 << 20])
@pytest.mark.parametrize("reader", ["recordings", "aligned"])
def test_large_csv_is_refused_before_parsing(tmp_path, size, reader):
    path = tmp_path / "huge.csv"
    with open(path, "wb") as fh:
        fh.write(b"t,i\n0,1\n")
        fh.truncate(size)                             # sparse: no disk used
    start = time.perf_counter()
    with pytest.raises(ConfigError, match=f"a CSV recording may have at most {data.MAX_CSV_BYTES:,}") as info:
        if reader == "recordings":
            recordings.read_csv(path)
        else:
            data.load_csv(path, None)
    assert str(path) in str(info.value) and f"{size:,} bytes" in str(info.value)
    assert time.perf_counter() - start < 2


def test_csv_that_is_a_pipe_is_refused(tmp_path):
    fifo = tmp_path / "pipe.csv"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="not a regular file"):
        recordings.read_csv(fifo)


@pytest.mark.parametrize("backend,population,refused", [
    ("cpu", 4_000_000, True), ("cpu-reference", 400_000, True), ("cpu", 1120, False),
    ("cuda", 4_000_000, False),
])
def test_generation_work_limit(backend, population, refused):
    from app.sims.channel.config import check_before_run
    from app.sims.common.simulation import load_run_config

    _, cfg = load_run_config(PRESET, overrides=[f"ga.population={population}"])
    if refused:
        with pytest.raises(ConfigError, match=r"simulated samples per generation") as info:
            check_before_run(cfg, backend)
        assert f"{population:,} individuals" in str(info.value) and info.value.path == ("ga", "population")
        assert f"{GENERATION_WORK_LIMIT[backend]:.0e}" in str(info.value)
    else:
        check_before_run(cfg, backend)


def test_cli_population_4e6_exits_2_at_once(tmp_path, capsys):
    from app.cli import main

    start = time.perf_counter()
    code = main(["run", str(PRESET), "--backend", "cpu", "--set", "ga.population=4000000",
                 "--out", str(tmp_path / "o")])
    assert code == 2 and "ga.population" in capsys.readouterr().err
    assert time.perf_counter() - start < 30
