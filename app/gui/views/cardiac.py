"""Views of the cardiac panel: the tissue (vispy sphere or sheet image) coloured by V or by
activation time, with conduction-velocity arrows on request, probe traces, and the step-size
history of adaptive solvers."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtGui import QFontMetrics
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QCheckBox, QComboBox, QHBoxLayout, QLabel, QSlider, QStackedWidget,
                               QVBoxLayout, QWidget)

from app.gui.views.base import (PlotView, colour, configure_pyqtgraph, legend_outside, show_axis_values,
                                sparse_log_labels)
from app.gui.labels import ElidedLabel
from app.gui.views.arrows import arrow_nodes, arrow_segments, vertex_normals
from app.gui.views.decimate import MAX_FACES, decimate_surface
from app.sims.cardiac.readouts import VelocityField, repolarisation

V_RANGE = (-90.0, 30.0)
MAP_STOPS = np.array([0.0, 0.35, 0.65, 1.0])
MAP_COLOURS = np.array([[0.1, 0.1, 0.6], [0.1, 0.8, 0.9], [1.0, 0.9, 0.1], [0.85, 0.05, 0.05]])
MODES = (("V", "V (mV)"), ("first", "first activation (ms)"), ("last", "last activation (ms)"),
         ("repolarisation", "repolarisation (ms)"))
# what the tissue area says before a run's mesh arrives (a sheet shows its empty axes)
WAITING_NOTES = {"single": "single cell: see the probe trace",
                 "sphere": "the sphere is drawn when the run starts",
                 "file": "the mesh is drawn when the run starts"}
REPLAY_BYTES = 64 << 20           # V maps kept for stepping through a finished run
MAX_TRACES = 12
BACKGROUND = (0.12, 0.12, 0.14, 1.0)


def colormap_rgba(values: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """(N, 4) float RGBA in [0, 1] from a blue-cyan-yellow-red map; NaN is grey."""
    values = np.asarray(values, float)
    x = np.clip((values - lo) / max(hi - lo, 1e-12), 0.0, 1.0)
    rgba = np.ones((x.size, 4))
    for c in range(3):
        rgba[:, c] = np.interp(x, MAP_STOPS, MAP_COLOURS[:, c])
    rgba[~np.isfinite(values)] = (0.5, 0.5, 0.5, 1.0)
    return rgba


def pick_vertex(screen_xyz: np.ndarray, click: tuple[float, float], radius_px: float = 12.0) -> int | None:
    """The nearest projected vertex to ``click`` among those within ``radius_px``, the one
    nearest the viewer (smallest depth) winning among the candidates; None when none is near."""
    d = np.hypot(screen_xyz[:, 0] - click[0], screen_xyz[:, 1] - click[1])
    near = np.flatnonzero(d <= radius_px)
    if near.size == 0:
        return None
    depth = screen_xyz[near, 2]
    front = near[depth <= depth.min() + 0.02 * (np.ptp(screen_xyz[:, 2]) + 1e-12)]
    return int(front[np.argmin(d[front])])


class SphereCanvas(QWidget):
    """A vispy SceneCanvas with a turntable camera and a mesh coloured per vertex. A drag
    turns the camera; with :attr:`drag_paints` on, a drag that starts on the surface paints
    instead (a drag from the background still turns it).

    Signals
    -------
    cell_clicked(int)
        The vertex nearest the click (front side).
    cell_dragged(int)
        The vertex under the pointer during a painting drag, every :attr:`drag_spacing` (mesh
        units, mm) along the surface.
    """

    cell_clicked = Signal(int)
    cell_dragged = Signal(int)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        from vispy import scene
        self.canvas = scene.SceneCanvas(keys=None, bgcolor=BACKGROUND, show=False, size=(480, 400))
        self.view = self.canvas.central_widget.add_view()
        self.view.camera = scene.TurntableCamera(fov=30.0, elevation=20.0, azimuth=30.0)
        self.mesh = scene.visuals.Mesh(shading=None, parent=self.view.scene)
        # the surface a little behind in depth: lines lying on it (the CV arrows) stay in front
        self.mesh.set_gl_state(polygon_offset_fill=True, polygon_offset=(1.0, 1.0), depth_test=True)
        self.arrows = scene.visuals.Line(connect="segments", color=(1.0, 1.0, 1.0, 0.9), width=1.5,
                                         parent=self.view.scene)
        self.arrows.visible = False
        self.cores = scene.visuals.Markers(parent=self.view.scene)
        self.cores.visible = False
        self.positions: np.ndarray | None = None
        self.node_positions = np.zeros((0, 3))
        self.nodes = np.zeros(0, np.int64)        # the mesh node of each drawn vertex
        self._press = None
        self.drag_paints = False
        self.drag_spacing = 1.0
        self._dragged: int | None = None        # the last cell a painting drag sent (None: not painting)
        self.canvas.events.mouse_press.connect(self._on_press)
        self.canvas.events.mouse_move.connect(self._on_move)
        self.canvas.events.mouse_release.connect(self._on_release)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.canvas.native)

    def set_mesh(self, positions: np.ndarray, faces: np.ndarray, max_faces: int = MAX_FACES) -> None:
        """Draw the surface ``faces`` (past ``max_faces`` decimated: :func:`decimate_surface`)."""
        self.nodes, local = decimate_surface(positions, faces, max_faces)
        self.node_positions = np.asarray(positions, np.float64)     # every mesh node's, by node index
        self.positions = np.asarray(positions, np.float32)[self.nodes]
        colours = np.tile(np.array([[0.6, 0.6, 0.6, 1.0]], np.float32), (len(self.positions), 1))
        self.mesh.set_data(vertices=self.positions, faces=local, vertex_colors=colours)
        lo, hi = (self.positions.min(axis=0), self.positions.max(axis=0)) if self.positions.size \
            else (-np.ones(3), np.ones(3))
        c, r = (lo + hi) / 2, float((hi - lo).max()) / 2 or 1.0      # a cube around the mesh
        self.view.camera.set_range(x=(c[0] - r, c[0] + r), y=(c[1] - r, c[1] + r), z=(c[2] - r, c[2] + r))
        self.canvas.update()

    def set_colours(self, rgba: np.ndarray) -> None:
        """Colours of the drawn vertices (those of ``nodes``)."""
        if self.positions is None or len(rgba) != len(self.positions):
            return
        self.mesh.set_data(vertices=self.positions, faces=self.mesh.mesh_data.get_faces(),
                           vertex_colors=rgba.astype(np.float32))
        self.canvas.update()

    def set_cores(self, positions: np.ndarray) -> None:
        """Phase singularities (rotor cores), drawn as crosses over the surface."""
        self.cores.visible = len(positions) > 0
        if len(positions):
            self.cores.set_data(np.asarray(positions, np.float32), symbol="x", size=14,
                                edge_color="white", face_color="white", edge_width=2)
        self.canvas.update()

    def set_arrows(self, segments: np.ndarray) -> None:
        """Conduction-velocity arrows as line segments (pairs of points); none hides them."""
        self.arrows.visible = len(segments) > 0
        if len(segments):
            self.arrows.set_data(pos=np.asarray(segments, np.float32))
        self.canvas.update()

    def normals(self) -> np.ndarray:
        """Unit normals of the drawn vertices."""
        return vertex_normals(self.positions, self.mesh.mesh_data.get_faces())

    def screen_positions(self) -> np.ndarray:
        """(N, 3): canvas pixel x, y and depth of every vertex."""
        tr = self.mesh.get_transform("visual", "canvas")
        mapped = tr.map(self.positions)
        return mapped[:, :3] / mapped[:, 3:4]

    def pick(self, x: float, y: float) -> int | None:
        if self.positions is None:
            return None
        local = pick_vertex(self.screen_positions(), (x, y))
        return None if local is None else int(self.nodes[local])

    def _on_press(self, event) -> None:
        self._press = tuple(event.pos[:2])
        cell = self.pick(*event.pos[:2]) if self.drag_paints and event.button == 1 else None
        if cell is not None:                  # a drag from the surface paints: the camera stays
            self._dragged = -1
            self.view.camera.interactive = False

    def _on_move(self, event) -> None:
        if self._dragged is None or self._press is None or np.hypot(*(np.asarray(event.pos[:2]) - self._press)) <= 3:
            return
        cell = self.pick(*event.pos[:2])
        if cell is None or self._dragged >= 0 and float(np.linalg.norm(
                self.node_positions[cell] - self.node_positions[self._dragged])) < self.drag_spacing:
            return
        self._dragged = cell
        self.cell_dragged.emit(cell)

    def _on_release(self, event) -> None:
        start, self._press = self._press, None
        if self._dragged is not None:
            self._dragged = None
            self.view.camera.interactive = True
        if start is None or np.hypot(*(np.asarray(event.pos[:2]) - start)) > 3:  # a drag rotates or paints
            return
        cell = self.pick(*event.pos[:2])
        if cell is not None:
            self.cell_clicked.emit(cell)

    def render(self) -> np.ndarray:
        """(H, W, 4) uint8 RGBA of the current view."""
        return self.canvas.render()

    def close_canvas(self) -> None:
        self.canvas.close()


class ColourBar(pg.GraphicsLayoutWidget):
    """A vertical colour bar with its quantity and unit, for the sheet and the sphere alike."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        cmap = pg.ColorMap(MAP_STOPS, (MAP_COLOURS * 255).astype(np.uint8))
        self.bar = pg.ColorBarItem(values=V_RANGE, colorMap=cmap, interactive=False, width=14)
        self.bar.axis.setLabel("V (mV)")
        self.addItem(self.bar)
        self._fit_axis(*V_RANGE)

    def set_range(self, lo: float, hi: float, label: str) -> None:
        self.bar.setLevels((lo, hi))
        self.bar.axis.setLabel(label)
        self._fit_axis(lo, hi)

    def _fit_axis(self, lo: float, hi: float) -> None:
        """Room for the widest tick label beside the bar and the title beside them: with a
        fixed width "last activation (ms)" was drawn over ticks like "1500"."""
        axis = self.bar.axis
        metrics = QFontMetrics(axis.style.get("tickFont") or self.font())
        ticks = max(metrics.horizontalAdvance(f"{v:g}") for v in (lo, hi, -abs(hi - lo), (lo + hi) / 2))
        title = QFontMetrics(self.font()).height() + 4
        width = int(ticks + max(axis.style["tickLength"], 0) + axis.style["tickTextOffset"][0] + title + 6)
        axis.setWidth(width)
        self.setFixedWidth(width + 14 + 28)      # the bar and the layout's margins


class TissueView(QWidget):
    """The tissue coloured by V (live) or by the first or last activation time (when a run
    ends): a vispy sphere or a sheet image in mm, with a colour bar; single cells show a note.
    A finished run can be stepped through (the V maps the view received) with the slider.

    Signals
    -------
    cell_clicked(int)
        A click on a cell (the panel adds a probe or stimulates there).
    cell_dragged(int)
        The pointer dragged over a cell with the button held, every millimetre: on the sheet
        (stimulate or paint there), or on a surface while painting.
    """

    cell_clicked = Signal(int)
    cell_dragged = Signal(int)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        configure_pyqtgraph()
        self.title = QLabel("<b>Tissue</b>")
        self.mode = QComboBox()
        for key, text in MODES:
            self.mode.addItem(text, key)
        self.click_action = QComboBox()
        self.click_action.addItem("stimulate there", "stimulate")
        self.click_action.addItem("add a probe", "probe")
        self.click_action.addItem("paint with the brush", "paint")
        self.click_action.setToolTip("What a click (or, on the sheet, a drag) on the tissue does: "
                                     "stimulate (during a run), add a probe, or paint the brush's "
                                     "gesture (during a run, or before Run: from its start). "
                                     "Painting, a drag over a surface paints too; drag the "
                                     "background to turn it")
        # two rows, and a count that elides: a wide header takes its width from the controls
        # column beside the view (at 1280 px it hid the column's right edge)
        header = QHBoxLayout()
        header.addWidget(self.title)
        self.core_count = ElidedLabel("", least=0)
        header.addWidget(self.core_count, 1)
        actions = QHBoxLayout()
        actions.addWidget(QLabel("click to"))
        actions.addWidget(self.click_action)
        actions.addStretch(1)
        actions.addWidget(QLabel("colour by"))
        actions.addWidget(self.mode)
        self.show_cv = QCheckBox("CV arrows")
        self.show_cv.setToolTip("Conduction-velocity arrows from the activation times so far (length in "
                                "proportion to the speed; on large meshes at evenly spread nodes)")
        header.addWidget(self.show_cv)
        self.stack = QStackedWidget()
        self.note = QLabel(WAITING_NOTES["single"])
        self.note.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.stack.addWidget(self.note)
        self.image_widget = pg.PlotWidget()
        self.image_widget.setAspectLocked(True)
        self.image_widget.setLabel("bottom", "x (mm)")
        self.image_widget.setLabel("left", "y (mm)")
        self.image_widget.setMouseEnabled(x=False, y=False)     # a drag stimulates, never pans
        show_axis_values(self.image_widget.getPlotItem(), False)
        self.image = pg.ImageItem(axisOrder="row-major")
        self.image_widget.addItem(self.image)
        self.cores = pg.ScatterPlotItem(symbol="x", size=12, pen=pg.mkPen("w", width=2), brush=None)
        self.image_widget.addItem(self.cores)
        self.sheet_arrows = pg.PlotDataItem(connect="pairs", pen=pg.mkPen((255, 255, 255, 230), width=1.5))
        self.image_widget.addItem(self.sheet_arrows)
        self.image_widget.scene().sigMouseClicked.connect(self._image_clicked)
        self.image_widget.scene().sigMouseMoved.connect(self._image_moved)
        self.stack.addWidget(self.image_widget)
        self.sphere: SphereCanvas | None = None
        self.colour_bar = ColourBar()
        picture = QHBoxLayout()
        picture.addWidget(self.stack, 1)
        picture.addWidget(self.colour_bar)
        self.replay = QSlider(Qt.Orientation.Horizontal)
        self.replay.setToolTip("Step through the run: the V maps shown during it")
        self.replay_label = QLabel()
        replay_row = QHBoxLayout()
        replay_row.addWidget(QLabel("replay"))
        replay_row.addWidget(self.replay, 1)
        replay_row.addWidget(self.replay_label)
        self.replay_row = QWidget()
        self.replay_row.setLayout(replay_row)
        self.replay_row.hide()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(header)
        layout.addLayout(actions)
        layout.addLayout(picture, 1)
        layout.addWidget(self.replay_row)
        self.max_faces = MAX_FACES       # larger surfaces are drawn decimated
        self.kind = "single"
        self.expected = "single"          # the mesh kind of the next run (the config's)
        self.shape: tuple[int, int] | None = None
        self.dx = 1.0
        self._rect = pg.QtCore.QRectF(0.0, 0.0, 1.0, 1.0)
        self.V: np.ndarray | None = None
        self.maps: dict[str, np.ndarray] = {}
        self.history: list[tuple[float, np.ndarray]] = []
        self._history_limit = 0
        self._last_dragged: int | None = None
        self._mesh = None
        self._cv: tuple[VelocityField, np.ndarray, np.ndarray, float] | None = None   # field, origins, normals, length
        self.mode.currentIndexChanged.connect(lambda _: self.redraw())
        self.click_action.currentIndexChanged.connect(lambda _: self._drag_mode())
        self.show_cv.toggled.connect(lambda _: self.draw_arrows())
        self.replay.valueChanged.connect(self._replay_to)

    @property
    def activation(self) -> np.ndarray | None:
        """The first activation map (None before a run ends)."""
        return self.maps.get("first")

    def expect(self, kind: str) -> None:
        """The next run's mesh kind (the config's), shown while the view holds no run's tissue
        (before the first run, or a Reset): an empty sheet in mm, or a note. Before, the view
        said "single cell" over the 50x70 sheet preset it opens with."""
        self.expected = kind
        if self.V is None and not self.maps:
            self._show_waiting()

    def _show_waiting(self) -> None:
        if self.expected == "sheet":
            self.stack.setCurrentWidget(self.image_widget)
        else:
            self.note.setText(WAITING_NOTES.get(self.expected, WAITING_NOTES["single"]))
            self.stack.setCurrentWidget(self.note)
        self.colour_bar.setVisible(self.expected != "single")

    def set_mesh(self, mesh) -> None:
        self.kind, self.shape = mesh.kind, mesh.shape
        self._mesh, self._cv = mesh, None
        self.V = None
        self.maps = {}
        self.history = []
        self.replay_row.hide()
        n = len(mesh.positions)
        self._history_limit = max(2, min(600, REPLAY_BYTES // max(2 * n, 1)))
        if mesh.kind in ("sphere", "file"):     # a surface of triangles (a volume: its boundary)
            if self.sphere is None:
                self.sphere = SphereCanvas()
                self.sphere.cell_clicked.connect(self.cell_clicked)
                self.sphere.cell_dragged.connect(self.cell_dragged)
                self._drag_mode()
                self.stack.addWidget(self.sphere)
            self.sphere.set_mesh(mesh.positions, mesh.faces, self.max_faces)
            self.stack.setCurrentWidget(self.sphere)
        elif mesh.kind == "sheet":
            self.image.clear()
            ny, nx = mesh.shape
            self.dx = float(mesh.positions[1, 0] - mesh.positions[0, 0]) if nx > 1 else 1.0
            # pixel (col, row) is centred on the cell's position (col·dx, row·dx) in mm
            self._rect = pg.QtCore.QRectF(-self.dx / 2, -self.dx / 2, nx * self.dx, ny * self.dx)
            self.stack.setCurrentWidget(self.image_widget)
        else:
            self.note.setText(WAITING_NOTES["single"])
            self.stack.setCurrentWidget(self.note)
        self.colour_bar.setVisible(mesh.kind != "single")
        self.mode.setCurrentIndex(0)

    def set_frame(self, frame) -> None:
        self.V = np.asarray(frame.V)
        if frame.activation_time is not None:
            self.maps["first"] = np.asarray(frame.activation_time)
            if frame.apd90 is not None:
                self.maps["repolarisation"] = repolarisation(frame.activation_time, frame.apd90)
        self.show_cores(frame.singularities)
        if self.kind != "single" and (not self.history or frame.t > self.history[-1][0]):
            self.history.append((float(frame.t), self.V.astype(np.float16)))
            if len(self.history) > self._history_limit:      # keep every other one
                self.history = self.history[::2]
        if self.replay_row.isVisible():
            self.replay_row.hide()
        self.redraw()

    def show_cores(self, positions: np.ndarray | None) -> None:
        """Phase singularities (rotor cores) now: crosses on the tissue, their count in the title."""
        pos = np.zeros((0, 3)) if positions is None else np.asarray(positions).reshape(-1, 3)
        if self.kind == "sheet":
            self.cores.setData(pos[:, 0], pos[:, 1])
        elif self.sphere is not None:
            self.sphere.set_cores(pos)
        self.core_count.setText(f"· {len(pos)} rotor core{'s' if len(pos) != 1 else ''}" if len(pos) else "")

    def show_activation(self, activation: np.ndarray, last: np.ndarray | None = None) -> None:
        """A finished run: the last activation map (re-entry shows its latest wave) if given,
        else the first; the replay slider steps through the run."""
        self.maps["first"] = np.asarray(activation, float)
        if last is not None:
            self.maps["last"] = np.asarray(last, float)
        index = self.mode.findData("last" if last is not None else "first")
        if self.mode.currentIndex() == index:
            self.redraw()
        else:
            self.mode.setCurrentIndex(index)
        if len(self.history) > 1:
            self.replay.blockSignals(True)
            self.replay.setRange(0, len(self.history) - 1)
            self.replay.setValue(len(self.history) - 1)
            self.replay.blockSignals(False)
            self.replay_label.setText(f"t = {self.history[-1][0]:.1f} ms")
            self.replay_row.show()

    def _replay_to(self, index: int) -> None:
        if not 0 <= index < len(self.history):
            return
        t, v = self.history[index]
        self.V = v.astype(float)
        self.replay_label.setText(f"t = {t:.1f} ms")
        self.mode.setCurrentIndex(0)
        self.redraw()

    def values(self) -> tuple[np.ndarray | None, float, float]:
        key = self.mode.currentData()
        if key in self.maps:
            a = self.maps[key]
            finite = a[np.isfinite(a)]
            lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
            return a, lo, max(hi, lo + 1e-6)
        return self.V, *V_RANGE

    def redraw(self) -> None:
        values, lo, hi = self.values()
        if values is None or self.kind == "single":
            return
        key = self.mode.currentData()
        self.colour_bar.set_range(lo, hi, self.mode.currentText() if key in self.maps else "V (mV)")
        if self.kind in ("sphere", "file") and self.sphere is not None:
            self.sphere.set_colours(colormap_rgba(values[self.sphere.nodes], lo, hi))
        elif self.kind == "sheet" and self.shape is not None:
            rgba = colormap_rgba(values, lo, hi)
            self.image.setImage((rgba.reshape(*self.shape, 4) * 255).astype(np.uint8), autoLevels=False,
                                rect=self._rect)
            show_axis_values(self.image_widget.getPlotItem(), True)
        self.draw_arrows()

    def arrow_field(self):
        """(field, origins, normals, arrow length) of the drawn arrows, built on first use for
        this mesh: nodes spread evenly over the sheet or the drawn surface, lifted a little off
        the surface."""
        if self._cv is None and self._mesh is not None and self._mesh.elements is not None:
            m = self._mesh
            if self.kind == "sheet":
                nodes, spacing = arrow_nodes(m.positions, np.arange(m.n_cells))
                normals = np.tile([0.0, 0.0, 1.0], (len(nodes), 1))
            elif self.sphere is not None and self.sphere.positions is not None:
                nodes, spacing = arrow_nodes(m.positions, self.sphere.nodes)
                normals = self.sphere.normals()[np.searchsorted(self.sphere.nodes, nodes)]
            else:
                return None
            origins = np.asarray(m.positions, float)[nodes] + 0.05 * spacing * normals
            self._cv = (VelocityField(m, nodes), origins, normals, 0.9 * spacing)
        return self._cv

    def draw_arrows(self) -> None:
        """The CV arrows of the first activation map so far, when the toggle is on."""
        segments = np.zeros((0, 3))
        first = self.maps.get("first")
        if self.show_cv.isChecked() and first is not None and self.kind in ("sheet", "sphere", "file"):
            built = self.arrow_field()
            if built is not None:
                field, origins, normals, length = built
                segments = arrow_segments(origins, field(first), normals, length)
        if self.kind == "sheet":
            self.sheet_arrows.setData(segments[:, 0], segments[:, 1])
        elif self.sphere is not None:
            self.sphere.set_arrows(segments)

    def _cell_at(self, scene_pos) -> int | None:
        if self.kind != "sheet" or self.shape is None or self.image.image is None:
            return None
        p = self.image.mapFromScene(scene_pos)
        col, row = int(np.floor(p.x())), int(np.floor(p.y()))
        ny, nx = self.shape
        return row * nx + col if 0 <= row < ny and 0 <= col < nx else None

    def _image_clicked(self, event) -> None:
        cell = self._cell_at(event.scenePos())
        if cell is not None:
            self._last_dragged = cell
            self.cell_clicked.emit(cell)

    def _image_moved(self, scene_pos) -> None:
        from PySide6.QtWidgets import QApplication

        if not QApplication.mouseButtons() & Qt.MouseButton.LeftButton:
            self._last_dragged = None
            return
        cell = self._cell_at(scene_pos)
        if cell is None or self._last_dragged is not None and self._far(cell) < 1.0:
            return
        self._last_dragged = cell
        self.cell_dragged.emit(cell)

    def _drag_mode(self) -> None:
        """On a surface, a drag paints while the brush is chosen (else it turns the camera)."""
        if self.sphere is not None:
            self.sphere.drag_paints = self.click_action.currentData() == "paint"

    def _far(self, cell: int) -> float:
        """Distance (mm) from the last dragged cell: a drag stimulates every millimetre."""
        nx = self.shape[1]
        (r0, c0), (r1, c1) = divmod(self._last_dragged, nx), divmod(cell, nx)
        return float(np.hypot(r1 - r0, c1 - c0) * self.dx)

    def clear(self) -> None:
        self.V = None
        self.maps = {}
        self.history = []
        self.replay_row.hide()
        self.image.clear()
        self.draw_arrows()
        show_axis_values(self.image_widget.getPlotItem(), False)
        self._show_waiting()


class ProbeTraceView(PlotView):
    """V at the probe cells (the run's probes, then cells clicked during the run)."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__("Probe traces", "time (ms)", "V (mV)", parent)
        self.legend = legend_outside(self.plot)
        self.curves: list = []
        self.live: dict[int, tuple[list, list]] = {}

    def _curve(self, k: int, name: str):
        while len(self.curves) <= k:
            self.curves.append(self.plot.plot(pen=pg.mkPen(colour(len(self.curves)), width=1.5)))
        curve = self.curves[k]
        if curve.opts.get("name") != name:        # the legend lists each probe by its cell
            self.legend.removeItem(curve)
            curve.opts["name"] = name
            self.legend.addItem(curve, name)
        return curve

    def add_live_probe(self, cell: int) -> None:
        self.live.setdefault(int(cell), ([], []))

    def set_frame(self, frame) -> None:
        idx = np.asarray(frame.probe_index)
        shown = min(idx.size, MAX_TRACES)
        t, v = np.asarray(frame.probe_t), np.asarray(frame.probe_V)
        for k in range(shown):
            if v.ndim == 2 and v.shape[0] == t.size and t.size:
                self._curve(k, f"cell {idx[k]}").setData(t, v[:, k])
        k = shown
        for cell, (ts, vs) in self.live.items():
            if frame.V is not None and cell < len(frame.V):
                ts.append(frame.t)
                vs.append(float(frame.V[cell]))
            self._curve(k, f"cell {cell} (clicked)").setData(np.array(ts), np.array(vs))
            k += 1

    def has_data(self) -> bool:
        return any(c.getData()[0] is not None and len(c.getData()[0]) > 0 for c in self.curves)

    def clear(self) -> None:
        for c in self.curves:
            c.setData([], [])
        self.live = {cell: ([], []) for cell in self.live}


class StepSizeView(PlotView):
    """Accepted step sizes of an adaptive solver over simulated time."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__("Step size", "time (ms)", "h (ms)", parent)     # shown for adaptive solvers only
        self.setMinimumWidth(230)                # room for its time ticks beside the traces at 1280 px
        self.curve = self.plot.plot(pen=pg.mkPen(colour(3), width=1))
        self.plot.setLogMode(y=True)
        sparse_log_labels(self.plot)

    def set_frame(self, frame) -> None:
        if frame.h_t is not None and len(frame.h_t):
            self.curve.setData(np.asarray(frame.h_t), np.maximum(np.asarray(frame.h), 1e-12))

    def clear(self) -> None:
        self.curve.setData([], [])


class RestitutionView(PlotView):
    """APD90 against the diastolic interval of a restitution protocol, as the beats come in."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__("Restitution", "diastolic interval (ms)", "APD90 (ms)", parent)
        self.curve = self.plot.plot(pen=pg.mkPen(colour(1), width=1), symbol="o", symbolSize=6,
                                    symbolBrush=colour(1))
        self.points: list[tuple[float, float]] = []

    def set_rows(self, rows: list[dict], definition: str) -> None:
        """Show ``rows`` of :func:`app.sims.cardiac.restitution.curve` by ``definition``."""
        self.plot.setTitle(f"Restitution (APD90 {'per beat' if definition == 'per_beat' else 'S1-referenced'})")
        pts = sorted((r[f"di_{definition}_ms"], r[f"apd90_{definition}_ms"]) for r in rows
                     if np.isfinite(r[f"di_{definition}_ms"]) and np.isfinite(r[f"apd90_{definition}_ms"]))
        self.points = pts
        self.curve.setData([p[0] for p in pts], [p[1] for p in pts])

    def clear(self) -> None:
        self.points = []
        self.curve.setData([], [])
