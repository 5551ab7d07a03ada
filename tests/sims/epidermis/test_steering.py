"""Steering a growing epidermis while it runs: a wound closes, a paused tissue does not grow,
and a steered run replays bit for bit from config.yaml."""

from __future__ import annotations

import numpy as np
import pytest

from app.sims.common.config import dump_yaml
from app.sims.common.simulation import load_run_config
from app.sims.epidermis import model
from app.sims.epidermis.simulation import EpidermisSimulation
from tests.sims.common.steering_runs import assert_continue_alike, assert_same_arrays, replay, run_steered

from .helpers import config

WOUND_RADIUS = 7.0


def tissue(steps: int = 100):
    """36 cells on a 36-µm periodic square, dividing every few tens of steps."""
    cfg = config(tissue={"cells": 36, "elements": 6, "max_elements": 8, "cell_radius": 2.5, "pitch": 6.0},
                 genes={"initial": 0.2}, growth={"interval": 10},
                 run={"steps": steps, "relax_steps": 20, "history_every": 20, "slice_steps": 10})
    return load_run_config(dump_yaml(cfg), text=True)


def centres_in_wound(centres: np.ndarray, centre) -> int:
    """Cells (centres (3, n)) whose centre is inside the wound's disc."""
    return int((np.hypot(centres[0] - centre[0], centres[1] - centre[1]) < WOUND_RADIUS).sum())


def test_a_wound_closes():
    """Removing the cells of a disc leaves no cell centre in it; in a run steered through its
    session, 100 steps after the wound cells have moved and divided into it."""
    domain, cfg = tissue()
    box = model.box_of(cfg)
    centre = [box / 2, box / 2]
    brush = {"kind": "brush", "centre": centre, "radius": WOUND_RADIUS}
    sim = EpidermisSimulation.from_config(cfg, "cpu-reference")
    before = sim.cells()[0].shape[1]
    assert centres_in_wound(sim.cells()[0], centre) > 0
    sim.steer("wound", None, brush)
    assert centres_in_wound(sim.cells()[0], centre) == 0 and sim.cells()[0].shape[1] < before
    session = run_steered(domain, cfg, "cpu-reference", [(0, "wound", None, brush)])
    assert session.events[0].at < 20
    assert centres_in_wound(session.last_frame.centres.T, centre) > 0


def test_a_paused_tissue_does_not_grow():
    domain, cfg = tissue(60)
    sim = EpidermisSimulation.from_config(cfg, "cpu-reference")
    sim.steer("growth.paused", True)
    n = sim.cells()[0].shape[1]
    elements = sim.engine.element_counts().sum()
    while not sim.finished:
        sim.advance()
    assert sim.cells()[0].shape[1] == n and sim.engine.element_counts().sum() == elements
    assert sim.steered[0].old is False


@pytest.mark.parametrize("backend", ["cpu-reference", "cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_a_steered_tissue_replays_bit_for_bit(backend):
    domain, cfg = tissue(60)
    box = model.box_of(cfg)
    plan = [(0, "wound", None, {"kind": "brush", "centre": [box / 2, box / 2], "radius": WOUND_RADIUS}),
            (1, "genes.k_a", 0.3, None), (2, "growth.paused", True, None), (3, "growth.paused", False, None)]
    live = run_steered(domain, cfg, backend, plan)
    assert [e.key for e in live.events] == ["wound", "genes.k_a", "growth.paused", "growth.paused"]
    again = replay(live)
    assert again.events == live.events
    assert_same_arrays(live.arrays, again.arrays)


def test_a_wound_survives_a_checkpoint():
    domain, cfg = tissue(40)
    sim = EpidermisSimulation.from_config(cfg, "cpu-reference")
    sim.advance()
    sim.steer("wound", None, {"kind": "indices", "indices": [0, 5, 7]})
    sim.advance()
    resumed = EpidermisSimulation.restore(sim.state(), "cpu-reference")
    assert resumed.steered == sim.steered
    assert_continue_alike(sim, resumed)
