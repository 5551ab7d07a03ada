"""The network lesson's steering claim: blocking the excitatory synapses of a bursting
culture stops its bursts, its rate falls to the starters' and its circles grow again."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from app.sims.common.session import Session
from app.sims.common.simulation import PRESETS, load_run_config
from app.sims.common.steering import SteeringEvent

LESSON = PRESETS / "network" / "lesson-bursts-appear.yaml"
BLOCK_AFTER = 60          # epochs: the culture bursts from about epoch 55 (tests: 45-65)
EPOCHS = 75


@pytest.mark.slow
def test_blocking_excitation_stops_the_bursts_and_the_circles_grow_again():
    """'From the next epoch there is no burst, the mean rate falls back to the starters'
    0.2 Hz, and the circles grow again as in the silent phase': with EE and EI at 0 from epoch
    61, no epoch to 75 has a burst, every one's mean rate is below 0.3 Hz, and the mean radius
    grows in every one of them; the same culture unblocked bursts in at least three of them."""
    domain, cfg = load_run_config(LESSON, overrides=[f"run.epochs={EPOCHS}"])
    at = BLOCK_AFTER * cfg.steps_per_epoch
    blocked = Session(domain, replace(cfg, steering=(SteeringEvent(at, "scale.EE", 0.0),
                                                     SteeringEvent(at, "scale.EI", 0.0))), "cpu", handover=False)
    blocked.run()
    h = blocked.last_frame.history
    after = slice(BLOCK_AFTER, EPOCHS)
    assert h["epoch_bursts_per_minute"][:BLOCK_AFTER].max() > 0          # it did burst before
    assert (np.asarray(h["epoch_bursts_per_minute"])[after] == 0).all()
    assert (np.asarray(h["epoch_mean_rate"])[after] < 0.3).all()
    assert (np.diff(np.asarray(h["epoch_mean_radius"])[BLOCK_AFTER - 1:EPOCHS]) > 0).all()
    free = Session(domain, cfg, "cpu", handover=False)
    free.run()
    assert (np.asarray(free.last_frame.history["epoch_bursts_per_minute"])[after] > 0).sum() >= 3
