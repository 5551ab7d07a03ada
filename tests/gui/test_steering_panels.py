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
from tests.gui.test_channel_panel import SHORT_PROTOCOL  # noqa: E402
from tests.sims.common.steering_runs import assert_same_arrays as same_arrays  # noqa: E402

pytestmark = pytest.mark.gui


def assert_same_arrays(a: dict, b: dict) -> None:
    """Every result array bit for bit; wall clocks (any key naming 'wall') aside."""
    same_arrays({k: v for k, v in a.items() if "wall" not in k}, {k: v for k, v in b.items() if "wall" not in k})


def hold_at(panel, qtbot, condition) -> None:
    """Let the panel's run go until ``condition(frame)`` holds, then hold it between two slices."""
    session = panel.worker.session
    session.pause_when(condition)
    if session.paused:
        panel.resume_run()
    qtbot.waitUntil(lambda: session.holding and condition(session.last_frame), timeout=60000)
    session.pause_when(None)
    qtbot.waitUntil(lambda: panel.worker.frames_published >= 1, timeout=60000)    # as a user sees it


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


def birth_death(window, realizations: int, t_end: float, samples: int):
    """The SSA panel on the NumPy engine with the birth-death preset of that ensemble."""
    ssa = window.select_panel("ssa")
    ssa.backend.setCurrentIndex(ssa.backend.findData("cpu-reference"))
    assert window.open_config(PRESETS / "ssa" / "birth-death.yaml")
    ssa.realizations.setValue(realizations)
    ssa.t_end.setValue(t_end)
    ssa.samples.setValue(samples)
    return ssa


def test_ssa_a_rate_slider_moves_the_mean_to_its_new_law_and_the_run_replays(window, qtbot, tmp_path,
                                                                             shown_errors):
    """Birth-death from X(0) = 0: the count is Poisson at every time with mean m' = k - g m
    (exact for this linear network), so after k -> k' at t_a the mean at t_end is
    k'/g + (m(t_a) - k'/g) exp(-g (t_end - t_a)); the ensemble mean of R realizations lies
    within 5 standard errors sqrt(m / R) of it (two-sided false alarm 6e-7)."""
    ssa = birth_death(window, realizations=400, t_end=30.0, samples=31)
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
    ssa = birth_death(window, realizations=512, t_end=5.0, samples=6)
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
    first = ssa.worker
    ssa.steering.sliders["rates.birth"].set_to(8.0)                     # the run has ended: a move re-runs
    assert ssa.worker is not first and ssa.running
    with qtbot.waitSignal(ssa.worker.run_finished, timeout=180000):
        pass
    assert [(e.key, e.at) for e in ssa.worker.session.events] == [("mode", 0), ("rates.birth", 0)]
    k = ssa.worker.session.events[1].value
    expected = k / 0.2 * (1 - math.exp(-0.2 * 5.0))
    assert abs(ssa.last_frame.mean[-1, 0] - expected) < 5 * math.sqrt(expected / 512)


SETTLE_STEPS = 500       # 50 ms: the longest delay (4.8 ms), then the synaptic currents (3-6 ms) decay


def open_text(panel, tmp_path, cfg, name: str) -> None:
    """Open ``cfg`` in ``panel`` from a YAML file, as File > Open does."""
    from app.sims.common.config import dump_yaml

    path = tmp_path / f"{name}.yaml"
    path.write_text(dump_yaml(cfg))
    panel.load_config(path)


def test_network_blocking_excitatory_synapses_silences_the_driven_neurons_and_replays(window, qtbot, tmp_path,
                                                                                    shown_errors):
    """A 10 x 10 culture whose circles overlap from the start (tests/sims/network): the
    non-starter neurons fire only through their excitatory input (alone they sit at 13.5 mV,
    below the 15 mV threshold), so with the EE and EI sliders at 0 none of them fires once the
    deliveries in flight (48 steps, the longest delay) have landed and the synaptic currents
    they started have decayed (:data:`SETTLE_STEPS` in all); the brush's stimulus is an event
    too."""
    from app.sims.network.model import build_culture
    from tests.sims.network.test_steering import bursting

    _, cfg = bursting(epochs=1)
    network = window.select_panel("network")
    network.backend.setCurrentIndex(network.backend.findData("cpu-reference"))
    open_text(network, tmp_path, cfg, "culture")
    assert {"scale.EE", "scale.EI"} <= set(network.steering.sliders)
    assert network.steering.sliders["scale.EE"].knob.lo == 0.0          # a linear slider reaches 0
    assert network.start_run()
    hold_at(network, qtbot, lambda frame: (np.asarray(frame.rate)[~np.asarray(frame.starter)] > 0).any())
    network.brush.choose("stimulate", radius=1.5)
    assert network.paint((5.0, 5.0))                                    # a click on the culture
    network.steering.sliders["scale.EE"].set_to(0.0)
    network.steering.sliders["scale.EI"].set_to(0.0)
    finish(network, qtbot)
    assert not shown_errors
    session = network.worker.session
    assert [(e.key, e.value) for e in session.events] == [("stimulate", None), ("scale.EE", 0.0), ("scale.EI", 0.0)]
    step = session.events[-1].at + SETTLE_STEPS
    culture = build_culture(session.cfg)
    times, neurons = session.arrays["spike_times"], session.arrays["spike_neurons"]
    driven_before = (~culture.starter[neurons[times < session.events[0].at * cfg.run.dt]]).sum()
    driven_after = (~culture.starter[neurons[times >= (step + 1) * cfg.run.dt]]).sum()
    assert driven_before > 0 and driven_after == 0
    assert len(network.event_marks[0].positions) == 3                   # on the raster's time axis
    assert_same_arrays(session.arrays, replayed(network, tmp_path, "cpu-reference").arrays)


def test_cardiac_a_scar_painted_before_run_stops_activation_and_the_run_replays(window, qtbot, tmp_path,
                                                                              shown_errors):
    """A 6 x 6 mm sheet whose configured stimulus never fires: a scar painted on one corner
    before Run (applied at step 0) and a stimulus clicked on the other corner during the run;
    the wave activates every cell between them and none in the scar (tests/sims/cardiac)."""
    from tests.sims.cardiac.test_steering import distance, quiet_sheet

    _, cfg = quiet_sheet()
    cardiac = window.select_panel("cardiac")
    cardiac.backend.setCurrentIndex(cardiac.backend.findData("cpu-reference"))
    open_text(cardiac, tmp_path, cfg, "sheet")
    qtbot.waitUntil(lambda: cardiac.mesh is not None and len(cardiac.mesh.positions) == 225, timeout=60000)
    cardiac.tissue.click_action.setCurrentIndex(cardiac.tissue.click_action.findData("paint"))
    cardiac.brush.choose("ablate", radius=1.6)
    far_cell = int(np.argmin(distance(cfg, 5.6)))
    cardiac.tissue.cell_clicked.emit(far_cell)                          # painted at rest: from step 0
    assert [p[0] for p in cardiac.pending_steering] == ["ablate"]
    assert cardiac.start_run()
    hold_at(cardiac, qtbot, lambda frame: frame.t >= 2.0)
    cardiac.tissue.click_action.setCurrentIndex(cardiac.tissue.click_action.findData("stimulate"))
    cardiac.tissue.cell_clicked.emit(0)                                 # the corner at (0, 0)
    finish(cardiac, qtbot)
    assert not shown_errors
    session = cardiac.worker.session
    assert [e.key for e in session.events] == ["ablate", "stimulate"] and session.events[0].at == 0
    act = session.arrays["activation_time"]
    scar = distance(cfg, 5.6) <= 1.5
    between = (distance(cfg, 5.6) > 1.8) & (distance(cfg, 0.0) > 1.5)
    assert not np.isfinite(act[scar]).any() and np.isfinite(act[between]).all()
    assert cardiac.event_marks[0].positions == [0.0, pytest.approx(session.events[1].at * cfg.solver.dt)]
    assert_same_arrays(session.arrays, replayed(cardiac, tmp_path, "cpu-reference").arrays)


def test_channel_ga_settings_edited_during_the_fit_steer_it_and_replay(window, qtbot, tmp_path, shown_errors):
    """The GA form's fields steer the running fit (no pause needed): a new mutation rate from
    the next generation, fewer generations end the fit there, and a parameter held at a value
    (steering box: Set) is that value in the best individual (the short protocol of
    tests/gui/test_channel_panel.py, a population of 32)."""
    channel = window.select_panel("channel")
    channel.backend.setCurrentIndex(channel.backend.findData("cpu-reference"))
    (tmp_path / "short.yaml").write_text(SHORT_PROTOCOL)
    channel.set_protocol_file(tmp_path / "short.yaml")
    channel.population.setValue(32)
    channel.generations.setValue(1_000_000)
    assert channel.start_run()
    hold_at(channel, qtbot, lambda frame: frame.generation >= 3)
    at = channel.worker.session.last_frame.generation
    channel.mutation.setValue(0.02)
    channel.generations.setValue(at + 4)
    name = channel.worker.session.last_frame.param_names[0]
    held = channel.steering.values[f"fixed.{name}"].value()       # the middle of its range
    channel.steering.buttons[f"fixed.{name}"].click()              # Set: the GA holds it there
    finish(channel, qtbot)
    assert not shown_errors
    session = channel.worker.session
    old_mutation = session.cfg.ga.mutation
    assert [(e.key, e.value, e.old) for e in session.events][:2] == [("ga.mutation", 0.02, old_mutation),
                                                                     ("ga.generations", at + 4, 1_000_000)]
    assert (session.events[2].key, session.events[2].value) == (f"fixed.{name}", held)
    assert channel.last_frame.generation == at + 4
    assert channel.last_frame.best_params[0] == pytest.approx(held, rel=1e-6)
    assert channel.event_marks[0].positions == [pytest.approx(session.events[0].t)] * 3
    assert_same_arrays(session.arrays, replayed(channel, tmp_path, "cpu-reference").arrays)


def test_epidermis_a_wound_clicked_on_the_3d_view_closes_and_the_run_replays(window, qtbot, tmp_path,
                                                                           shown_errors):
    """36 cells dividing every few tens of steps (tests/sims/epidermis): a click on the 3D view
    with the wound brush removes every cell whose centre lies in the disc; 100 steps later
    cells have moved and divided into it."""
    from tests.sims.epidermis.test_steering import WOUND_RADIUS, tissue

    _, cfg = tissue(steps=140)
    epidermis = window.select_panel("epidermis")
    epidermis.backend.setCurrentIndex(epidermis.backend.findData("cpu-reference"))
    open_text(epidermis, tmp_path, cfg, "tissue")
    assert epidermis.start_run()
    hold_at(epidermis, qtbot, lambda frame: frame.step >= 20)
    view = epidermis.tissue
    qtbot.waitUntil(lambda: view.frame is not None and view.frame.step >= 20, timeout=30000)
    view.redraw()
    box = epidermis.worker.session.last_frame.box
    centres = np.asarray(view.frame.centres)
    target = centres[np.argmin(np.hypot(*(centres[:, :2] - box / 2).T))]
    mapped = view.markers.get_transform("visual", "canvas").map(target[None].astype(np.float32))[0]
    picked = view.pick(mapped[0] / mapped[3], mapped[1] / mapped[3])      # the click's cell
    assert picked is not None and np.allclose(picked, target, atol=1e-4)
    epidermis.brush.choose("wound", radius=WOUND_RADIUS)
    view.point_picked.emit(picked)
    hold_at(epidermis, qtbot, lambda frame: len(frame.events) == 1)
    (event,) = epidermis.worker.session.events
    assert event.key == "wound" and event.region["radius"] == WOUND_RADIUS
    inside = lambda frame: int((np.hypot(*(np.asarray(frame.centres)[:, :2] - picked[:2]).T)   # noqa: E731
                                < WOUND_RADIUS).sum())
    assert inside(epidermis.worker.session.last_frame) == 0
    finish(epidermis, qtbot)
    assert not shown_errors
    assert inside(epidermis.last_frame) > 0                              # the wound closes
    assert_same_arrays(epidermis.worker.session.arrays, replayed(epidermis, tmp_path, "cpu-reference").arrays)


def test_cardiac_the_brush_paints_on_the_sphere_at_the_clicked_cell(window, qtbot, tmp_path, shown_errors):
    """A click on the sphere (its picked vertex) with the brush paints a 3-D disc centred on
    that cell, before Run: the step-0 gesture of the next run."""
    from dataclasses import replace

    from tests.sims.cardiac.test_steering import quiet_sheet

    _, cfg = quiet_sheet()
    cfg = replace(cfg, mesh=replace(cfg.mesh, kind="sphere", level=2), protocol=replace(cfg.protocol, stimuli=[]),
                  output=replace(cfg.output, probe_cells=[0]))
    cardiac = window.select_panel("cardiac")
    open_text(cardiac, tmp_path, cfg, "sphere")
    qtbot.waitUntil(lambda: cardiac.mesh is not None and cardiac.mesh.kind == "sphere", timeout=60000)
    cardiac.tissue.click_action.setCurrentIndex(cardiac.tissue.click_action.findData("paint"))
    cardiac.brush.choose("ablate", radius=2.0)
    cardiac.tissue.sphere.cell_clicked.emit(7)                       # what a click on vertex 7 sends
    ((key, value, region),) = cardiac.pending_steering
    assert (key, value) == ("ablate", None) and region["radius"] == 2.0
    assert np.allclose(region["centre"], cardiac.mesh.positions[7]) and len(region["centre"]) == 3
    assert not shown_errors


def drag(canvas, points) -> None:
    """A left-button drag through canvas pixel ``points``, as vispy delivers one."""
    press = canvas.events.mouse_press(pos=np.asarray(points[0], float), button=1, buttons=[1], modifiers=())
    for p in points[1:]:
        canvas.events.mouse_move(pos=np.asarray(p, float), button=1, buttons=[1], modifiers=(),
                                 press_event=press)
    canvas.events.mouse_release(pos=np.asarray(points[-1], float), button=1, buttons=[], modifiers=())


def test_cardiac_a_drag_over_the_sphere_paints_a_stroke_and_the_run_replays(window, qtbot, tmp_path,
                                                                           shown_errors):
    """Painting, a drag over the sphere's front sends a dab every millimetre along the surface
    (the camera stays); choosing probes instead, the same drag turns the camera and paints
    nothing. The stroke (a factor of the configured ACh) runs from step 0 and replays."""
    from dataclasses import replace

    from tests.sims.cardiac.test_steering import ACH, quiet_sheet

    _, cfg = quiet_sheet(t_end=3.0, paintable=True)
    cfg = replace(cfg, mesh=replace(cfg.mesh, kind="sphere", level=2), protocol=replace(cfg.protocol, stimuli=[]),
                  output=replace(cfg.output, probe_cells=[0]))
    cardiac = window.select_panel("cardiac")
    cardiac.backend.setCurrentIndex(cardiac.backend.findData("cpu-reference"))
    open_text(cardiac, tmp_path, cfg, "sphere")
    qtbot.waitUntil(lambda: cardiac.mesh is not None and cardiac.mesh.kind == "sphere", timeout=60000)
    sphere = cardiac.tissue.sphere
    xyz = sphere.screen_positions()
    front = np.flatnonzero(xyz[:, 2] < np.median(xyz[:, 2]))
    a, b = front[np.argmin(xyz[front, 0])], front[np.argmax(xyz[front, 0])]     # across the front
    path = [xyz[a, :2] + (xyz[b, :2] - xyz[a, :2]) * s for s in np.linspace(0.0, 1.0, 25)]
    camera = sphere.view.camera
    view = (camera.azimuth, camera.elevation)

    cardiac.tissue.click_action.setCurrentIndex(cardiac.tissue.click_action.findData("probe"))
    drag(sphere.canvas, path)
    assert (camera.azimuth, camera.elevation) != view and not cardiac.pending_steering    # it turned
    camera.azimuth, camera.elevation = view
    xyz = sphere.screen_positions()

    cardiac.tissue.click_action.setCurrentIndex(cardiac.tissue.click_action.findData("paint"))
    cardiac.brush.choose(f"scale.{ACH}", radius=0.8)
    assert cardiac.brush.gesture.currentText() == "scale ACh" and cardiac.brush.value.value() == 0.5
    drag(sphere.canvas, path)
    assert (camera.azimuth, camera.elevation) == view and camera.interactive
    dabs = cardiac.pending_steering
    assert len(dabs) >= 3 and {(k, v) for k, v, _ in dabs} == {(f"scale.{ACH}", 0.5)}
    centres = np.array([region["centre"] for _, _, region in dabs])
    assert np.linalg.norm(np.diff(centres, axis=0), axis=1).min() >= sphere.drag_spacing
    ends = [sphere.pick(*xyz[a, :2]), sphere.pick(*xyz[b, :2])]
    assert np.linalg.norm(centres[-1] - cardiac.mesh.positions[ends[1]]) < 2 * sphere.drag_spacing
    assert np.linalg.norm(centres[0] - cardiac.mesh.positions[ends[0]]) < 2 * sphere.drag_spacing

    assert cardiac.start_run()
    finish(cardiac, qtbot)
    assert not shown_errors
    session = cardiac.worker.session
    assert len(session.events) == len(dabs) and {e.at for e in session.events} == {0}
    assert_same_arrays(session.arrays, replayed(cardiac, tmp_path, "cpu-reference").arrays)
