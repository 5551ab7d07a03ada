"""The epidermis 3D view: elements as shaded spheres (vispy markers sized in µm) coloured
red (C1, membrane-adhesive), blue (basal) or yellow (suprabasal), the basement membrane as
a translucent plane at z = 0, orbit and zoom (turntable camera), and a cut that hides the
elements beyond a chosen coordinate to see inside.

The window never waits on a large frame: a new frame is drawn at most every
``min_interval`` seconds, or every two paint times where painting is slower (the newest
frame pending is drawn when the interval has passed),
the cut is applied on the CPU before ``set_data``, and above ``max_markers`` elements every
k-th visible element is drawn, with a note saying so. The vispy canvas is created the first
time the view is shown or gets a frame, so a window that never opens this panel holds no
GL canvas.
"""

from __future__ import annotations

import logging
import math
import time

import numpy as np
from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QPushButton, QSlider, QVBoxLayout, QWidget

from app.sims.epidermis.frame import ELEMENT_BASAL, ELEMENT_C1, ELEMENT_SUPRABASAL

log = logging.getLogger(__name__)

BACKGROUND = (0.12, 0.12, 0.14, 1.0)
MEMBRANE_RGBA = (0.72, 0.80, 0.28, 0.38)        # greenish yellow, translucent
ELEMENT_RGBA = np.zeros((3, 4), np.float32)
ELEMENT_RGBA[ELEMENT_C1] = (0.86, 0.10, 0.10, 1.0)           # red
ELEMENT_RGBA[ELEMENT_BASAL] = (0.18, 0.35, 0.95, 1.0)        # blue
ELEMENT_RGBA[ELEMENT_SUPRABASAL] = (0.98, 0.86, 0.14, 1.0)   # yellow
MAX_MARKERS = 300_000
MIN_INTERVAL = 0.1          # s between 3D updates
CUT_STEPS = 1000            # slider resolution; the top position means no cut
AXES = ("x", "y", "z")


def element_rgba(colour_codes: np.ndarray) -> np.ndarray:
    """(M, 4) float32 RGBA of the elements from their ELEMENT_* codes."""
    codes = np.clip(np.asarray(colour_codes, np.int64), 0, len(ELEMENT_RGBA) - 1)
    return ELEMENT_RGBA[codes]


def extent(positions: np.ndarray, axis: int, box: float) -> tuple[float, float]:
    """The range of ``axis`` the cut slider spans: [0, L] in x and y of a periodic box, else
    the elements' own range."""
    if box > 0 and axis < 2:
        return 0.0, float(box)
    if positions is None or not len(positions):
        return 0.0, 1.0
    col = positions[:, axis]
    lo, hi = float(col.min()), float(col.max())
    return lo, max(hi, lo + 1e-6)


def element_spacing(positions: np.ndarray, element_cell: np.ndarray, box: float, cells: int = 16) -> float | None:
    """The median nearest-neighbour distance between elements of the same cell, over the
    cells of the first elements (at most ``cells`` of them, minimum image in x and y of a
    periodic box); None when no cell has two elements. This sizes the markers so the spheres
    of one cell just touch."""
    if positions is None or element_cell is None or len(positions) < 2:
        return None
    head = slice(0, min(len(positions), 64 * cells))
    pos, cell = np.asarray(positions[head], float), np.asarray(element_cell[head])
    nearest = []
    for c in np.flatnonzero(np.bincount(cell.astype(np.int64)))[:cells]:   # np.unique imports numpy.ma (slow)
        p = pos[cell == c]
        if len(p) < 2:
            continue
        d = p[:, None, :] - p[None, :, :]
        if box > 0:
            d[..., :2] -= box * np.rint(d[..., :2] / box)
        r = np.sqrt((d * d).sum(-1))
        np.fill_diagonal(r, np.inf)
        nearest.append(r.min(axis=1))
    if not nearest:
        return None
    value = float(np.median(np.concatenate(nearest)))
    return value if np.isfinite(value) and value > 0 else None


def visible_indices(positions: np.ndarray, axis: int, cut: float | None, limit: int
                    ) -> tuple[np.ndarray, int, int]:
    """Indices of the elements to draw: those with coordinate ``axis`` ≤ ``cut`` (all when
    ``cut`` is None), then every k-th when more than ``limit`` remain.

    Returns (indices, elements left by the cut, k).
    """
    n = 0 if positions is None else len(positions)
    if cut is None:
        kept = np.arange(n)
    else:
        kept = np.flatnonzero(positions[:, axis] <= cut)
    k = max(1, math.ceil(kept.size / limit)) if limit > 0 else 1
    return (kept[::k] if k > 1 else kept), int(kept.size), k


class TissueView3D(QWidget):
    """The tissue in 3D with a cut slider; see the module docstring.

    Signals
    -------
    drawn()
        The canvas got new data (a frame or a new cut); the panel records movie frames on it.
    """

    drawn = Signal()
    point_picked = Signal(object)     # a click (not a drag) near a cell: its centre (µm)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.max_markers = MAX_MARKERS
        self.min_interval = MIN_INTERVAL
        self.element_size = 3.2          # µm: marker diameter when the frame does not tell
        self.marker_size = self.element_size   # µm: the diameter drawn (measured spacing)
        self.frame = None
        self.canvas = None
        self.visible_count = 0           # markers drawn now
        self.cut_count = 0               # elements left by the cut (before subsampling)
        self._closed = False
        self._last_draw = -1e9
        self._paint_start = 0.0
        self.paint_seconds = 0.0         # the canvas's last paint (GL draw) time
        self._need_camera = True
        self._framed: tuple[dict, float] | None = None   # (camera state, tissue top) we framed
        self._size_due = 0
        self._membrane_key: tuple | None = None
        self._press: tuple[float, float] | None = None
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self.redraw)

        self.title = QLabel("<b>Tissue</b>")
        self.legend = QLabel("<span style='color:#dc1a1a'>&#9679;</span> C1 (adhesive) "
                             "<span style='color:#2e59f2'>&#9679;</span> basal "
                             "<span style='color:#d4b000'>&#9679;</span> suprabasal")
        self.axis_combo = QComboBox()
        self.axis_combo.addItems(AXES)
        self.axis_combo.setCurrentText("y")
        self.axis_combo.setToolTip("hide the elements beyond the cut along this axis")
        self.cut_slider = QSlider(Qt.Orientation.Horizontal)
        self.cut_slider.setRange(0, CUT_STEPS)
        self.cut_slider.setValue(CUT_STEPS)
        self.cut_slider.setToolTip("clipping plane: elements above the cut are hidden (right end: none)")
        self.cut_slider.setMinimumWidth(120)
        self.cut_label = QLabel("no cut")
        self.cut_label.setMinimumWidth(95)
        self.reset_button = QPushButton("Reset view")
        self.readout = QLabel("")
        self.readout.setObjectName("readout")
        self.note = QLabel("")
        self.note.setStyleSheet("color: #a05000")
        header = QHBoxLayout()
        header.addWidget(self.title)
        header.addWidget(self.legend)
        header.addStretch(1)
        header.addWidget(QLabel("cut"))
        header.addWidget(self.axis_combo)
        header.addWidget(self.cut_slider)
        header.addWidget(self.cut_label)
        header.addWidget(self.reset_button)
        info = QHBoxLayout()
        info.addWidget(self.readout, 1)
        info.addWidget(self.note)
        self.placeholder = QLabel("the 3D view opens with the panel")
        self.placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.body = QVBoxLayout()
        self.body.addWidget(self.placeholder)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(header)
        layout.addLayout(info)
        layout.addLayout(self.body, 1)
        self.cut_slider.valueChanged.connect(lambda _: self.redraw())
        self.axis_combo.currentIndexChanged.connect(lambda _: self.redraw())
        self.reset_button.clicked.connect(self.reset_camera)

    # ---- the canvas ---------------------------------------------------------------------
    def ensure_canvas(self) -> bool:
        """Create the vispy canvas (once); False after :meth:`close_canvas`."""
        if self.canvas is not None:
            return True
        if self._closed:
            return False
        from vispy import scene
        self.canvas = scene.SceneCanvas(keys=None, bgcolor=BACKGROUND, show=False, size=(640, 460))
        self.view = self.canvas.central_widget.add_view()
        self.view.camera = scene.TurntableCamera(fov=30.0, elevation=22.0, azimuth=-35.0)
        self.markers = scene.visuals.Markers(spherical=True, scaling="scene", parent=self.view.scene)
        self.markers.set_data(np.zeros((0, 3), np.float32))
        self.membrane = scene.visuals.Mesh(color=MEMBRANE_RGBA, parent=self.view.scene)
        self.membrane.set_gl_state("translucent", depth_test=True, cull_face=False)
        self.membrane.order = 1              # after the opaque markers
        self.canvas.events.mouse_press.connect(self._on_press)
        self.canvas.events.mouse_release.connect(self._on_release)
        self.canvas.events.draw.connect(self._paint_started, position="first")
        self.canvas.events.draw.connect(self._paint_ended, position="last")
        self.body.removeWidget(self.placeholder)
        self.placeholder.hide()
        self.body.addWidget(self.canvas.native)
        return True

    def _on_press(self, event) -> None:
        self._press = tuple(event.pos[:2])

    def _on_release(self, event) -> None:
        start, self._press = self._press, None
        if start is None or np.hypot(*(np.asarray(event.pos[:2]) - start)) > 3:  # a drag turns the view
            return
        point = self.pick(*event.pos[:2])
        if point is not None:
            self.point_picked.emit(point)

    def pick(self, x: float, y: float) -> np.ndarray | None:
        """The centre (µm) of the front cell nearest the canvas pixel (x, y); None: none near."""
        from app.gui.views.cardiac import pick_vertex

        f = self.frame
        if self.canvas is None or f is None or f.centres is None or not len(f.centres):
            return None
        centres = np.asarray(f.centres, np.float32)
        mapped = self.markers.get_transform("visual", "canvas").map(centres)
        cell = pick_vertex(mapped[:, :3] / mapped[:, 3:4], (x, y), radius_px=20.0)
        return None if cell is None else centres[cell].astype(float)

    def _paint_started(self, event) -> None:
        self._paint_start = time.perf_counter()

    def _paint_ended(self, event) -> None:
        self.paint_seconds = time.perf_counter() - self._paint_start

    @property
    def interval(self) -> float:
        """Seconds between 3D updates: ``min_interval``, or twice the last paint time when
        painting is slower (a software GL renderer, a huge tissue), so the event loop stays
        free at least half the time."""
        return max(self.min_interval, 2.0 * self.paint_seconds)

    def showEvent(self, event) -> None:
        super().showEvent(event)
        if self.ensure_canvas() and self.frame is not None:
            self.redraw()

    def close_canvas(self) -> None:
        """Release the GL canvas now (the panel is closing); the view draws nothing after."""
        self._timer.stop()
        self._closed = True
        if self.canvas is not None:
            canvas, self.canvas = self.canvas, None
            canvas.close()

    # ---- frames -------------------------------------------------------------------------
    def set_element_size(self, diameter: float) -> None:
        self.element_size = float(diameter)

    def set_frame(self, frame) -> bool:
        """Show ``frame``: now if the last draw is older than ``min_interval``, else when it
        is (the newest pending frame wins). Returns whether it was drawn now."""
        self.frame = frame
        wait = self._last_draw + self.interval - time.perf_counter()
        if wait <= 0:
            self.redraw()
            return True
        if not self._timer.isActive():
            self._timer.start(max(1, int(wait * 1000)))
        return False

    def flush(self) -> None:
        """Draw the pending frame now (the run ended)."""
        if self._timer.isActive():
            self._timer.stop()
            self.redraw()

    def cut(self) -> tuple[int, float | None]:
        """(axis, cut coordinate or None) from the slider."""
        axis = self.axis_combo.currentIndex()
        f = self.frame
        if self.cut_slider.value() >= CUT_STEPS or f is None or f.positions is None:
            return axis, None
        lo, hi = extent(f.positions, axis, f.box)
        return axis, lo + (hi - lo) * self.cut_slider.value() / CUT_STEPS

    def redraw(self) -> None:
        self._timer.stop()
        f = self.frame
        axis, cut = self.cut()
        self.cut_label.setText("no cut" if cut is None else f"{AXES[axis]} ≤ {cut:.1f} µm")
        if f is None or f.positions is None or not self.ensure_canvas():
            return
        pos = np.asarray(f.positions, np.float32)
        idx, self.cut_count, k = visible_indices(pos, axis, cut, self.max_markers)
        self.visible_count = int(idx.size)
        if self._size_due <= 0:          # measured now and then: cell bodies change slowly
            self.marker_size = element_spacing(pos, f.element_cell, f.box) or self.element_size
            self._size_due = 10
        self._size_due -= 1
        if idx.size:
            self.markers.set_data(pos[idx], size=self.marker_size, face_color=element_rgba(f.element_colour[idx]),
                                  edge_width=0)
        else:
            self.markers.set_data(np.zeros((0, 3), np.float32))
        self.note.setText(f"showing {idx.size:,} of {self.cut_count:,} elements (every {k}th)" if k > 1 else "")
        self._update_membrane(pos, f.box)
        if len(pos) and (self._need_camera or self._outgrown(pos)):
            self.reset_camera()
        self.canvas.update()
        self._last_draw = time.perf_counter()
        self.drawn.emit()

    def _update_membrane(self, pos: np.ndarray, box: float) -> None:
        if box > 0:
            x0, x1, y0, y1 = 0.0, box, 0.0, box
        elif len(pos):
            lo, hi = pos[:, :2].min(axis=0), pos[:, :2].max(axis=0)
            margin = 0.1 * float(max(hi - lo)) + self.element_size
            x0, x1, y0, y1 = lo[0] - margin, hi[0] + margin, lo[1] - margin, hi[1] + margin
        else:
            return
        key = tuple(round(v, 1) for v in (x0, x1, y0, y1))
        if key == self._membrane_key:
            return
        self._membrane_key = key
        verts = np.array([[x0, y0, 0], [x1, y0, 0], [x1, y1, 0], [x0, y1, 0]], np.float32)
        self.membrane.set_data(vertices=verts, faces=np.array([[0, 1, 2], [0, 2, 3]], np.uint32),
                               color=MEMBRANE_RGBA)

    def reset_camera(self) -> None:
        """Frame the membrane and the tissue above it."""
        f = self.frame
        if self.canvas is None or f is None or f.positions is None or not len(f.positions):
            return
        pos = np.asarray(f.positions)
        if f.box > 0:
            x, y = (0.0, f.box), (0.0, f.box)
        else:
            x = (float(pos[:, 0].min()), float(pos[:, 0].max()))
            y = (float(pos[:, 1].min()), float(pos[:, 1].max()))
        top = max(float(pos[:, 2].max()), 1.0)
        z = (0.0, top + self.marker_size)
        self.view.camera.set_range(x=x, y=y, z=z)
        self.view.camera.center = (0.5 * sum(x), 0.5 * sum(y), 0.5 * z[1])
        self._need_camera = False
        self._framed = (self.view.camera.get_state(), top)

    def _outgrown(self, pos: np.ndarray) -> bool:
        """The tissue grew a tenth above what the camera framed, and nobody moved the camera
        since (a growing tissue stays in view; a chosen view stays)."""
        if self._framed is None:
            return False
        state, top = self._framed
        return float(pos[:, 2].max()) > 1.1 * top and self.view.camera.get_state() == state

    def render(self) -> np.ndarray:
        """(H, W, 4) uint8 RGBA of the current view (offscreen; works under Xvfb)."""
        if not self.ensure_canvas():
            raise RuntimeError("the 3D view is closed")
        return self.canvas.render()

    def clear(self) -> None:
        self._timer.stop()
        self.frame = None
        self.visible_count = self.cut_count = 0
        self._need_camera = True
        self._framed = None
        self._size_due = 0
        self._membrane_key = None
        self.note.setText("")
        self.readout.setText("")
        if self.canvas is not None:
            self.markers.set_data(np.zeros((0, 3), np.float32))
            self.canvas.update()
