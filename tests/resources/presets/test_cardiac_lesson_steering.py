"""The cardiac lesson's steering claim: with the spiral started by hand (a drag along the
bottom edge at 135 ms, as the lesson says), an ablation band painted at 420 ms from the left
edge to the spiral's tip ends it, while a scar over the tip alone does not.

The gestures are the GUI's steering events, replayed from the config (the drag: a stimulus
disc every millimetre; the band: a 2-mm brush dragged every millimetre along y = 12 mm)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from app.sims.common.session import Session
from app.sims.common.simulation import find_preset, load_run_config
from app.sims.common.steering import SteeringEvent

ABLATE_MS = 420.0      # the tip turns within x = 11-14, y = 11-13 mm from 400 to 430 ms (phase singularities)


def brush(x: float, y: float, r: float) -> dict:
    return {"kind": "brush", "centre": [x, y, 0.0], "radius": r}


def run(*ablation: SteeringEvent) -> Session:
    domain, cfg = load_run_config(find_preset("cardiac/lesson-spiral-by-hand"))
    drag = int(round(135.0 / cfg.solver.dt))
    spiral = [SteeringEvent(drag, "stimulate", -40.0, None, brush(float(x), 0.0, 1.0)) for x in range(21)]
    session = Session(domain, replace(cfg, steering=(*spiral, *ablation)), "cpu", handover=False)
    session.run()
    return session


def at(t_ms: float) -> int:
    return int(round(t_ms / 0.1))        # the lesson's dt


@pytest.mark.slow
def test_a_band_from_the_edge_to_the_tip_ends_the_spiral():
    """'the last wave leaves the sheet within about 70 ms and the sheet is at rest to the
    end': no cell activates after 600 ms and every cell is below -80 mV at 1,500 ms."""
    band = [SteeringEvent(at(ABLATE_MS), "ablate", None, None, brush(float(x), 12.0, 2.0)) for x in range(15)]
    session = run(*band)
    last = session.arrays["activation_last"]
    assert np.nanmax(last[np.isfinite(last)]) < 600.0
    assert np.asarray(session.last_frame.V).max() < -80.0


@pytest.mark.slow
def test_a_scar_over_the_tip_alone_does_not_stop_it():
    """'A scar over the tip alone (a 3-mm disc at x = 12, y = 12 mm) does not stop it': over a
    fifth of the sheet still activates after 1,400 ms."""
    session = run(SteeringEvent(at(ABLATE_MS), "ablate", None, None, brush(12.0, 12.0, 3.0)))
    assert (session.arrays["activation_last"] > 1400.0).mean() > 0.2
