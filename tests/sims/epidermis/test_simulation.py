"""The simulation surface: presets, CLI outputs, checkpoint/resume, live changes, frames and
the stratification of the small demo."""

import json

import numpy as np
import pytest

from app.sims.common.steering import by_key, check_change
from app.sims.epidermis.config import steerables

from app.cli import main
from app.sims.common.config import ConfigError
from app.sims.common.session import load_checkpoint
from app.sims.common.simulation import PRESETS, load_run_config, presets
from app.sims.epidermis import model
from app.sims.epidermis.frame import ELEMENT_BASAL, ELEMENT_C1, ELEMENT_SUPRABASAL
from app.sims.epidermis.simulation import EpidermisSimulation

from .helpers import config

# 4 small cells that grow from the start (Delta starts below delta_low) and divide every
# 20 steps: growth, divisions and capacity in a few hundred steps
SMALL = dict(tissue={"cells": 4, "elements": 6, "max_elements": 8, "cell_radius": 2.5, "pitch": 6.0},
             genes={"initial": 0.2}, growth={"interval": 10},
             run={"steps": 120, "relax_steps": 20, "history_every": 20})


def run_all(sim):
    frames = []
    while not sim.finished:
        frames.append(sim.advance())
    return frames


def test_presets_load():
    files = presets("epidermis")
    names = {p.name for p in files}
    assert {"00-full-100-cells.yaml", "movement-128-periodic.yaml", "movement-5000-none.yaml",
            "genes-128-periodic.yaml", "small-cpu-demo.yaml"} <= names
    for path in files:
        domain, cfg = load_run_config(path)
        assert domain.name == "epidermis" and cfg.description
    _, paper = load_run_config(PRESETS / "epidermis" / "00-full-100-cells.yaml")
    assert (paper.tissue.cells, paper.run.steps, paper.run.mode, paper.tissue.boundary,
            paper.growth.interval) == (100, 130_000, "full", "periodic", 2000)


def test_cli_run_writes_the_results(tmp_path):
    cfg_path = tmp_path / "small.yaml"
    cfg_path.write_text(
        "domain: epidermis\n"
        "tissue: {cells: 4, elements: 6, max_elements: 8, cell_radius: 2.5, pitch: 6.0}\n"
        "genes: {initial: 0.2}\n"
        "growth: {interval: 10}\n"
        "run: {steps: 60, relax_steps: 20, history_every: 20}\n")
    out = tmp_path / "out"
    assert main(["run", str(cfg_path), "--backend", "cpu", "--out", str(out), "--no-png"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    for key in ("cells", "elements", "steps", "wall_seconds", "steps_per_second", "layers",
                "suprabasal_fraction", "mode", "backend"):
        assert key in summary
    assert summary["steps"] == 60 and summary["backend"] == "cpu" and summary["cells"] > 4
    with np.load(out / "results.npz") as r:
        M = summary["elements"]
        assert r["positions"].shape == (M, 3) and r["element_cell"].shape == (M,)
        assert r["element_type"].shape == (M,) and r["cell_state"].shape == (summary["cells"], 6)
        assert r["history_step"].tolist() == [0, 20, 40, 60]
        assert r["history_cells"].shape == r["history_layers"].shape == (4,)
        assert np.bincount(r["element_cell"]).min() >= 4
        for key in ("history_t", "history_basal_fraction", "history_suprabasal_fraction",
                    "history_elements"):
            assert r[key].shape == (4,)
    assert "domain: epidermis" in (out / "config.yaml").read_text()


def test_checkpoint_resumes_bit_identically(tmp_path):
    cfg = config(**SMALL)
    whole = EpidermisSimulation.from_config(cfg, "cpu")
    run_all(whole)
    half = EpidermisSimulation.from_config(cfg, "cpu")
    while half.step < 50:
        half.advance()
    path = tmp_path / "ckpt.npz"
    half.save_checkpoint(path)
    resumed = EpidermisSimulation.restore(load_checkpoint(path), "cpu")
    assert resumed.step == half.step
    run_all(resumed)
    a, b = whole.engine.state(), resumed.engine.state()
    assert int(a["n_cells"]) > 4
    for key in a:
        np.testing.assert_array_equal(a[key], b[key])
    for key in whole.history:
        np.testing.assert_array_equal(whole.history[key], resumed.history[key])
    # run.checkpoint: written as the run goes, picked up by from_config
    ck = tmp_path / "auto.npz"
    cfg2 = config(**{**SMALL, "run": {**SMALL["run"], "checkpoint": str(ck)}})
    sim = EpidermisSimulation.from_config(cfg2, "cpu")
    while sim.step < 30:
        sim.advance()
    assert ck.exists()
    again = EpidermisSimulation.from_config(cfg2, "cpu")
    assert again.step >= 20 and again.history["step"][0] == 0
    run_all(again)
    c = again.engine.state()
    for key in a:
        np.testing.assert_array_equal(a[key], c[key])
    other = config(**{**SMALL, "tissue": {**SMALL["tissue"], "seed": 5},
                      "run": {**SMALL["run"], "checkpoint": str(ck)}})
    with pytest.raises(ConfigError, match="different tissue"):
        EpidermisSimulation.from_config(other, "cpu")


def test_live_changes_between_slices():
    sim = EpidermisSimulation.from_config(config(**SMALL), "cpu")
    while sim.relax_left:
        sim.advance()
    sim.advance()
    before = sim.engine.state()
    for key, value in {"growth.interval": 25, "mechanics.wall_stiffness": 7.0, "run.steps": 200}.items():
        sim.steer(key, value)
    assert sim.cfg.growth.interval == 25 and sim.cfg.mechanics.wall_stiffness == 7.0
    assert sim.engine.cfg.growth.interval == 25 and sim.cfg.run.steps == 200
    after = sim.engine.state()
    for key in before:
        np.testing.assert_array_equal(before[key], after[key])
    run_all(sim)
    assert sim.step == 200
    specs = by_key(steerables(sim.cfg))
    with pytest.raises(ConfigError, match="'tissue.cells' needs a restart"):
        check_change(specs, "tissue.cells", 9)
    with pytest.raises(ConfigError, match=r"'growth.interval' = 0 is out of range"):
        check_change(specs, "growth.interval", 0)


def test_frames_colour_the_elements():
    sim = EpidermisSimulation.from_config(config(**SMALL), "cpu")
    frames = run_all(sim)
    f = frames[-1]
    assert f.done and f.progress == 1.0 and f.step == 120 and f.throughput > 0
    assert f.throughput_unit == "steps/s" and "cells" in f.status
    assert f.positions.shape == (f.elements, 3) and not f.positions.flags.writeable
    supra = f.suprabasal[f.element_cell]
    expect = np.where(f.element_type == 1, ELEMENT_C1,
                      np.where(supra, ELEMENT_SUPRABASAL, ELEMENT_BASAL))
    np.testing.assert_array_equal(f.element_colour, expect)
    assert (f.element_colour == ELEMENT_C1).any()
    assert f.box == pytest.approx(12.0) and f.centres.shape == (f.cells, 3)
    assert f.history["cells"][-1] == f.cells and f.history["step"][-1] == 120
    arrays, summary = sim.results()
    assert summary["cells"] == f.cells and arrays["positions"].shape == f.positions.shape


def test_small_demo_stratifies():
    """The small CPU demo, shortened (growth every 100 steps, 3000 steps): the basal cells
    divide once, the free daughters leave the membrane and turn suprabasal."""
    _, cfg = load_run_config(PRESETS / "epidermis" / "small-cpu-demo.yaml",
                             overrides=["growth.interval=100", "run.steps=3000"])
    sim = EpidermisSimulation.from_config(cfg, "cpu")
    h0 = sim.frame()
    assert h0.cells == 16 and h0.layers == 1 and not h0.suprabasal.any()
    f = run_all(sim)[-1]
    attached = np.zeros(f.cells, bool)
    attached[np.unique(f.element_cell[f.element_type == 1])] = True
    assert f.cells >= 28 and f.layers >= 2
    assert 0.35 < f.suprabasal.mean() < 0.65
    # detached cells sit a layer up and are suprabasal; attached ones basal on the membrane
    z_free, z_attached = f.centres[~attached, 2], f.centres[attached, 2]
    assert z_free.min() > z_attached.max() + 1.5 and z_free.mean() > 7.0 and z_attached.max() < 5.0
    assert f.suprabasal[~attached].mean() > 0.8 and not f.suprabasal[attached].any()
    assert model.count_layers(f.centres[:, 2], cfg.run.layer_thickness) == f.layers


@pytest.mark.parametrize("backend", ["cpu-reference", "cpu"])
def test_the_relaxation_runs_in_slices_and_gives_the_same_step_0(backend):
    """The initial relaxation's steps are the run's first slices (their frames come at once,
    at step 0 and saying so), and step 0 after them is the one of model.initial_state exactly."""
    from app.sims.common.registry import DOMAINS

    cfg = config(**SMALL)
    sim = EpidermisSimulation.from_config(cfg, backend)
    first = sim.advance()
    assert sim.relax_left == 10 and first.step == 0 and first.progress == 0.0
    assert "relaxing the initial 4 cells" in first.status and "10/20" in first.status
    assert not sim.can_hand_over and sim.history["step"] == []
    while sim.relax_left:
        sim.advance()
    assert sim.can_hand_over and sim.history["step"] == [0] and sim.relax_seconds > 0
    expected = model.initial_state(cfg, engine=DOMAINS["epidermis"].engine_class(backend))
    got = sim.engine.state()
    for key in expected:
        np.testing.assert_array_equal(got[key], expected[key], err_msg=key)
    # a change or a checkpoint asked for while it relaxes is of step 0, after the relaxation
    early = EpidermisSimulation.from_config(cfg, backend)
    early.advance()
    state = early.state()
    assert early.relax_left == 0 and int(state["engine_step"]) == 0
    np.testing.assert_array_equal(state["engine_pos"], expected["pos"])
