"""The steering widgets: sliders on linear and log scales, event marks on a time axis."""

from __future__ import annotations

from dataclasses import dataclass

import pyqtgraph as pg
import pytest

from app.gui.steering import (STEPS, BrushTool, EventMarks, brush_label, Knob, KnobSlider, SteeringBox, config_values,
                              knob_for, to_position, to_value)
from app.sims.common.steering import Steerable, SteeringEvent


@dataclass(frozen=True)
class FakeEvent:
    at: int
    key: str
    value: float
    old: float | None = None
    region: dict | None = None


def test_a_range_over_decades_slides_on_a_log_scale():
    knob = Knob("rates.k1", "k1", 1e-3, 1e3, 1.0)
    assert knob.logarithmic
    assert to_position(knob, 1.0) == STEPS // 2            # the middle decade is mid-slider
    assert to_value(knob, STEPS // 3) == pytest.approx(0.1, rel=1e-2)     # a third: 1e-3 -> 1e-1
    linear = Knob("x", "x", 0.0, 10.0, 5.0)
    assert not linear.logarithmic and to_position(linear, 5.0) == STEPS // 2


@pytest.mark.parametrize("knob", [Knob("a", "a", 1e-4, 1e2, 1.0), Knob("b", "b", -5.0, 5.0, 0.0),
                                  Knob("n", "n", 0, 5000, 10, integer=True)])
def test_positions_and_values_round_trip(knob):
    for position in (0, 1, 137, STEPS // 2, STEPS - 1, STEPS):
        value = to_value(knob, position)
        assert knob.lo <= value <= knob.hi
        assert abs(to_position(knob, value) - position) <= 1     # 4 significant digits, or whole counts
    if knob.integer:
        assert all(to_value(knob, p).is_integer() for p in range(0, STEPS, 7))


def test_a_slider_emits_on_release_and_while_dragging_only_in_live_mode(qtbot):
    slider = KnobSlider(Knob("rates.k1", "k1", 1e-2, 1e2, 1.0))
    qtbot.addWidget(slider)
    seen = []
    slider.changed.connect(lambda key, value: seen.append((key, value)))
    slider.slider.setSliderDown(True)
    slider.slider.setValue(750)
    assert seen == []                                       # a drag in continue mode: no event per pixel
    slider.slider.setSliderDown(False)                      # released
    assert seen == [("rates.k1", pytest.approx(10.0, rel=1e-3))]
    slider.live_drag = True
    slider.slider.setSliderDown(True)
    slider.slider.setValue(250)
    assert seen[-1] == ("rates.k1", pytest.approx(0.1, rel=1e-3))
    slider.set_value(3.0)                                   # shown, not emitted
    assert len(seen) == 2 and slider.label.text() == "3"


STEERABLES = (Steerable("mode", "choice", choices=("continue", "explore")),
              Steerable("rates.k1", "float", (0.0, 1e12), log=True),
              Steerable("initial.A", "int", (0, 2**30), log=True),
              Steerable("growth.paused", "bool"),
              Steerable("ensemble.samples", "int", live=False),
              Steerable("ablate", "gesture", region=True),
              Steerable("ach", "gesture", (0.0, 1.0), region=True, doc="acetylcholine (µM)"))


def test_a_box_builds_a_control_per_live_steerable_and_forwards_its_changes(qtbot):
    box = SteeringBox()
    qtbot.addWidget(box)
    box.set_steerables(STEERABLES, {"mode": "continue", "rates.k1": 0.5, "initial.A": 10})
    assert set(box.sliders) == {"rates.k1", "initial.A"}         # no slider for a restart-only key
    assert set(box.switches) == {"growth.paused"} and set(box.choices) == {"mode"}
    assert box.buttons == {}                                     # region gestures belong to the brush
    k1 = box.sliders["rates.k1"].knob
    assert k1.logarithmic and k1.lo == pytest.approx(0.005) and k1.hi == pytest.approx(50.0)
    a = box.sliders["initial.A"].knob
    assert not a.logarithmic and (a.lo, a.hi) == (0.0, 100.0) and a.integer
    with qtbot.waitSignal(box.steered) as signal:
        box.sliders["initial.A"].set_to(40)
    assert signal.args == ["initial.A", 40.0]
    with qtbot.waitSignal(box.steered) as signal:
        box.switches["growth.paused"].setChecked(True)
    assert signal.args == ["growth.paused", True]
    box.set_steerables([], {})
    assert box.sliders == {} and box.isHidden()


def test_a_declared_range_bounds_the_slider():
    knob = knob_for(Steerable("x", "float", (0.1, 2.0), log=True), 1.0)
    assert (knob.lo, knob.hi) == (0.1, 2.0)
    knob = knob_for(Steerable("v", "float", (-100.0, 100.0)), -80.0)
    assert (knob.lo, knob.hi, knob.logarithmic) == (-100.0, 100.0, False)


def test_the_brush_paints_the_chosen_region_gesture(qtbot):
    brush = BrushTool()
    qtbot.addWidget(brush)
    brush.set_steerables(STEERABLES)
    assert [brush.gesture.itemData(i) for i in range(brush.gesture.count())] == ["ablate", "ach"]
    brush.choose("ablate", radius=2.5)
    assert not brush.value.isEnabled()
    assert brush.stroke((1.0, 2.0)) == ("ablate", None, {"kind": "brush", "centre": [1.0, 2.0], "radius": 2.5})
    brush.choose("ach", value=0.3)
    assert brush.stroke((0, 0, 1)) == ("ach", 0.3, {"kind": "brush", "centre": [0.0, 0.0, 1.0], "radius": 2.5})
    brush.set_steerables([])
    assert brush.stroke((0, 0)) is None and brush.isHidden()


def test_the_brush_tells_a_factor_from_a_value():
    assert brush_label("scale.fast_sodium_current.g_Na") == "scale g Na"
    assert brush_label("model.fast_sodium_current.g_Na") == "set g Na"
    assert brush_label("ablate") == "ablate"


def test_config_values_follow_dotted_keys():
    @dataclass(frozen=True)
    class Growth:
        target_rate: float = 4.0
        paused: bool = False

    @dataclass(frozen=True)
    class Cfg:
        growth: Growth = Growth()

    values = config_values(Cfg(), STEERABLES)
    assert values == {"growth.paused": False}
    values = config_values(Cfg(), [Steerable("growth.target_rate", "float", (0.0, 50.0))])
    assert values == {"growth.target_rate": 4.0}


def test_event_marks_follow_the_events_and_survive_a_cleared_plot(qtbot):
    widget = pg.PlotWidget()
    qtbot.addWidget(widget)
    plot = widget.getPlotItem()
    times = [0.0, 0.5, 1.0, 1.5]
    marks = EventMarks(plot, lambda e: times[e.at] if e.at < len(times) else None)
    marks.set_events([FakeEvent(1, "rates.k1", 2.0, 1.0), FakeEvent(3, "initial.A", 5.0)])
    assert marks.positions == [0.5, 1.5]
    assert "1 -> 2" in marks.lines[0].toolTip()
    plot.clear()                                            # a view's clear() removes every item
    marks.set_events([FakeEvent(1, "rates.k1", 2.0, 1.0), FakeEvent(3, "initial.A", 5.0)])
    assert marks.positions == [0.5, 1.5]
    marks.set_events([FakeEvent(2, "rates.k1", 3.0, 2.0), FakeEvent(9, "off the axis", 1.0)])
    assert marks.positions == [1.0]


def test_a_gesture_with_a_value_sets_it_or_clears_it(qtbot):
    box = SteeringBox()
    qtbot.addWidget(box)
    box.set_steerables([Steerable("fixed.k1", "gesture", (0.0, 4.0), doc="hold it")], {})
    spin = box.values["fixed.k1"]
    assert spin.value() == 2.0                                   # the middle of its range
    spin.setValue(3.5)
    with qtbot.waitSignal(box.steered) as signal:
        box.buttons["fixed.k1"].click()
    assert signal.args == ["fixed.k1", 3.5]
    with qtbot.waitSignal(box.steered) as signal:
        box.buttons["fixed.k1:clear"].click()
    assert signal.args == ["fixed.k1", None]


def test_a_steered_frame_saves_in_a_session_and_comes_back():
    """A frame's events (SteeringEvent dataclasses) go into a session as checked YAML text."""
    import numpy as np

    from app.gui.workbench import _decode_frame, _encode_frame
    from app.sims.common.config import ConfigError
    from app.sims.ssa.simulation import SSAFrame

    events = (SteeringEvent(3, "rates.birth", 20.0, 10.0, None, 1.5),
              SteeringEvent(4, "ablate", None, None, {"kind": "brush", "centre": [1.0, 2.0], "radius": 0.5}, 2.0))
    frame = SSAFrame(progress=0.5, done=False, wall_seconds=1.0, throughput=1.0, throughput_unit="r/s",
                     events=events, species=("X",), times=np.zeros(2), mean=np.zeros((2, 1)),
                     std=np.zeros((2, 1)), hist_species=(0,), hist_lo=np.zeros((2, 1), np.int64),
                     hist_width=np.ones((2, 1), np.int64), hist_counts=np.zeros((2, 1, 4), np.int64),
                     realizations=8, reactions_fired=0)
    arrays: dict = {}
    plain = _encode_frame(frame, "f.", arrays)
    assert _decode_frame(plain, arrays).events == events
    plain["fields"]["events"] = {"steering": "- {at: -1, key: x}"}
    with pytest.raises(ConfigError):
        _decode_frame(plain, arrays)
