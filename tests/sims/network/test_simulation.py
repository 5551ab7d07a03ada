"""The simulation surface: epochs, growth, checkpoint/resume, CLI outputs."""

import json

import numpy as np
import pytest

from app.cli import main
from app.sims.common.config import ConfigError
from app.sims.common.session import load_checkpoint
from app.sims.common.simulation import PRESETS, load_run_config, presets
from app.sims.network.simulation import NetworkSimulation

from .helpers import config

FAST = dict(culture={"width": 6, "height": 6}, growth={"rho": 0.02, "start_radius": 0.7},
            run={"epochs": 4, "epoch_seconds": 0.3, "slice_seconds": 0.1})


def run_all(sim):
    frames = []
    while not sim.finished:
        frames.append(sim.advance())
    return frames


def test_presets_load():
    files = presets("network")
    assert len(files) >= 4
    for path in files:
        domain, cfg = load_run_config(path)
        assert domain.name == "network" and cfg.n_neurons >= 100


def test_config_errors_name_the_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("domain: network\nculture:\n  width: 10\n  layout: hexagonal\n")
    with pytest.raises(ConfigError, match=r"bad.yaml:4: culture.layout: 'hexagonal' is not one of"):
        load_run_config(bad)
    bad.write_text("domain: network\nsynapses:\n  EE: {delay: 0.01}\n")
    with pytest.raises(ConfigError, match=r":3: synapses.EE.delay: delay is 101 steps"):
        load_run_config(bad)


def test_epochs_grow_and_record_history():
    sim = NetworkSimulation(config(**FAST), "cpu")
    frames = run_all(sim)
    assert sum(f.epoch_boundary for f in frames) == 4
    h = frames[-1].history
    assert len(h["epoch_mean_radius"]) == 4 and frames[-1].epoch == 4 and frames[-1].done
    arrays, summary = sim.results()
    assert summary["epochs"] == 4 and summary["sim_seconds"] == pytest.approx(1.2)
    assert summary["realtime_factor"] > 0
    assert np.array_equal(arrays["final_radius"], sim.engine.radius())
    assert arrays["spike_times"].size == arrays["spike_neurons"].size > 0
    assert np.all(np.diff(arrays["spike_times"]) >= 0)
    # the silent cells (not starters) grew, the weights follow the radii
    r = arrays["final_radius"]
    assert (r[~sim.culture.starter] > 0.7).all()
    assert arrays["final_W"].size == h["epoch_synapses"][-1]


def test_checkpoint_and_resume_give_the_same_continuation(tmp_path):
    cfg = config(**FAST)
    whole = NetworkSimulation(cfg, "cpu")
    run_all(whole)
    ckpt = tmp_path / "c.npz"
    first = NetworkSimulation(cfg, "cpu")
    while first.epoch < 2:
        first.advance()
    first.advance()            # stop inside epoch 2
    first.save_checkpoint(ckpt)
    second = NetworkSimulation.restore(load_checkpoint(ckpt), "cpu")
    run_all(second)
    a, _ = whole.results()
    b, _ = second.results()
    for key in ("spike_times", "spike_neurons", "final_radius", "final_W", "final_W_pre",
                "epoch_mean_radius", "epoch_synapses", "epoch_mean_rate", "epoch_radius"):
        assert np.array_equal(a[key], b[key]), key


def test_checkpoint_every_epoch_and_resume_after_a_crash(tmp_path):
    ckpt = tmp_path / "run.ckpt.npz"
    cfg = config(**{**FAST, "run": {**FAST["run"], "checkpoint": str(ckpt)}})
    whole = NetworkSimulation(config(**FAST), "cpu")
    run_all(whole)
    crashed = NetworkSimulation.from_config(cfg, "cpu")
    while crashed.epoch < 3:
        crashed.advance()
    del crashed                 # the process dies here; the checkpoint file remains
    assert ckpt.exists() and int(load_checkpoint(ckpt)["epoch"]) == 3
    resumed = NetworkSimulation.from_config(cfg, "cpu")
    assert resumed.epoch == 3 and resumed.step_in_epoch == 0
    run_all(resumed)
    a, _ = whole.results()
    b, _ = resumed.results()
    assert np.array_equal(a["spike_times"], b["spike_times"])
    assert np.array_equal(a["final_W"], b["final_W"])
    assert np.array_equal(a["epoch_radius"], b["epoch_radius"])       # every epoch's radii kept
    old = dict(load_checkpoint(ckpt))
    del old["epoch_radius"]                   # a checkpoint written before radii were kept per epoch
    partial = NetworkSimulation.restore(old, "cpu")
    assert np.isnan(partial._epoch_radius()).all() and partial._epoch_radius().shape == (old["epoch"], cfg.n_neurons)


def test_cli_run_writes_results(tmp_path, capsys):
    out = tmp_path / "run"
    rc = main(["run", str(PRESETS / "network" / "00-development-10x10-fast.yaml"), "--backend", "cpu",
               "--set", "run.epochs=2", "--set", "run.epoch_seconds=0.5", "--out", str(out), "--no-png"])
    assert rc == 0
    summary = json.loads((out / "summary.json").read_text())
    for key in ("epochs", "sim_seconds", "wall_seconds", "realtime_factor"):
        assert key in summary
    assert summary["epochs"] == 2 and summary["sim_seconds"] == pytest.approx(1.0)
    data = np.load(out / "results.npz")
    for key in ("spike_times", "spike_neurons", "epoch_mean_radius", "epoch_mean_rate",
                "epoch_synapses", "final_radius", "final_W", "final_W_pre", "final_W_post"):
        assert key in data.files
    assert data["final_radius"].shape == (100,) and data["epoch_synapses"].shape == (2,)
