"""Steering in the panels during a run: each panel's gesture changes the running model, the
change is marked on the plots' time axis, and the config the panel saves replays the steered
run exactly (arrays identical, on the same engine).

Runs are held between two slices with ``Session.pause_when`` while a gesture is made, so the
change lands at a known point of the run whatever the machine's speed; the gesture itself goes
through the same path as during an unpaused run (``Panel.steer`` -> ``Session.steer``).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("PySide6", reason="the GUI extra is not installed")

from app.sims.common.session import Session  # noqa: E402
from app.sims.common.simulation import PRESETS, load_run_config  # noqa: E402

pytestmark = pytest.mark.gui


def hold_at(panel, qtbot, condition) -> None:
    """Let the panel's run go until ``condition(frame)`` holds, then hold it between two slices."""
    panel.worker.session.pause_when(condition)
    qtbot.waitUntil(lambda: panel.worker.session.holding, timeout=60000)
    panel.worker.session.pause_when(None)


def finish(panel, qtbot) -> None:
    with qtbot.waitSignal(panel.worker.run_finished, timeout=180000):   # a hang guard only
        panel.resume_run()


def replayed(panel, tmp_path, backend: str) -> Session:
    """The config File > Save run config writes after the run, run headless on ``backend``."""
    path = panel.save_config(tmp_path / "steered.yaml")
    domain, cfg = load_run_config(path)
    assert cfg.steering == panel.worker.session.events
    session = Session(domain, cfg, backend, handover=False)
    session.run()
    return session


def assert_same_arrays(a: dict, b: dict) -> None:
    assert sorted(a) == sorted(b)
    for key in a:
        np.testing.assert_array_equal(np.asarray(a[key]), np.asarray(b[key]), err_msg=key)


def test_ssa_a_rate_slider_moves_the_mean_to_its_new_law_and_the_run_replays(window, qtbot, tmp_path,
                                                                             shown_errors):
    """Birth-death from X(0) = 0: the count is Poisson at every time with mean m' = k - g m
    (exact for this linear network), so after k -> k' at t_a the mean at t_end is
    k'/g + (m(t_a) - k'/g) exp(-g (t_end - t_a)); the ensemble mean of R realizations lies
    within 5 standard errors sqrt(m / R) of it (two-sided false alarm 6e-7)."""
    ssa = window.select_panel("ssa")
    ssa.backend.setCurrentIndex(ssa.backend.findData("cpu-reference"))
    assert window.open_config(PRESETS / "ssa" / "birth-death.yaml")
    ssa.realizations.setValue(400)
    ssa.t_end.setValue(30.0)
    ssa.samples.setValue(31)
    slider = ssa.steering.sliders["rates.birth"]
    assert slider.knob.logarithmic and slider.knob.lo == pytest.approx(0.1) and slider.knob.hi == pytest.approx(1e3)
    assert ssa.start_run()
    hold_at(ssa, qtbot, lambda frame: frame.times[-1] >= 8.0)
    slider.set_to(30.0)                                      # as a user lets go of the slider
    finish(ssa, qtbot)
    assert not shown_errors
    (event,) = ssa.worker.session.events
    assert event.key == "rates.birth" and event.old == 10.0 and event.value == pytest.approx(30.0, rel=0.01)
    arrays = ssa.worker.session.arrays
    k, g, r = 10.0, 0.2, 400
    t_a = arrays["times"][event.at]
    m_a = k / g * (1 - math.exp(-g * t_a))
    k_new = event.value
    expected = k_new / g + (m_a - k_new / g) * math.exp(-g * (30.0 - t_a))
    assert abs(arrays["mean"][-1, 0] - expected) < 5 * math.sqrt(expected / r)
    assert ssa.event_marks[0].positions == [pytest.approx(t_a)]     # the mark on the time axis
    assert_same_arrays(arrays, replayed(ssa, tmp_path, "cpu-reference").arrays)


def test_ssa_explore_mode_reruns_on_each_move_and_before_run_applies_at_the_start(window, qtbot, shown_errors):
    ssa = window.select_panel("ssa")
    ssa.backend.setCurrentIndex(ssa.backend.findData("cpu-reference"))
    assert window.open_config(PRESETS / "ssa" / "birth-death.yaml")
    ssa.realizations.setValue(512)
    ssa.t_end.setValue(5.0)
    ssa.samples.setValue(6)
    mode = ssa.steering.choices["mode"]
    mode.setCurrentText("explore")
    mode.activated.emit(mode.currentIndex())
    assert all(s.live_drag for s in ssa.steering.sliders.values())     # a drag re-runs as it moves
    assert ssa.pending_steering == [("mode", "explore", None)]          # before Run: from step 0
    assert ssa.start_run()
    hold_at(ssa, qtbot, lambda frame: frame.realizations == 512)
    ssa.steering.sliders["rates.birth"].set_to(4.0)
    finish(ssa, qtbot)
    assert not shown_errors
    assert [e.key for e in ssa.worker.session.events] == ["mode", "rates.birth"]
    assert ssa.worker.session.events[0].at == 0
    assert ssa.last_frame.done and ssa.last_frame.realizations == 512
    # the mean after the re-run is the changed model's from t = 0: k/g (1 - exp(-g t)), k = 4
    mean = ssa.last_frame.mean[-1, 0]
    expected = 4.0 / 0.2 * (1 - math.exp(-0.2 * 5.0))
    assert abs(mean - expected) < 5 * math.sqrt(expected / 512)
