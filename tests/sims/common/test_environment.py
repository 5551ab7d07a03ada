"""Environment settings are checked at start and named as bad settings (not surfacing later
as an engine error or a size like "needs 12.3 KiB" against a negative limit)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.sims.common.config import ConfigError
from app.sims.common.environment import MAX_THREADS, check_environment
from app.sims.common.memory import parse_memory_limit

THREADS = ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


@pytest.mark.parametrize("name", THREADS)
@pytest.mark.parametrize("value", ["0", "-1", "x", "1.5", str(MAX_THREADS + 1), "1e3"])
def test_bad_thread_counts_are_named(name, value):
    with pytest.raises(ConfigError, match=f"'{value}' is not a thread count") as info:
        check_environment({name: value})
    assert str(info.value).startswith(f"environment setting {name}:")


@settings(derandomize=True, max_examples=40, deadline=None)
@given(n=st.integers(1, MAX_THREADS))
def test_good_thread_counts_pass(n):
    check_environment({name: str(n) for name in THREADS})


@pytest.mark.parametrize("value", ["-5G", "0", "-1", "abc", "nanG", "infT", "1e999G", "G", "--3M", "0.1"])
def test_bad_memory_limits_are_named(value):
    with pytest.raises(ConfigError, match="is not a memory size") as info:
        check_environment({"BIOGPU_MEMORY_LIMIT": value})
    assert str(info.value).startswith("environment setting BIOGPU_MEMORY_LIMIT:")


@settings(derandomize=True, max_examples=40, deadline=None)
@given(number=st.integers(1, 10**6), unit=st.sampled_from(["", "K", "M", "G", "T", "KB", "GB"]))
def test_good_memory_limits_parse(number, unit):
    scale = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}[unit.rstrip("B")]
    assert parse_memory_limit(f"{number}{unit}") == number * scale


def test_cache_folder_that_is_a_file(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(ConfigError, match="is a file, not a folder"):
        check_environment({"BIOGPU_CACHE_DIR": str(f)})


@pytest.mark.parametrize("setting,words", [("NUMBA_NUM_THREADS=0", "environment setting NUMBA_NUM_THREADS"),
                                           ("BIOGPU_MEMORY_LIMIT=-5G", "environment setting BIOGPU_MEMORY_LIMIT")])
def test_cli_exits_2_naming_the_setting(tmp_path, setting, words):
    """In a child process: numba reloads its configuration in this one when a NUMBA_ variable
    changes, which a test must not cause."""
    import os
    import subprocess
    import sys

    name, value = setting.split("=")
    out = subprocess.run([sys.executable, "-m", "app", "run", "resources/presets/ssa/birth-death.yaml",
                          "--out", str(tmp_path / "o")], env={**os.environ, name: value},
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and words in out.stderr, out.stderr
