"""The steering surface: changes checked against the declared keys, regions, the hand-over
from the reference engine carrying the events, events on frames."""

from __future__ import annotations

import numpy as np
import pytest

from app.sims.common import session as session_module
from app.sims.common.config import ConfigError
from app.sims.common.session import Session
from app.sims.common.simulation import PRESETS, load_run_config
from app.sims.common.steering import Steerable, by_key, check_change, check_region, region_mask
from tests.sims.common.steering_runs import assert_same_arrays, replay
from tests.sims.common.test_handover import ReadyAfter

SPECS = by_key([Steerable("rate", "float", (0.0, 10.0)), Steerable("n", "int", (1, 5)),
                Steerable("on", "bool"), Steerable("paint", "gesture", region=True),
                Steerable("size", "int", live=False)])


@pytest.mark.parametrize("key,value,region,message", [
    ("nope", 1.0, None, "'nope' cannot be steered; steerable keys: rate, n, on, paint, size"),
    ("rate", 11.0, None, r"'rate' = 11.0 is out of range; valid range is \[0, 10\]"),
    ("rate", float("nan"), None, "'rate' must be finite"),
    ("rate", True, None, "'rate' is a number, not True"),
    ("n", 1.5, None, "'n' is a whole number"),
    ("on", 1, None, "'on' is true or false"),
    ("paint", None, None, "'paint' needs a region"),
    ("rate", 1.0, {"kind": "indices", "indices": [1]}, "'rate' takes no region"),
    ("paint", None, {"kind": "brush", "centre": [0, 0], "radius": -1}, "a brush is"),
    ("paint", None, {"kind": "brush", "centre": [0, float("inf")], "radius": 1}, "a brush is"),
    ("paint", None, {"kind": "indices", "indices": [-1]}, "an index region is"),
    ("paint", None, {"kind": "lasso"}, "a region is a mapping with kind one of brush, indices"),
    ("size", 3, None, "'size' needs a restart"),
])
def test_a_bad_change_names_the_key_and_the_value(key, value, region, message):
    with pytest.raises(ConfigError, match=message):
        check_change(SPECS, key, value, region)


def test_good_changes_are_normalised():
    assert check_change(SPECS, "rate", 3) == (3.0, None)
    assert check_change(SPECS, "n", 2.0) == (2, None)
    brush = check_change(SPECS, "paint", None, {"kind": "brush", "centre": [1, 2], "radius": 1})[1]
    assert brush == {"kind": "brush", "centre": [1.0, 2.0], "radius": 1.0}


def test_regions_select_points():
    points = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [3.0, 0.0, 0.0]])
    brush = check_region({"kind": "brush", "centre": [0.0, 0.0], "radius": 1.0}, "paint")
    assert list(region_mask(brush, points)) == [True, True, False]
    assert list(region_mask({"kind": "indices", "indices": [2]}, points)) == [False, False, True]
    with pytest.raises(ConfigError, match="region index 3 is out of range: there are 3"):
        region_mask({"kind": "indices", "indices": [3]}, points)


def test_a_handed_over_run_carries_its_events(monkeypatch):
    """Steered on the reference engine, handed over to the compiled one, steered again: the
    events stay, and the run equals its replay on the compiled engine alone."""
    domain, cfg = load_run_config(PRESETS / "ssa" / "birth-death.yaml",
                                  overrides=["ensemble.realizations=64", "ensemble.samples=201"])
    fake = ReadyAfter(3)
    monkeypatch.setattr(session_module, "service", lambda: fake)
    frames = []
    session = Session(domain, cfg, "cpu", on_frame=frames.append)
    session.steer("rates.birth", 20.0)
    original = session.on_frame

    def steer_late(frame):
        original(frame)
        if len(frames) == 100:
            session.steer("initial.X", 3)

    session.on_frame = steer_late
    session.run()
    assert session.summary["engines"]["finished_on"] == "cpu"
    assert [e.key for e in session.events] == ["rates.birth", "initial.X"]
    assert frames[-1].events == session.events and frames[0].events == session.events[:1]
    again = replay(session)
    assert_same_arrays(session.arrays, again.arrays)
