"""The epidermis lesson's steering claim: a wound made at step 8,000 (the brush's ``wound``
at the middle of the tissue, radius 9 µm) closes, while the basal cells it took never come
back, so each later division round adds fewer cells."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from app.sims.common.session import Session
from app.sims.common.simulation import PRESETS, load_run_config
from app.sims.common.steering import SteeringEvent
from app.sims.epidermis import model

LESSON = PRESETS / "epidermis" / "lesson-first-divisions.yaml"
WOUND_AT, RADIUS = 8000, 9.0


@pytest.mark.slow
def test_a_wound_closes_but_its_basal_cells_do_not_come_back():
    """'a dozen cells vanish, leaving at most a couple of centres in the disc; cells move back
    in (4 or more by step 10,000, as many as before the wound by step 16,000); every division
    round now adds 12 cells, not 16'."""
    domain, cfg = load_run_config(LESSON, overrides=["run.steps=16000"])
    centre = [model.box_of(cfg) / 2] * 2
    seen: dict[int, tuple[int, int, int]] = {}

    def on_frame(frame) -> None:
        if frame.step % 1000 == 0:
            ctr = np.asarray(frame.centres)
            inside = int((np.hypot(ctr[:, 0] - centre[0], ctr[:, 1] - centre[1]) < RADIUS).sum())
            seen[frame.step] = (frame.cells, int((~np.asarray(frame.suprabasal, bool)).sum()), inside)

    wound = SteeringEvent(WOUND_AT, "wound", None, None, {"kind": "brush", "centre": centre, "radius": RADIUS})
    Session(domain, replace(cfg, steering=(wound,)), "cpu", handover=False, on_frame=on_frame).run()
    # the frame of step WOUND_AT carries the wound, and that step's division round (one new cell
    # per basal cell): the cells removed are those the round would have left, less those seen
    cells_before, basal_before, inside_before = seen[WOUND_AT - 1000]
    cells_after, basal_after, inside_after = seen[WOUND_AT + 1000]
    assert 10 <= cells_before + basal_before - cells_after <= 14 and inside_after <= 2
    assert seen[10000][2] >= 4 and seen[16000][2] >= inside_before
    assert basal_after == 12 and seen[12000][0] == cells_after + 12 and seen[16000][0] == cells_after + 24
