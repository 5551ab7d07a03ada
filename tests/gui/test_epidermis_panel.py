"""The Epidermis-3D panel: presets, run / pause / resume / stop on the CPU engine, a
non-blank vispy render, the cut (clipping) hiding elements, exports read back (NPZ, CSV,
PLY, VTK, PNG, MP4)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("PySide6", reason="the GUI extra is not installed")
pytest.importorskip("vispy", reason="vispy is not installed")
from PySide6.QtCore import Qt
from PySide6.QtGui import QImage

from app.gui.mesh_export import read_ply
from app.gui.runner import RunState
from app.sims.common.simulation import PRESETS

pytestmark = pytest.mark.gui

SMALL = PRESETS / "epidermis" / "small-cpu-demo.yaml"


@pytest.fixture
def epidermis(window):
    panel = window.select_panel("epidermis")
    panel.backend.setCurrentIndex(panel.backend.findData("cpu"))
    yield panel
    panel.shutdown()              # join the worker and release the GL canvas now


def _tiny(panel, steps: int) -> None:
    """4 cells (a 2x2 lattice, no boundary), full model, a slice every few steps."""
    panel.load_config(SMALL)
    panel.cells.setValue(4)
    panel.boundary.setCurrentText("none")
    panel.relax.setValue(20)
    panel.steps.setValue(steps)
    panel.slice_steps.setValue(20)
    panel.history_every.setValue(20)


def _non_background(image: np.ndarray, background) -> float:
    bg = (np.array(background[:3]) * 255).round()
    return float((np.abs(image[..., :3].astype(int) - bg).sum(axis=2) > 6).mean())


def test_default_and_small_presets_load(epidermis):
    names = [epidermis.preset_combo.itemText(i) for i in range(epidermis.preset_combo.count())]
    assert "00-full-100-cells" in names and "small-cpu-demo" in names
    assert epidermis.base_cfg is not None and epidermis.cells.value() == epidermis.base_cfg.tissue.cells
    epidermis.load_config(SMALL)
    cfg = epidermis.current_config()
    assert cfg.tissue.cells == 16 and cfg.run.mode == "full" and cfg.growth.interval == 200
    assert "4×4 lattice" in epidermis.tissue_label.text()
    epidermis.mode.setCurrentText("movement")
    epidermis.U0.setValue(3.0)
    cfg = epidermis.current_config()
    assert cfg.run.mode == "movement" and cfg.mechanics.intra.U0 == 3.0


def test_run_pause_resume_stop_render_and_cut(epidermis, window, qtbot):
    _tiny(epidermis, steps=200_000)
    assert epidermis.start_run()
    worker = epidermis.worker
    qtbot.waitUntil(lambda: worker.frames_published >= 2, timeout=30000)
    qtbot.mouseClick(epidermis.run_controls.pause_button, Qt.MouseButton.LeftButton)
    assert worker.paused and epidermis.run_controls.state is RunState.PAUSED
    # the slice in flight landed and its frame was published (however slow the machine)
    qtbot.waitUntil(lambda: worker.session.holding and not worker.pending, timeout=30000)
    frames = worker.frames_published
    qtbot.wait(300)
    assert worker.frames_published == frames, "frames arrived while paused"
    qtbot.mouseClick(epidermis.run_controls.pause_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: worker.frames_published > frames, timeout=30000)
    with qtbot.waitSignal(worker.run_finished, timeout=30000):
        qtbot.mouseClick(epidermis.run_controls.stop_button, Qt.MouseButton.LeftButton)
    assert epidermis.run_controls.state is RunState.FINISHED
    frame = epidermis.last_frame
    assert not frame.done and frame.step > 0 and frame.cells >= 4
    assert "steps/s" in window.throughput_label.text()
    assert epidermis.history.has_data()
    assert f"step {frame.step:,}" in epidermis.tissue.readout.text()

    view = epidermis.tissue
    qtbot.waitUntil(lambda: view.frame is frame and view.visible_count == frame.elements, timeout=5000)
    image = view.render()
    assert image.ndim == 3 and image.shape[2] == 4
    assert len(np.unique(image[..., :3].reshape(-1, 3), axis=0)) > 20     # shaded spheres, plane
    assert _non_background(image, view.canvas.bgcolor.rgba) > 0.02
    red = (image[..., 0] > 150) & (image[..., 1] < 90) & (image[..., 2] < 90)
    assert red.any() or (frame.element_colour != 0).all()               # C1 elements drawn red

    all_shown = view.visible_count
    view.axis_combo.setCurrentText("z")
    view.cut_slider.setValue(300)                 # keep the lower 30 % in z
    assert 0 < view.visible_count < all_shown
    assert view.cut_label.text().startswith("z ≤")
    view.cut_slider.setValue(view.cut_slider.maximum())
    assert view.visible_count == all_shown and view.cut_label.text() == "no cut"


def test_run_to_end_records_and_exports(epidermis, run_to_end, tmp_path):
    _tiny(epidermis, steps=400)
    epidermis.record_frames.setChecked(True)
    movie = epidermis.record_movie.isEnabled()
    epidermis.record_movie.setChecked(movie)
    run_to_end(epidermis, timeout_ms=30000)
    frame = epidermis.last_frame
    assert frame.done and frame.step == 400 and frame.elements == len(frame.positions)
    assert len(epidermis.recorder) >= 1

    npz, csv, ply, vtk, png3d, png = (tmp_path / n for n in ("f.npz", "h.csv", "c.ply", "c.vtk", "v.png",
                                                            "views.png"))
    for kind, path in (("npz", npz), ("csv", csv), ("ply", ply), ("vtk", vtk), ("png3d", png3d),
                       ("png", png)):
        epidermis.export(kind, path)
        assert path.stat().st_size > 0
    with np.load(npz) as data:
        assert data["positions"].shape == (frame.elements, 3)
        assert data["cell_state"].shape == (frame.cells, 6)
        assert np.array_equal(data["element_cell"], frame.element_cell)
        assert data["history_cells"].size == data["history_t"].size > 0
        offsets = data["frames_element_offsets"]
        assert offsets.size == data["frames_step"].size + 1 == len(epidermis.recorder) + 1
        assert offsets[-1] == len(data["frames_positions"]) == len(data["frames_element_colour"])
        assert data["frames_step"][-1] == 400
        last = data["frames_positions"][offsets[-2]:offsets[-1]]
        assert np.allclose(last, frame.positions)
    header = open(csv).readline().strip().split(",")
    assert header[:4] == ["step", "t", "cells", "layers"]
    assert np.loadtxt(csv, delimiter=",", skiprows=1, ndmin=2).shape[1] == len(header)
    xyz, cols = read_ply(ply)
    assert np.allclose(xyz, frame.positions, atol=1e-4)
    assert np.array_equal(cols["cell"], frame.element_cell) and np.array_equal(cols["colour"], frame.element_colour)
    text = vtk.read_text()
    n = frame.elements
    assert f"POINTS {n} double" in text and f"VERTICES {n} {2 * n}" in text and "SCALARS colour int 1" in text
    for path in (png3d, png):
        image = QImage(str(path))
        assert image.width() > 100 and image.height() > 100

    assert movie, "imageio-ffmpeg (the gui extra) is missing: no MP4"
    import imageio.v3 as iio
    mp4 = epidermis.export("mp4", tmp_path / "run.mp4")
    assert mp4.stat().st_size > 0 and epidermis.movie.frames >= 1
    first = iio.imread(mp4, index=0, plugin="FFMPEG")
    assert first.ndim == 3 and first.shape[0] > 50


def test_settings_changed_during_a_run_are_steering_events(epidermis, qtbot, shown_errors):
    _tiny(epidermis, steps=200_000)
    assert epidermis.start_run()
    worker = epidermis.worker
    qtbot.waitUntil(lambda: worker.frames_published >= 1, timeout=30000)
    worker.session.pause_when(lambda frame: True)       # hold the run between two slices
    qtbot.waitUntil(lambda: worker.session.holding, timeout=30000)

    with qtbot.waitSignal(epidermis.status_changed, check_params_cb=lambda text: "tissue.cells" in text):
        epidermis.cells.setValue(9)              # fixed for a run: the next run's (no event)
    assert not shown_errors and worker.session.events == ()
    epidermis.interval.setValue(123)
    epidermis.delta_low.setValue(0.25)
    seen = []
    worker.session.request(lambda sim: seen.append((sim.cfg.growth.interval, sim.cfg.growth.delta_low)))
    worker.session.pause_when(None)
    epidermis.resume_run()
    qtbot.waitUntil(lambda: bool(seen), timeout=30000)
    assert seen[0] == (123, 0.25)
    events = worker.session.events
    assert [(e.key, e.value) for e in events] == [("growth.interval", 123), ("growth.delta_low", 0.25)]
    assert len({e.at for e in events}) == 1 and not shown_errors
    with qtbot.waitSignal(worker.run_finished, timeout=30000):
        epidermis.stop_run()


def test_the_camera_follows_a_growing_tissue_until_moved(epidermis, short_run, qtbot):
    """A tissue growing a layer stays in view; once the user turns the camera, it stays put."""
    from dataclasses import replace

    _, frame = short_run("epidermis")
    view = epidermis.tissue
    if not view.ensure_canvas():
        pytest.skip("no OpenGL canvas here")

    def grown(factor: float):
        pos = np.array(frame.positions, dtype=float)
        pos[:, 2] = pos[:, 2] * factor + 1.0
        return replace(frame, positions=pos.astype(np.asarray(frame.positions).dtype))

    view.clear()
    view.frame = grown(1.0)
    view.redraw()
    framed = view.view.camera.scale_factor
    view.frame = grown(3.0)
    view.redraw()
    assert view.view.camera.scale_factor > framed           # refitted to the taller tissue
    view.view.camera.azimuth = 10.0                         # the user turns it
    moved = view.view.camera.get_state()
    view.frame = grown(9.0)
    view.redraw()
    assert view.view.camera.get_state() == moved
