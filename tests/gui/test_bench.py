"""The GUI-cost benchmark runs without an X server (Qt's offscreen platform, as on a GPU server)
and writes its table and JSON where it is told; presets longer than the budget are shortened."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("PySide6", reason="the GUI extra is not installed")

from app.gui.bench import bench_config, fit_budget, shorten
from app.gui.presets import default_for_engine, estimate_seconds
from app.sims.common.simulation import load_run_config

pytestmark = pytest.mark.gui
ROOT = Path(__file__).resolve().parents[2]


def test_the_cuda_network_default_is_cut_to_the_budget():
    _, cfg = load_run_config(default_for_engine("network", "cuda"))
    assert estimate_seconds("network", cfg, "cuda") > 600             # hours at paper scale
    short = fit_budget("network", cfg, "cuda", 20.0)
    assert 2 <= short.run.epochs < cfg.run.epochs
    assert estimate_seconds("network", short, "cuda") <= 20.0
    assert short.culture == cfg.culture                                # only the length changes
    ssa = shorten("ssa", load_run_config(default_for_engine("ssa", "cpu"))[1])
    assert fit_budget("ssa", ssa, "cpu", 20.0) is ssa                  # fits: unchanged


def test_bench_runs_write_and_resume_no_checkpoint():
    # the CUDA network default names a checkpoint and resumes: a timed run would resume the
    # warm-up's and finish at once (0.04 s on the H100), and overwrite the user's file
    _, preset = load_run_config(default_for_engine("network", "cuda"))
    assert preset.run.checkpoint and preset.run.resume
    for name in ("network", "cardiac", "epidermis"):
        _, cfg = bench_config(name, "cuda", quick=False)
        assert cfg.run.checkpoint == "" and cfg.run.resume is False, name
    _, cfg = bench_config("network", "cuda", quick=False)
    assert cfg.culture == preset.culture and cfg.run.epochs == preset.run.epochs


def test_bench_runs_offscreen_without_a_display_and_writes_table_and_json(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    env["PYTHONPATH"] = str(ROOT)
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "app.gui.bench", "--backend", "cpu", "--quick",
                           "--panels", "ssa", "--out", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    table = (out / "gui-cpu.md").read_text()
    assert "| ssa | 00-decay-dimerization (quick) | cpu |" in table and "Qt platform: offscreen" in table
    record = json.loads((out / "gui-cpu.json").read_text())
    doc = record["results"]
    assert doc["platform"] == "offscreen" and record["environment"]["device"] == "cpu"
    row = doc["rows"][0]
    assert row["gui"]["frames"] >= 1 and row["gui"]["progress"] == 1.0 and 0 < row["ratio"]
