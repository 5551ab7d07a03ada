"""The channel-fitting panel: runs on the CPU engine with live views, pause / change GA
settings / resume, the model editor's validation, the parameter table, and the exports."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

pytest.importorskip("PySide6", reason="the GUI extra is not installed")
from PySide6.QtCore import Qt
from PySide6.QtGui import QImage

from app.gui.runner import RunState
from app.sims.channel.data import load_csv
from app.sims.channel.protocol import compile_protocols
from app.sims.common.simulation import load_run_config

pytestmark = pytest.mark.gui

# 3 activation + 2 tail sweeps of 20 samples: 100 points, a few ms per generation on the CPU.
SHORT_PROTOCOL = """\
protocols:
  - name: act
    holding: -100
    dt: 0.5
    segments:
      - {voltage: step, duration: 10, record: true}
    steps: {start: -40, stop: 20, increment: 30}
  - name: tail
    holding: -100
    dt: 0.5
    segments:
      - {voltage: 40, duration: 5}
      - {voltage: step, duration: 10, record: true}
    step_list: [-80, -40]
"""


@pytest.fixture
def channel(window, tmp_path):
    """The channel panel on the CPU engine with the short protocol and a tiny population."""
    panel = window.select_panel("channel")
    assert panel.base_cfg is not None and panel.model_editor.valid
    panel.backend.setCurrentIndex(panel.backend.findData("cpu"))
    path = tmp_path / "short.yaml"
    path.write_text(SHORT_PROTOCOL)
    panel.set_protocol_file(path)
    assert "5 sweeps, 100 fitted points" in panel.protocol_info.text()
    panel.population.setValue(32)
    panel.generations.setValue(5)
    return panel


def click(qtbot, button) -> None:
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)


def test_run_pause_change_crossover_resume_stop(channel, window, qtbot):
    channel.generations.setValue(1_000_000)         # runs until stopped
    assert channel.start_run()
    worker = channel.worker
    assert not channel.population.isEnabled() and not channel.ga_seed.isEnabled()
    qtbot.waitUntil(lambda: worker.frames_published >= 2, timeout=30000)

    click(qtbot, channel.run_controls.pause_button)
    assert worker.paused and channel.run_controls.pause_button.text() == "Resume"
    channel.crossover.setValue(0.35)
    channel.mutation.setValue(0.02)
    seen = []
    worker.session.request(lambda sim: seen.append(sim.settings))   # runs after the update
    qtbot.wait(100)
    assert not seen, "the paused GA ran a request"
    click(qtbot, channel.run_controls.pause_button)                   # Resume
    assert channel.run_controls.state is RunState.RUNNING
    qtbot.waitUntil(lambda: bool(seen), timeout=30000)
    assert seen[0].crossover == 0.35 and seen[0].mutation == 0.02
    assert seen[0].population == 32
    frames = worker.frames_published
    qtbot.waitUntil(lambda: worker.frames_published > frames, timeout=30000)
    with qtbot.waitSignal(worker.run_finished, timeout=30000):
        click(qtbot, channel.run_controls.stop_button)
    assert channel.run_controls.state is RunState.FINISHED
    # population and seed come back when the worker's thread has ended (QThread.finished, a
    # moment after run_finished)
    qtbot.waitUntil(channel.population.isEnabled, timeout=5000)
    assert channel.population.isEnabled() and channel.run_controls.run_button.isEnabled()

    frame = channel.last_frame
    assert frame.generation >= 2 and not frame.done
    x, y = channel.convergence.best.getData()
    assert len(x) == frame.generation + 1 and (y > 0).all()
    assert len(channel.convergence.median.getData()[1]) == len(x)
    channel.convergence.wall_toggle.setChecked(True)              # x becomes wall seconds
    xw, _ = channel.convergence.best.getData()
    assert np.allclose(xw, frame.history_wall)
    assert len(channel.parameters.curves) == 9
    px, py = channel.parameters.curves[0].getData()
    assert len(px) == len(x) and ((py >= 0) & (py <= 1)).all()
    assert len(channel.fit.fit_curves) == 5
    fx, fy = channel.fit.fit_data(4)
    assert len(fx) == 20 and np.allclose(fx, np.arange(1, 21) * 0.5 + 5.0)
    dx, _ = channel.fit.data_curve.getData()
    assert np.isfinite(dx).sum() == 100
    status = window.throughput_label.text()
    assert "generations/s" in status and "evaluations/s" in status


def test_finished_run_exports_and_screenshot(channel, window, tmp_path, run_to_end):
    run_to_end(channel)
    frame = channel.last_frame
    assert frame.done and frame.generation == 5 and channel.run_controls.progress.value() == 1000

    params, traces, history = tmp_path / "best.yaml", tmp_path / "fit.csv", tmp_path / "conv.csv"
    channel.export_best_parameters(params)
    channel.export_traces(traces)
    channel.export_history(history)
    best = yaml.safe_load(params.read_text())
    assert list(best) == list(frame.param_names)
    assert np.allclose([best[n] for n in frame.param_names], frame.best_params, rtol=1e-9)
    assert f"{frame.best_chi2:.6g}"[:5] in params.read_text()
    assert traces.read_text().splitlines()[0] == "t_ms,sweep1,sweep2,sweep3,sweep4,sweep5"
    protocol = compile_protocols(channel.run_cfg.protocols)
    assert np.allclose(load_csv(traces, protocol), frame.best_traces, rtol=1e-6, atol=1e-9)
    assert history.read_text().splitlines()[0] == "generation,best_chi2,median_chi2,wall_seconds"
    table = np.loadtxt(history, delimiter=",", skiprows=1)
    assert table.shape == (6, 4) and list(table[:, 0]) == [0, 1, 2, 3, 4, 5]
    assert np.allclose(table[:, 1], frame.history_best) and np.allclose(table[:, 2], frame.history_median)
    assert (np.diff(table[:, 3]) >= 0).all()

    npz, png = tmp_path / "out.npz", tmp_path / "views.png"
    assert window.export_data(npz) and window.save_screenshot(png)
    with np.load(npz) as data:
        assert data["history_best_chi2"].shape == (6,) and data["best_traces"].shape == (100,)
        assert list(data["param_names"]) == list(frame.param_names)
    image = QImage(str(png))
    assert not image.isNull() and image.width() > 100 and image.height() > 100
    rgb = image.convertToFormat(QImage.Format.Format_RGB32)   # keep it alive while reading its bits
    pixels = np.frombuffer(rgb.constBits(), np.uint32)
    assert len(np.unique(pixels)) > 10, "screenshot is one colour"


def test_invalid_rate_expression_is_explained_and_blocks_run(channel, window, qtbot, shown_errors):
    editor = channel.model_editor
    good = editor.text()
    assert "k12 = a12*exp(z12*v)" in good
    editor.editor.setPlainText(good.replace("k12 = a12*exp(z12*v)", "k12 = a12*exp(z12*v);}"))
    assert editor.valid                              # the check waits for the debounce
    qtbot.waitUntil(lambda: not editor.valid, timeout=3000)
    message = editor.message.text()
    assert "rate k12" in message and "';'" in message and "position 15" in message
    assert "model-b.yaml:19" in message and "a12*exp(z12*v);}" in message
    assert "^" in message and "#b00020" in editor.message.styleSheet()
    assert not channel.run_controls.run_button.isEnabled()
    assert not channel.start_run()
    assert "rate k12" in shown_errors[-1][1]
    assert window.isVisible() and channel.worker is None
    window.select_panel("ssa")
    window.select_panel("channel")

    editor.editor.setPlainText(good)
    qtbot.waitUntil(lambda: editor.valid, timeout=3000)
    assert editor.message.text().startswith("valid: 3 states, 9 parameters")
    assert channel.run_controls.run_button.isEnabled()


def test_yaml_errors_name_the_line(channel, qtbot):
    editor = channel.model_editor
    editor.editor.setPlainText(editor.text().replace("open_states: [O]", "open_states: [X]"))
    qtbot.waitUntil(lambda: not editor.valid, timeout=3000)
    assert "model-b.yaml:5: open_states: open states must name states" in editor.message.text()
    editor.editor.setPlainText("states: [A, B\n")
    qtbot.waitUntil(lambda: "YAML syntax error" in editor.message.text(), timeout=3000)


def test_parameter_table_writes_back_into_the_model(channel, window, tmp_path):
    table, editor = channel.table, channel.model_editor
    table.set_value("gmax", "True value", "4.5")
    table.set_value("a12", "Max", "2")
    assert "{name: gmax, min: 0, max: 10, value: 4.5}" in editor.text()
    assert editor.text().startswith("# Model B")     # comments outside the block are kept
    cfg = channel.current_config()
    by_name = {p.name: p for p in cfg.model.parameters}
    assert by_name["gmax"].value == 4.5 and by_name["a12"].max == 2.0

    table.set_value("z12", "Min", "3")               # min > max
    assert "z12: need min < max" in channel.table_problem.text()
    assert not channel.run_controls.run_button.isEnabled()
    table.set_value("z12", "Min", "0")
    assert channel.table_problem.text() == "" and channel.run_controls.run_button.isEnabled()

    channel.crossover.setValue(0.2)
    path = tmp_path / "run.yaml"
    assert window.save_config(path)
    _, saved = load_run_config(path)
    assert saved == channel.current_config() and saved.ga.crossover == 0.2
    assert {p.name: p for p in saved.model.parameters}["gmax"].value == 4.5


def test_export_before_a_run_is_an_error_not_a_crash(channel, window, shown_errors, tmp_path):
    assert not window.export_data(tmp_path / "x.yaml")
    assert "run the fit first" in shown_errors[-1][1]


def test_cmaes_refinement_intervals_mcmc_and_model_exports(channel, window, tmp_path, run_to_end):
    """CMA-ES then Levenberg-Marquardt, intervals and a short MCMC from the panel: the
    convergence view marks each phase, the uncertainty tab fills, the model exports."""
    channel.optimizer.setCurrentIndex(channel.optimizer.findData("cmaes"))
    channel.refine.setCurrentIndex(channel.refine.findData("lm"))
    channel.population.setValue(16)
    channel.generations.setValue(10)
    channel.refine_iterations.setValue(5)
    channel.intervals_on.setChecked(True)
    channel.mcmc_chains.setValue(16)
    channel.mcmc_steps.setValue(20)
    run_to_end(channel, 60000)
    frame = channel.last_frame
    assert frame.done and frame.intervals is not None
    assert channel.convergence.phase_labels() == ["cmaes", "lm", "mcmc"]
    assert channel.uncertainty.table.rowCount() == len(frame.param_names)
    assert channel.uncertainty.table.item(0, 0).text() == frame.param_names[0]
    p = len(frame.param_names)
    channel.bottom_tabs.setCurrentWidget(channel.uncertainty)     # the corner plot draws when shown
    assert len(channel.uncertainty.corner.panels) == p * (p + 1) // 2
    assert frame.posterior_samples.shape[1] == p
    npz = tmp_path / "all.npz"
    assert window.export_data(npz)
    with np.load(npz) as data:
        assert data["correlation"].shape == (p, p) and data["history_phase"].max() == 4
    mod, mmt, model = tmp_path / "k_fit.mod", tmp_path / "k_fit.mmt", tmp_path / "fitted-model.yaml"
    for path in (mod, mmt, model):
        assert window.export_data(path)
    assert "POINT_PROCESS k_fit" in mod.read_text() and "[[model]]" in mmt.read_text()
    nml, nwb = tmp_path / "k_fit.nml", tmp_path / "fit.nwb"          # NeuroML2 and NWB
    channel.export_model(nml, "neuroml")
    channel.export_nwb(nwb)
    assert '<ionChannelKS id="k_fit"' in nml.read_text() and nwb.stat().st_size > 0
    fitted = yaml.safe_load(model.read_text())
    assert [q["value"] for q in fitted["parameters"]] == pytest.approx(list(frame.best_params))


def test_recordings_preset_fills_the_family_table(window):
    """The shipped per-family recordings preset: the table shows both files, and the config
    the panel builds keeps them (and runs: the fit data load)."""
    from app.sims.common.simulation import PRESETS
    panel = window.select_panel("channel")
    panel.load_config(PRESETS / "channel" / "recordings-two-state-k.yaml")
    assert panel.data_source.currentData() == "recordings" and panel.families.rowCount() == 2
    assert panel.families.item(1, 1).text().endswith("deactivation.abf")
    assert panel.optimizer.currentData() == "cmaes" and panel.refine.currentData() == "lm"
    cfg = panel.current_config()
    assert [f.family for f in cfg.data.families] == ["activation", "deactivation"]
    fit = cfg.fit_data(cfg.model_())
    assert fit.protocol.n_points == 11 * 1500 + 12 * 2786


def test_end_of_run_costs_the_gui_thread_little(window, qtbot, monkeypatch, run_to_end):
    """The default preset (Model B, 9 parameters, 12,500 points) shortened: drawing the last
    frame and handling the run's end take 0.13-0.17 s of GUI-thread CPU, under 0.35 s on a
    shared machine (the corner plot's 45 panels took 0.9-1.2 s on the 2-core VM, with the
    Uncertainty tab not even shown); the corner plot is drawn when its tab is shown and keeps its panels for the next
    run of the same model."""
    import time

    panel = window.select_panel("channel")
    panel.backend.setCurrentIndex(panel.backend.findData("cpu-reference"))
    panel.population.setValue(16)
    panel.generations.setValue(2)
    assert panel.intervals_on.isChecked() and panel.bottom_tabs.currentWidget() is panel.fit
    spent = []

    def timed(handler):
        def run(*args):
            start = time.thread_time()
            handler(*args)
            spent.append(time.thread_time() - start)
        return run

    monkeypatch.setattr(panel, "_frame_ready", timed(panel._frame_ready))
    monkeypatch.setattr(panel, "_run_finished", timed(panel._run_finished))
    run_to_end(panel, 60000)
    start = time.thread_time()
    qtbot.wait(300)                              # the paint of what changed
    end_cpu = spent[-2] + spent[-1] + time.thread_time() - start
    assert panel.last_frame.intervals is not None and len(panel.last_frame.param_names) == 9
    assert end_cpu < 0.35, f"{end_cpu:.3f} s of GUI-thread CPU at the end of the run"

    corner = panel.uncertainty.corner
    assert not corner.panels                     # not drawn while its tab is hidden
    panel.bottom_tabs.setCurrentWidget(panel.uncertainty)
    assert len(corner.panels) == 45 and all(cell.drawn() for cell in corner.panels.values())
    cells = dict(corner.panels)
    items = {key: cell.drawn() for key, cell in cells.items()}
    run_to_end(panel, 60000)                     # the tab shown: drawn at once, same panels and items
    assert corner.panels == cells and {key: cell.drawn() for key, cell in cells.items()} == items
