"""The cardiac panel: sheet and sphere runs on the CPU engine, pause / resume / stop, probe
traces, click-to-probe on the sphere, a non-blank vispy render, exports (VTK, PLY, CSV, NPZ)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

pytest.importorskip("PySide6", reason="the GUI extra is not installed")
pytest.importorskip("vispy", reason="vispy is not installed")
from PySide6.QtCore import Qt
from PySide6.QtGui import QImage
from vispy.io import write_png

from app.gui.panels.cardiac_model import QNAME, display_names
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
    panel.t_end.setValue(300.0)       # long enough to click, pause and record during the run
    panel.count.setValue(1)
    panel.random_probes.setValue(3)
    panel.probe_cells.setText("0")


SPHERE = """domain: cardiac
name: small sphere
mesh: {kind: sphere, level: 3}
protocol:
  t_end: 2000
  stimuli: [{name: S1, start: 1, duration: 2, amplitude: -40, region: {kind: cap, center: [0, 0, 1], angle_deg: 45}}]
solver: {method: rlfe, dt: 0.05}
output: {random_probes: 2, dt_save: 0.5}
"""


def _small_sphere(panel, tmp_path) -> None:
    """642 cells; a 45° cap (a 5° cap of a sphere this small is too weak a source to fire)
    starts a wave that activates the whole sphere in about 9 ms."""
    path = tmp_path / "sphere.yaml"
    path.write_text(SPHERE)
    panel.load_config(path)


def test_sheet_run_to_end_views_and_exports(cardiac, window, run_to_end, tmp_path):
    _small_sheet(cardiac)
    run_to_end(cardiac)
    frame = cardiac.last_frame
    assert frame.done and frame.mesh_kind == "sheet" and frame.V.shape == (96,)
    assert cardiac.traces.has_data()
    assert cardiac.tissue.stack.currentWidget() is cardiac.tissue.image_widget
    assert cardiac.tissue.image.image.shape[:2] == (8, 12)
    assert cardiac.tissue.mode.currentData() == "last"     # the last activation when done
    act = cardiac.arrays["activation_time"]
    assert np.isfinite(act[0]) and np.isfinite(act).sum() > 12   # the left edge fired and spread
    np.testing.assert_allclose(cardiac.tissue.maps["repolarisation"],       # the map offered
                               cardiac.arrays["repolarisation_time"])
    cardiac.tissue.show_cores(np.array([[1.0, 0.6, 0.0]]))                   # a rotor core marked
    assert cardiac.tissue.cores.data["x"].tolist() == [1.0] and "1 rotor core" in cardiac.tissue.core_count.text()
    assert "sim ms/s" in window.throughput_label.text()

    csv, npz, vtk, ply, png, cellml = (tmp_path / n for n in ("t.csv", "m.npz", "m.vtk", "m.ply", "v.png", "m.cellml"))
    for kind, path in (("traces", csv), ("maps", npz), ("vtk", vtk), ("ply", ply), ("png", png), ("cellml", cellml)):
        cardiac.export(kind, path)
        assert path.stat().st_size > 0
    assert open(csv).readline().startswith("t_ms,V_cell_0")
    assert b"http://www.cellml.org/cellml/2.0#" in cellml.read_bytes()
    with np.load(npz) as data:
        assert data["activation_time"].shape == data["V"].shape == (96,)
    text = vtk.read_text()
    assert "DATASET POLYDATA" in text and "POINTS 96" in text and "POLYGONS 154" in text
    assert "SCALARS activation_time" in text
    head = ply.read_text().split("end_header")[0]
    assert "element vertex 96" in head and "element face 154" in head


def test_spiral_preset_loads_into_the_controls(cardiac):
    """The S1-S2 teaching demo is in the preset list and its two stimuli reach the run config."""
    index = cardiac.preset_combo.findText("02-sheet-spiral-s1s2")
    assert index >= 0
    cardiac.preset_combo.activated.emit(index)
    assert cardiac.base_cfg.name == "sheet, S1-S2 spiral wave"
    assert cardiac.mesh_kind.currentText() == "sheet" and (cardiac.nx.value(), cardiac.ny.value()) == (400, 400)
    assert "160,000 cells" in cardiac.cells_label.text()
    assert "S1:" in cardiac.stimuli_label.text() and "S2:" in cardiac.stimuli_label.text()
    s1, s2 = cardiac.current_config().protocol.stimuli
    assert s1.region.kind == s2.region.kind == "rect" and s2.start > s1.start + 300


def test_sphere_pause_resume_stop_click_probe_and_render(cardiac, qtbot, tmp_path):
    _small_sphere(cardiac, tmp_path)
    assert cardiac.start_run()
    worker = cardiac.worker
    qtbot.waitUntil(lambda: worker.frames_published >= 2, timeout=30000)
    qtbot.mouseClick(cardiac.run_controls.pause_button, Qt.MouseButton.LeftButton)
    assert worker.paused and cardiac.run_controls.state is RunState.PAUSED
    # the slice in flight landed and its frame was published (however slow the machine)
    qtbot.waitUntil(lambda: worker.session.holding and not worker.pending, timeout=30000)
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
    cardiac.tissue.click_action.setCurrentIndex(cardiac.tissue.click_action.findData("probe"))
    sphere.cell_clicked.emit(picked)
    assert str(picked) in cardiac.probe_cells.text()

    qtbot.mouseClick(cardiac.run_controls.pause_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: worker.frames_published > frames, timeout=30000)
    qtbot.waitUntil(lambda: cardiac.last_frame.t > 12.0, timeout=60000)     # the wave has spread
    with qtbot.waitSignal(worker.run_finished, timeout=30000):
        qtbot.mouseClick(cardiac.run_controls.stop_button, Qt.MouseButton.LeftButton)
    frame = cardiac.last_frame
    assert not frame.done and 12.0 < frame.t < 2000.0 and frame.V.shape == (642,)
    assert cardiac.traces.has_data()
    assert len(cardiac.traces.live[picked][0]) >= 1          # the clicked cell is traced live

    # the screenshot under Xvfb: the sphere coloured by activation time, blue (early, at the
    # stimulated cap) to red (late), is a gradient, not a blank canvas or one flat colour
    act = cardiac.arrays["activation_time"]
    assert np.isfinite(act).all() and np.ptp(act) > 4.0
    cardiac.tissue.show_activation(act)
    assert cardiac.tissue.mode.currentData() == "first"
    image = sphere.render()
    assert image.ndim == 3 and image.shape[2] == 4
    write_png(str(tmp_path / "sphere.png"), image)
    rgb = image[..., :3].astype(int)
    background = (np.array(sphere.canvas.bgcolor.rgba[:3]) * 255).round()
    on_sphere = np.abs(rgb - background).sum(axis=2) > 6
    assert on_sphere.mean() > 0.05
    colours = rgb[on_sphere]
    assert len(np.unique(colours, axis=0)) > 20
    assert ((colours[:, 2] > colours[:, 0] + 60).mean() > 0.02        # bluish: early
            and (colours[:, 0] > colours[:, 2] + 60).mean() > 0.02)   # reddish: late
    png = cardiac.export("png", tmp_path / "panel.png")             # the panel's own screenshot
    assert QImage(str(png)).width() > 100
    cardiac.shutdown()                      # release the GL canvas now, not at interpreter exit


def test_click_and_drag_on_the_sheet_stimulate_during_a_run(cardiac, qtbot, monkeypatch):
    """A click (or drag) on the sheet during a run asks the simulation for a stimulus there;
    the colour bar names V and its unit; a finished run can be replayed."""
    _small_sheet(cardiac)
    cardiac.t_end.setValue(20000.0)          # still running when its first frame is drawn (after 1 s)
    requests = []
    assert cardiac.start_run()
    session = cardiac.worker.session
    original = session.steer
    monkeypatch.setattr(session, "steer", lambda *change: (requests.append(change), original(*change)))
    qtbot.waitUntil(lambda: cardiac.worker.frames_published >= 1, timeout=30000)
    assert cardiac.tissue.click_action.currentData() == "stimulate"
    cardiac.tissue.cell_clicked.emit(50)
    cardiac.tissue.cell_dragged.emit(51)
    positions = cardiac.last_frame.mesh.positions
    assert [(key, region["centre"]) for key, _, region in requests] == [
        ("stimulate", list(positions[50])), ("stimulate", list(positions[51]))]
    assert cardiac.tissue.colour_bar.bar.axis.labelText == "V (mV)"
    qtbot.wait(300)
    cardiac.stop_run()
    qtbot.waitUntil(lambda: not cardiac.running, timeout=60000)
    assert str(50) not in cardiac.probe_cells.text()          # a stimulus, not a probe
    assert [e.key for e in session.events] == ["stimulate", "stimulate"]   # recorded for the replay
    assert cardiac.tissue.replay_row.isVisible() == (len(cardiac.tissue.history) > 1)
    if len(cardiac.tissue.history) > 1:
        cardiac.tissue.replay.setValue(0)
        assert cardiac.tissue.mode.currentData() == "V" and "t = " in cardiac.tissue.replay_label.text()
    assert not cardiac.stimulate(3)                           # no run: nothing to stimulate


def test_model_picker_parameters_and_region_reach_the_config(cardiac):
    """Pick another shipped model, edit a parameter, set a circle with another value: the
    config carries them, and the problem's per-cell parameters follow the circle."""
    from app.sims.cardiac.engine import Problem
    _small_sheet(cardiac)
    group = cardiac.model_group
    group.picker.setCurrentIndex(group.picker.findText("ten_tusscher_model_2006_epi"))
    names = [group.table.item(r, 0).data(QNAME) for r in range(group.table.rowCount())]
    row = next(r for r, n in enumerate(names) if n.endswith("g_Na"))
    assert group.table.item(row, 0).text() == "g_Na"          # the component only where needed
    group.table.item(row, 2).setText("7.0")
    group.region_kind.setCurrentText("circle")
    group.region_shape.setText("1.0, 0.8, 0.5")
    group.region_param.setCurrentText("g_Na")
    group.region_value.setText("0.0")
    cfg = cardiac.current_config()
    assert cfg.model.file == "ten_tusscher_model_2006_epi"
    assert cfg.model.parameters == {names[row]: 7.0}
    problem = Problem.from_config(cfg)
    k = problem.model.parameter_names.index(names[row])
    inside = np.linalg.norm(problem.mesh.positions[:, :2] - [1.0, 0.8], axis=1) <= 0.5
    assert inside.any() and not inside.all()
    assert np.all(problem.param_field[k, inside] == 0.0) and np.all(problem.param_field[k, ~inside] == 7.0)
    assert problem.varying == (k,)
    group.region_shape.setText("1, 2")
    with pytest.raises(Exception, match="circle needs 3 numbers"):
        cardiac.current_config()


def test_restitution_protocol_from_the_panel_plots_the_curve(cardiac, run_to_end):
    """S1-S2 on one CRN cell from the panel: two coupling intervals give two points, plotted
    live by the chosen APD definition and written in the summary with both."""
    cardiac.load_config(PRESETS / "cardiac" / "00-single-cell-1hz.yaml")
    cardiac.rest_kind.setCurrentText("s1s2")
    cardiac.rest_intervals.setText("400, 330")
    cardiac.rest_apd.setCurrentIndex(cardiac.rest_apd.findData("per_beat"))
    from dataclasses import replace
    cfg = cardiac.current_config()
    cfg = replace(cfg, restitution=replace(cfg.restitution, s1_count=1))     # one S1 per interval
    assert [s.name for s in cfg.protocol.stimuli][:2] == ["S1 400", "S2 400"]
    cardiac.base_cfg = cfg
    cardiac.rest_intervals.setText("400, 330")
    run_to_end(cardiac)
    assert len(cardiac.restitution_view.points) == 2
    di = [p[0] for p in cardiac.restitution_view.points]
    apd = [p[1] for p in cardiac.restitution_view.points]
    assert di[0] < di[1] and apd[0] < apd[1]          # restitution: shorter DI, shorter APD


def test_parameter_names_drop_the_component_only_where_unique():
    assert display_names(["ina.g", "ical.g", "ina.tau_m", "membrane.C"]) == \
        ["ina.g", "ical.g", "tau_m", "C"]


def test_a_description_with_a_less_than_sign_is_shown_whole(cardiac):
    """"the band y <= 10 mm" opened an HTML tag that hid the rest of the description."""
    from PySide6.QtGui import QTextDocument

    cardiac.load_config(PRESETS / "cardiac" / "03-sheet-spiral-s1s2-ach-small.yaml")
    shown = QTextDocument()
    shown.setHtml(cardiac.description.text())
    text = shown.toPlainText()
    assert "(x <= 20 mm, y <= 20 mm)" in text and text.rstrip().endswith("quiet by 800 ms.)")


def test_the_tissue_area_at_rest_matches_the_preset_mesh(cardiac):
    """Before a run the tissue area said "single cell: see the probe trace" over the 50x70
    sheet preset the panel opened with: now the sheet's empty axes (mm) and its colour bar."""
    tissue = cardiac.tissue
    assert cardiac.base_cfg.mesh.kind == "sheet"
    assert tissue.stack.currentWidget() is tissue.image_widget and tissue.colour_bar.isVisible()
    cardiac.load_config(PRESETS / "cardiac" / "00-single-cell-1hz.yaml")
    assert tissue.stack.currentWidget() is tissue.note and "single cell" in tissue.note.text()
    assert not tissue.colour_bar.isVisible()
    cardiac.mesh_kind.setCurrentText("sphere")                     # the form's kind counts too
    assert tissue.stack.currentWidget() is tissue.note and "sphere" in tissue.note.text()
    assert tissue.colour_bar.isVisible()
    cardiac.mesh_kind.setCurrentText("sheet")
    assert tissue.stack.currentWidget() is tissue.image_widget


def test_reset_shows_the_next_runs_mesh_not_the_last_runs_tissue(cardiac, run_to_end):
    _small_sheet(cardiac)
    run_to_end(cardiac)
    tissue = cardiac.tissue
    assert tissue.stack.currentWidget() is tissue.image_widget and tissue.V is not None
    cardiac.mesh_kind.setCurrentText("sphere")       # a run's tissue stays up until Reset
    cardiac.reset()
    assert tissue.V is None
    assert tissue.stack.currentWidget() is tissue.note and "sphere" in tissue.note.text()


def _strip_config(folder, protocol: str, output: str):
    """A 16 x 4 node VTU strip (dx 0.1 mm) and a config running ``protocol`` on it."""
    meshio = pytest.importorskip("meshio")
    from app.sims.cardiac.shapes import grid_sheet
    raw = grid_sheet(16, 4, 0.1)
    meshio.write(folder / "strip.vtu", meshio.Mesh(raw.points, [("triangle", raw.elements)]))
    path = folder / "strip.yaml"
    path.write_text("domain: cardiac\nmesh: {kind: file, path: strip.vtu, conductivity: {along: 0.1, across: 0.1}}\n"
                    f"protocol: {{{protocol}}}\nsolver: {{method: rlfe, dt: 0.02}}\n"
                    f"output: {{random_probes: 2, {output}}}\n")
    return path


def test_a_mesh_file_config_runs_and_draws_the_surface(cardiac, run_to_end, tmp_path):
    """A triangle surface from a VTU file: the panel runs it, the tissue view draws its
    triangles coloured by activation (a gradient from the stimulated end)."""
    cardiac.load_config(_strip_config(tmp_path, "t_end: 12, stimuli: [{start: 1, duration: 2, amplitude: -60, "
                                                "region: {kind: rect, x1: 0.25}}]", "dt_save: 0.5"))
    assert "file" in cardiac.cells_label.text() or "mesh" in cardiac.cells_label.text()
    run_to_end(cardiac, 60000)
    sphere = cardiac.tissue.sphere
    assert cardiac.tissue.stack.currentWidget() is sphere and len(sphere.positions) == 64
    act = cardiac.arrays["activation_time"]
    assert np.isfinite(act).all() and act[15] > act[0] + 1.0      # the far end later
    cardiac.tissue.show_activation(act)
    image = sphere.render()
    assert len(np.unique(image[..., :3].reshape(-1, 3), axis=0)) > 10
    cardiac.shutdown()


def test_a_volume_past_the_face_budget_runs_live_decimated(cardiac, run_to_end, tmp_path):
    """A tetrahedral slab whose surface exceeds the view's face budget: the view draws a
    clustered surface (fewer vertices than the boundary has, each a mesh node), recoloured at
    every live view, and the run ends with its activation map drawn."""
    from app.sims.cardiac.fem import boundary_faces
    from app.sims.cardiac.mesh_io import write_opencarp
    from app.sims.cardiac.shapes import structured_slab
    raw = structured_slab(2.0, 1.0, 1.0, 0.1)
    write_opencarp(tmp_path / "slab", raw)
    (tmp_path / "slab.yaml").write_text(
        "domain: cardiac\nmesh: {kind: file, path: slab.elem, conductivity: {along: 0.1, across: 0.1, sheet: 0.1}}\n"
        "protocol: {t_end: 6, stimuli: [{start: 1, duration: 2, amplitude: -60, region: {kind: rect, x1: 0.25}}]}\n"
        "solver: {method: rlfe, dt: 0.01}\noutput: {random_probes: 2, dt_save: 0.5, snapshot_interval: 1.0}\n")
    surface = np.unique(boundary_faces(raw.elements))
    cardiac.tissue.max_faces = 300
    cardiac.load_config(tmp_path / "slab.yaml")
    run_to_end(cardiac, 120000)
    sphere = cardiac.tissue.sphere
    assert cardiac.tissue.stack.currentWidget() is sphere
    assert 20 < len(sphere.nodes) < 0.5 * len(surface) and np.isin(sphere.nodes, surface).all()
    assert len(sphere.mesh.mesh_data.get_faces()) < 1.25 * 300
    act = cardiac.arrays["activation_time"]
    cardiac.tissue.show_activation(act)
    colours = sphere.mesh.mesh_data.get_vertex_colors()
    assert colours.shape == (len(sphere.nodes), 4) and len(np.unique(colours.round(3), axis=0)) > 5
    cardiac.tissue.show_cores(np.array([[1.0, 0.5, 1.0], [0.5, 0.5, 1.0]]))      # rotor cores marked
    assert sphere.cores.visible and "2 rotor cores" in cardiac.tissue.core_count.text()
    cardiac.tissue.show_cores(np.zeros((0, 3)))
    assert not sphere.cores.visible and not cardiac.tissue.core_count.text()
    cardiac.shutdown()


def test_an_s1_s2_protocol_on_a_file_mesh_runs_from_the_panel(cardiac, run_to_end, tmp_path):
    """S1, then S2 once the strip has recovered, at the same end of a VTU strip: every node
    fires twice, the second wave about the coupling interval later."""
    cardiac.load_config(_strip_config(
        tmp_path, "t_end: 420, stimuli: [{name: S1, start: 1, duration: 2, amplitude: -60, region: {kind: rect, x1: 0.25}},"
        " {name: S2, start: 400, duration: 2, amplitude: -60, region: {kind: rect, x1: 0.25}}]",
        "dt_save: 1.0, snapshot_interval: 20"))
    run_to_end(cardiac, 120000)
    first, last = cardiac.arrays["activation_time"], cardiac.arrays["activation_last"]
    assert np.isfinite(first).all() and first.max() < 20.0
    assert np.all((last > 400.0) & (last < 420.0))
    cardiac.shutdown()


def _frame(mesh, act, t):
    from app.sims.cardiac.simulation import CardiacFrame
    return CardiacFrame(progress=t / 100.0, done=False, wall_seconds=1.0, throughput=1.0, throughput_unit="sim ms/s",
                        t=t, t_end=100.0, mesh_kind=mesh.kind, shape=mesh.shape, V=np.full(mesh.n_cells, -80.0),
                        probe_index=np.zeros(0, int), probe_t=np.zeros(0), probe_V=np.zeros((0, 0)),
                        activation_time=act, mesh=mesh, singularities=np.zeros((0, 3)))


def test_cv_arrows_follow_the_wave_on_a_sphere_and_a_large_sheet(cardiac, qtbot):
    """The toggle draws arrows from the activation so far: on a sphere a wave from the north pole
    points south everywhere; a 40,000-node sheet gets at most the arrow budget, pointing +x."""
    from dataclasses import replace

    from app.gui.views.arrows import MAX_ARROWS
    from app.sims.cardiac.shapes import icosphere, sheet

    tissue = cardiac.tissue
    sphere_mesh = icosphere(4, radius_mm=5.0)
    pos = sphere_mesh.positions
    polar = np.arccos(np.clip(pos[:, 2] / 5.0, -1, 1))
    act = np.where(polar < 2.0, 1.0 + 5.0 * polar / 0.5, np.nan)      # 0.5 mm/ms; the south not yet
    tissue.set_mesh(sphere_mesh)
    tissue.set_frame(_frame(sphere_mesh, act, 20.0))
    canvas = tissue.sphere
    assert not canvas.arrows.visible                                  # off until asked for
    tissue.show_cv.setChecked(True)
    assert canvas.arrows.visible
    seg = canvas.arrows.pos.reshape(-1, 6, 3)
    shaft = seg[:, 1] - seg[:, 0]
    south = -np.cross(np.cross(seg[:, 0], [0, 0, 1.0]), seg[:, 0])      # the tangent towards the south pole
    off_pole = np.linalg.norm(south, axis=1) > 0.5
    cos = np.einsum("ij,ij->i", shaft, south)[off_pole] / np.linalg.norm(shaft[off_pole] * south[off_pole], axis=1)
    assert len(seg) > 50 and off_pole.sum() > 50 and np.median(cos) > 0.95
    assert (np.arccos(np.clip(seg[:, 0, 2] / np.linalg.norm(seg[:, 0], axis=1), -1, 1)) < 2.05).all()
    image = canvas.render()
    assert (np.abs(image[..., :3].astype(int) - 255).sum(axis=2) < 30).sum() > 20     # white arrows drawn
    tissue.show_cv.setChecked(False)
    assert not canvas.arrows.visible

    from app.sims.cardiac import fem
    from app.sims.cardiac.shapes import structured_slab
    slab = fem.fem_mesh(structured_slab(2.0, 1.0, 1.0, 0.25), fem.Tissue(0.1, 0.1, 0.1))
    slab = replace(slab, kind="file", faces=fem.boundary_faces(slab.elements).astype(np.int32))
    tissue.set_mesh(slab)                               # a volume: arrows on its drawn surface
    tissue.show_cv.setChecked(True)
    tissue.set_frame(_frame(slab, 2.0 + slab.positions[:, 0] / 0.6, 10.0))
    assert canvas.arrows.visible
    seg = canvas.arrows.pos.reshape(-1, 6, 3)
    shaft = seg[:, 1] - seg[:, 0]
    assert len(seg) > 20 and np.allclose(shaft[:, 1:], 0, atol=1e-5) and (shaft[:, 0] > 0).all()

    big = sheet(200, 200, 0.1)
    tissue.set_mesh(big)
    tissue.show_cv.setChecked(True)
    tissue.set_frame(_frame(big, 2.0 + big.positions[:, 0] / 0.6, 40.0))
    x, y = tissue.sheet_arrows.getData()
    assert 0 < len(x) <= 6 * MAX_ARROWS
    dx = (x[1::6] - x[0::6]) if len(x) % 6 == 0 else None
    assert dx is not None and (dx > 0).all() and np.allclose(y[1::6], y[0::6])


def test_cv_arrows_appear_during_a_run(cardiac, qtbot, monkeypatch):
    """Live: frames carry the activation so far, and the arrows are drawn before the run ends
    (each frame the view draws is recorded with whether it was the last)."""
    _small_sheet(cardiac)
    tissue = cardiac.tissue
    tissue.show_cv.setChecked(True)
    drawn: list[tuple[bool, np.ndarray]] = []
    set_frame = tissue.set_frame

    def recording(frame):
        set_frame(frame)
        x, _ = tissue.sheet_arrows.getData()
        drawn.append((frame.done, np.zeros(0) if x is None else np.asarray(x)))

    monkeypatch.setattr(tissue, "set_frame", recording)
    assert cardiac.start_run()
    qtbot.waitUntil(lambda: any(not done and len(x) for done, x in drawn), timeout=60000)
    x = next(x for done, x in drawn if not done and len(x))
    assert np.median(x[1::6] - x[0::6]) > 0                     # from the stimulated left edge
    cardiac.shutdown()


def test_the_split_step_is_a_solver_setting_of_fixed_step_methods(cardiac):
    """The split step and the splitting reach the config; an adaptive method greys them out."""
    _small_sheet(cardiac)
    cardiac.split_dt.setValue(0.1)
    cardiac.split.setCurrentText("strang")
    solver = cardiac.current_config().solver
    assert (solver.split_dt, solver.split) == (0.1, "strang")
    assert cardiac.split_dt.isEnabled()
    cardiac.method.setCurrentText("bs32")
    assert not cardiac.split_dt.isEnabled() and not cardiac.split.isEnabled()


def test_a_rosenbrock_method_sets_float64_without_tables_and_greys_them(cardiac):
    """rodas4 runs in float64 on the model itself: picking it sets the precision and clears the
    lookup tables (the config would refuse float32 or tables), and greys both, and sets its own
    tolerances in place of a fixed-step preset's at = 1, rt = 0; a loaded rodas4 config keeps
    its own; another method gives them back."""
    cardiac.mesh_kind.setCurrentText("single")
    cardiac.probe_cells.setText("0")
    cardiac.precision.setCurrentText("float32")
    cardiac.lookup_tables.setChecked(True)
    cardiac.method.setCurrentText("rodas4")
    solver = cardiac.current_config().solver
    assert (solver.method, solver.precision, solver.lookup_tables) == ("rodas4", "float64", False)
    assert (solver.at, solver.rt, solver.dt_max) == (1e-6, 1e-6, 10.0)    # not the fixed step's at 1, rt 0
    assert not cardiac.precision.isEnabled() and not cardiac.lookup_tables.isEnabled()
    cardiac.at.setValue(1e-4)
    cardiac.apply_config(replace(cardiac.current_config(), solver=replace(solver, at=1e-8, rt=1e-7)))
    assert (cardiac.current_config().solver.at, cardiac.current_config().solver.rt) == (1e-8, 1e-7)  # a loaded one's own
    cardiac.method.setCurrentText("rlfe")
    assert cardiac.precision.isEnabled() and cardiac.lookup_tables.isEnabled()

