"""The SSA panel: runs on the CPU engine, live views, comparison, configs and exports."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("PySide6", reason="the GUI extra is not installed")
from PySide6.QtGui import QImage

from app.compute.kernels import KernelCompileError
from app.gui.runner import RunState
from app.sims.common.simulation import load_run_config

pytestmark = pytest.mark.gui


def test_run_pause_resume_stop_dimer(ssa, window, qtbot, set_ensemble):
    # dimer, 1.6e9 reactions: about half a minute on the compiled CPU engine of a fast
    # 2-core machine, so pause, resume and stop all land while it runs
    set_ensemble(ssa, realizations=4096, t_end=10.0, samples=11)
    assert ssa.start_run()
    worker = ssa.worker
    assert ssa.run_controls.state is RunState.RUNNING
    assert not ssa.run_controls.run_button.isEnabled()
    qtbot.waitUntil(lambda: worker.frames_published >= 2, timeout=30000)

    qtbot.mouseClick(ssa.run_controls.pause_button, qtbot_button())
    assert worker.paused and ssa.run_controls.pause_button.text() == "Resume"
    qtbot.waitUntil(lambda: worker.session.holding, timeout=30000)   # the slice in flight landed
    qtbot.wait(100)                                 # and was published by the display timer
    frames = worker.frames_published
    qtbot.wait(500)
    assert worker.frames_published == frames, "frames arrived while paused"

    qtbot.mouseClick(ssa.run_controls.pause_button, qtbot_button())
    assert not worker.paused and ssa.run_controls.state is RunState.RUNNING
    qtbot.waitUntil(lambda: worker.frames_published > frames, timeout=30000)
    assert ssa.run_controls.state is RunState.RUNNING, "the run ended before Stop was pressed"
    with qtbot.waitSignal(worker.run_finished, timeout=30000):
        qtbot.mouseClick(ssa.run_controls.stop_button, qtbot_button())
    assert ssa.run_controls.state is RunState.FINISHED
    assert ssa.run_controls.run_button.isEnabled() and ssa.run_controls.reset_button.isEnabled()
    assert not ssa.run_controls.stop_button.isEnabled()

    x, y = ssa.trajectories.curves[0].getData()
    assert x is not None and len(x) >= 1 and np.isfinite(y).all()
    assert len(ssa.trajectories.curves) == 3
    edges, p = ssa.histogram.curve.getData()
    assert len(p) > 0 and p.sum() > 0
    assert "reactions/s" in window.throughput_label.text()
    assert "4096 realizations" in window.throughput_label.text()
    assert not ssa.last_frame.done or ssa.last_frame.times[-1] < 10.0

    ssa.reset()
    assert ssa.run_controls.state is RunState.IDLE and ssa.last_frame is None
    assert ssa.trajectories.curves == []


def qtbot_button():
    from PySide6.QtCore import Qt
    return Qt.MouseButton.LeftButton


def test_finished_run_views_exports_and_screenshot(ssa, window, tmp_path, preset, set_ensemble,
                                                  run_to_end):
    assert window.open_config(preset("birth-death"))
    set_ensemble(ssa, realizations=64, t_end=5.0, samples=11)
    run_to_end(ssa)
    frame = ssa.last_frame
    assert frame.done and len(frame.times) == 11
    assert ssa.histogram.slider.maximum() == 10 and ssa.histogram.index == 10
    ssa.histogram.slider.setValue(3)                # the user picks an earlier time
    assert not ssa.histogram.follow and "t = 1.5" in ssa.histogram.time_label.text()

    npz, csv, png = tmp_path / "out.npz", tmp_path / "out.csv", tmp_path / "views.png"
    assert window.export_data(npz) and window.export_data(csv) and window.save_screenshot(png)
    with np.load(npz) as data:
        for key in ("times", "species", "mean", "std", "final", "hist_species", "hist_lo",
                    "hist_width", "hist_counts"):
            assert key in data.files, key
        assert data["final"].shape == (64, 1)
        assert list(data["hist_species"]) == ["X"]
    table = np.loadtxt(csv, delimiter=",", skiprows=1)
    assert open(csv).readline().strip() == "time,mean_X,std_X"
    assert table.shape == (11, 3) and np.allclose(table[:, 1], frame.mean[:, 0])
    image = QImage(str(png))
    assert not image.isNull() and image.width() > 100 and image.height() > 100
    rgb = image.convertToFormat(QImage.Format.Format_RGB32)   # keep it alive while reading its bits
    pixels = np.frombuffer(rgb.constBits(), np.uint32)
    assert len(np.unique(pixels)) > 10, "screenshot is one colour"


def test_compare_with_saved_run_and_cpu_reference(ssa, window, qtbot, tmp_path, preset,
                                                  set_ensemble, run_to_end):
    assert window.open_config(preset("birth-death"))
    set_ensemble(ssa, realizations=200, t_end=5.0, samples=6)
    run_to_end(ssa)
    saved = tmp_path / "results.npz"
    ssa.export_data(saved)
    ssa.compare_with(saved)                         # the same run: D is exactly 0
    assert ssa.histogram.distance[0] == pytest.approx(0.0)
    assert "D = 0.000 (self-distance" in ssa.histogram.distance_label.text()
    assert "sum|p-q|" in ssa.histogram.distance_label.text()

    assert ssa.start_reference()
    with qtbot.waitSignal(ssa.reference_worker.run_finished, timeout=20000):
        pass
    d, self_d = ssa.histogram.distance
    assert 0 < d < 2 and self_d > 0
    assert ssa.reference_worker.cfg.ensemble.seed != ssa.current_config().ensemble.seed
    assert ssa.reference_worker.cfg.ensemble.realizations == 200
    assert ssa.histogram.ref_curve.isVisible()
    assert "CPU reference" in ssa.histogram.distance_label.text()
    ssa.clear_comparison()
    assert not ssa.histogram.ref_curve.isVisible() and ssa.histogram.distance_label.text() == ""


def test_bad_saved_run_is_reported(ssa, tmp_path, shown_errors):
    bad = tmp_path / "bad.npz"
    np.savez(bad, nothing=np.zeros(3))
    with pytest.raises(ValueError, match="not an SSA results file"):
        ssa.compare_with(bad)


def test_spatial_model_shows_the_heat_map(ssa, window, preset, set_ensemble, run_to_end):
    assert window.open_config(preset("spatial-grid"))
    assert [r.name for r in ssa.table.rows][:2] == ["n", "diffusion"]
    set_ensemble(ssa, realizations=32, t_end=0.5, samples=6)
    run_to_end(ssa)
    assert ssa.heatmap.isVisible()
    image = ssa.heatmap.image_data()
    assert image.shape == (8, 8) and image.max() > 0
    x, y = ssa.trajectories.curves[0].getData()
    assert len(ssa.trajectories.curves) == 1 and len(y) == 6 and y[0] == 100
    ssa.histogram.slider.setValue(0)                # the heat map follows the time slider
    assert ssa.heatmap.index == 0 and ssa.heatmap.image_data().sum() == 100


def test_parameter_table_edits_and_validation(ssa, shown_errors):
    ssa.table.set_value("c1", "2.5")
    ssa.table.set_value("S1", "500")
    cfg = ssa.current_config()
    assert cfg.model.parameters["c1"] == 2.5 and cfg.model.species["S1"] == 500
    ssa.table.set_value("c2", "-1")
    assert "c2" in ssa.table_problem.text()
    ssa.table.set_value("S2", "1.5")
    assert "whole number" in ssa.table_problem.text()
    assert not ssa.start_run()
    assert shown_errors and "c2" in shown_errors[-1][1]
    assert ssa.worker is None and ssa.run_controls.state is RunState.IDLE
    ssa.table.set_value("c2", "0.001")
    ssa.table.set_value("S2", "0")
    assert ssa.table_problem.text() == ""
    assert ssa.current_config().model.parameters["c2"] == 0.001


def test_save_config_round_trip(ssa, window, tmp_path, preset, set_ensemble):
    set_ensemble(ssa, realizations=77, t_end=1.25, samples=26)
    ssa.algorithm.setCurrentText("logdirect")
    ssa.seed.setText("99")
    ssa.table.set_value("c3", "0.75")
    path = tmp_path / "run.yaml"
    assert window.save_config(path)
    _, cfg = load_run_config(path)
    assert cfg == ssa.current_config()
    assert cfg.ensemble.realizations == 77 and cfg.ensemble.algorithm == "logdirect"
    assert cfg.model.parameters["c3"] == 0.75
    assert window.open_config(preset("schlogl"))
    assert window.open_config(path)
    assert ssa.realizations.value() == 77 and ssa.seed.text() == "99"
    assert ssa.current_config() == cfg


def test_worker_errors_reach_the_user(ssa, qtbot, monkeypatch, shown_errors, set_ensemble):
    from app.sims.ssa.simulation import SSASimulation

    def broken(cls, cfg, backend):
        raise KernelCompileError("ssa.cu", "ssa.cu(12): error: expected a ';'")

    monkeypatch.setattr(SSASimulation, "from_config", classmethod(broken))
    set_ensemble(ssa)
    assert ssa.start_run()
    with qtbot.waitSignal(ssa.worker.failed, timeout=30000):
        pass
    title, text, detail = shown_errors[-1]
    assert "failed" in title and "ssa.cu" in text and "expected a ';'" in detail
    assert ssa.run_controls.state is RunState.FINISHED and ssa.run_controls.run_button.isEnabled()


def test_export_before_a_run_is_an_error_not_a_crash(window, shown_errors, tmp_path):
    assert not window.export_data(tmp_path / "x.npz")
    assert "run the simulation first" in shown_errors[-1][1]
