"""Uncertainty of a channel fit: the intervals table, identifiability warnings and a corner
plot (MCMC samples where the run drew them, else the Gauss-Newton normal approximation)."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QGraphicsGridLayout, QLabel, QScrollArea, QSplitter, QTableWidget,
                               QTableWidgetItem, QVBoxLayout, QWidget)

from app.gui.tables import fit_columns
from app.gui.views.base import colour, configure_pyqtgraph

COLUMNS = ("parameter", "value", "sd", "95% low", "95% high", "± %")
MAX_POINTS = 2000        # samples drawn per scatter panel
PANEL_PX = 64            # a corner panel's least size (its axis label fits; the plot scrolls)
AXES_PX = 70             # the outer panels' tick values and labels
HISTOGRAM_PEN = pg.mkPen(200, 200, 200)   # pyqtgraph's default curve pen, as drawn before
MARK_BRUSH = pg.mkBrush(50, 50, 150)      # pyqtgraph's default symbol brush, as drawn before
LINE = {"stepMode": None, "fillLevel": None, "brush": None}   # a plain line (a reused item may have been a histogram)


class SparseAxis(pg.AxisItem):
    """An axis with as many tick values as fit its length side by side (a bottom axis of a
    64-px corner panel drew four values like "0.000123" over each other)."""

    def tickValues(self, minVal, maxVal, size):
        levels = super().tickValues(minVal, maxVal, size)
        if self.orientation not in ("bottom", "top") or not levels or maxVal <= minVal:
            return levels
        spacing, values = levels[0]
        if not len(values):
            return levels[:1]
        widest = max(self.fontMetrics_width(v) for v in values)
        room = max(1, int(size // (widest + 8)))           # values that fit without touching
        step = -(-len(values) // room)
        start = (len(values) // 2) % step        # keep the middle value (edge ones may be cut)
        return [(spacing * step, list(values[start::step]))]

    def fontMetrics_width(self, value: float) -> float:
        from PySide6.QtGui import QFontMetrics

        font = self.style.get("tickFont") or self.font()
        return QFontMetrics(font).horizontalAdvance(self.tickStrings([value], 1.0, abs(value) / 10 or 1)[0])

    def tickStrings(self, values, scale, spacing):
        return [f"{v * scale:.3g}" for v in values]


class CornerCell(pg.GraphicsWidget):
    """One panel of the corner plot: a view box with a left and a bottom axis.

    A :class:`pyqtgraph.PlotItem` builds menus, buttons and four axes; 45 of them (9
    parameters) took 0.8 s of the GUI thread on the 2-core VM, these 45 take a sixth of that.
    """

    def __init__(self, left_label: str = "", bottom_label: str = "", left_values: bool = False,
                 bottom_values: bool = False):
        super().__init__()
        self.vb = pg.ViewBox(enableMenu=False)
        self.axes = {"left": SparseAxis("left", linkView=self.vb),
                     "bottom": SparseAxis("bottom", linkView=self.vb)}
        for axis, label, values in zip(self.axes.values(), (left_label, bottom_label),
                                       (left_values, bottom_values)):
            axis.enableAutoSIPrefix(False)
            axis.setStyle(showValues=values)
            if label:
                axis.setLabel(label)
        grid = QGraphicsGridLayout()
        grid.setContentsMargins(1, 1, 1, 1)
        grid.setSpacing(0)
        grid.addItem(self.axes["left"], 0, 0)
        grid.addItem(self.vb, 0, 1)
        grid.addItem(self.axes["bottom"], 1, 1)
        self.setLayout(grid)
        self._curves: list[pg.PlotCurveItem] = []
        self._points: list[pg.ScatterPlotItem] = []

    def draw(self, curves: list[tuple] = (), points: list[tuple] = ()) -> None:
        """Draw ``curves`` and ``points``, each ``(x, y, options)`` of a
        :class:`pyqtgraph.PlotCurveItem` or :class:`pyqtgraph.ScatterPlotItem`, and fit the
        range to them. The items are kept and refilled: a new result builds none."""
        for pool, kind, specs in ((self._curves, pg.PlotCurveItem, curves),
                                  (self._points, pg.ScatterPlotItem, points)):
            while len(pool) < len(specs):
                pool.append(kind())
                self.vb.addItem(pool[-1])
            for item, (x, y, options) in zip(pool, specs):
                item.setData(x, y, **options)
                item.setVisible(True)
            for item in pool[len(specs):]:
                item.setVisible(False)
        self.vb.enableAutoRange()

    def drawn(self) -> list:
        """The items on show."""
        return [item for item in self._curves + self._points if item.isVisible()]

    def erase(self) -> None:
        self.draw()


class CornerPlot(pg.GraphicsView):
    """P x P panels: marginals on the diagonal, pairs below it.

    The panels are built once per list of parameter names and kept: a new result (the next
    frame, the next run of the same model) only replaces what they draw.
    """

    def __init__(self, parent=None):
        configure_pyqtgraph()
        super().__init__(parent)
        self.panels: dict[tuple[int, int], CornerCell] = {}
        self._names: tuple[str, ...] = ()
        self._grid_item: pg.GraphicsWidget | None = None

    def show_samples(self, names, samples: np.ndarray) -> None:
        """Marginal histograms and pairwise scatter of ``samples`` (k, P)."""
        self._layout(names)
        rng = np.random.default_rng(0)
        shown = samples[rng.choice(len(samples), min(len(samples), MAX_POINTS), replace=False)]
        for (i, j), cell in self.panels.items():
            if i == j:
                counts, edges = np.histogram(samples[:, i], bins=30)
                cell.draw(curves=[(edges, counts, dict(stepMode="center", fillLevel=0, pen=HISTOGRAM_PEN,
                                                       brush=colour(0, 120)))])
            else:
                cell.draw(points=[(shown[:, j], shown[:, i], dict(symbol="o", size=2, pen=None,
                                                                  brush=colour(0, 90)))])

    def show_normal(self, names, best: np.ndarray, cov: np.ndarray) -> None:
        """Marginal normal densities and 1- and 2-sd ellipses of N(best, cov)."""
        self._layout(names)
        sd = np.sqrt(np.maximum(np.diag(cov), 1e-300))
        angle = np.linspace(0, 2 * np.pi, 100)
        circle = np.stack([np.cos(angle), np.sin(angle)])
        for (i, j), cell in self.panels.items():
            if i == j:
                x = best[i] + sd[i] * np.linspace(-4, 4, 120)
                density = np.exp(-0.5 * ((x - best[i]) / sd[i]) ** 2)
                cell.draw(curves=[(x, density, dict(LINE, pen=pg.mkPen(colour(0), width=1.5)))])
                continue
            val, vec = np.linalg.eigh(cov[np.ix_([j, i], [j, i])])
            ellipses = []
            for k in (1, 2):
                ellipse = vec @ (np.sqrt(np.maximum(val, 0))[:, None] * circle) * k
                ellipses.append((best[j] + ellipse[0], best[i] + ellipse[1],
                                 dict(LINE, pen=pg.mkPen(colour(k - 1), width=1.2))))
            cell.draw(curves=ellipses, points=[([best[j]], [best[i]], dict(symbol="+", size=8,
                                                                           pen=pg.mkPen(colour(3)), brush=MARK_BRUSH))])

    def clear(self) -> None:
        """Nothing drawn (the panels are kept, hidden, for the next result)."""
        for cell in self.panels.values():
            cell.erase()
        if self._grid_item is not None:
            self._grid_item.setVisible(False)
        self.setMinimumSize(0, 0)

    def _layout(self, names) -> None:
        names = tuple(names)
        p = len(names)
        self.setMinimumSize(p * PANEL_PX + AXES_PX, p * PANEL_PX + AXES_PX)
        if names == self._names and self._grid_item is not None:
            self._grid_item.setVisible(True)
            return
        self._names = names
        self._grid_item = pg.GraphicsWidget()
        grid = QGraphicsGridLayout()
        self.panels = {}
        for i in range(p):
            for j in range(i + 1):
                cell = CornerCell(names[i] if j == 0 and i > 0 else "", names[j] if i == p - 1 else "",
                                  left_values=j == 0 and i > 0, bottom_values=i == p - 1)
                grid.addItem(cell, i, j)
                self.panels[(i, j)] = cell
        self._grid_item.setLayout(grid)
        self.setCentralItem(self._grid_item)      # the old grid leaves the scene


class IntervalsView(QWidget):
    """The table of intervals, the warnings and the corner plot."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().setVisible(False)
        fit_columns(self.table, stretch=0)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.note = QLabel("Intervals appear when the fit ends (Fit tab: intervals on).")
        self.note.setWordWrap(True)
        self.corner = CornerPlot()
        left = QWidget()
        layout = QVBoxLayout(left)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(QLabel("<b>Parameters at the optimum</b> (Gauss–Newton, 95%)"))
        layout.addWidget(self.table, 1)
        layout.addWidget(self.note)
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(left)
        corner = QScrollArea()
        corner.setProperty("scrollsSideways", True)     # a grid of panels, wider than its view by design
        corner.setWidgetResizable(True)
        corner.setWidget(self.corner)
        split.addWidget(corner)
        split.setSizes([380, 420])
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(split)
        self._shown = None
        self._corner_pending: tuple | None = None   # (draw, *args) not drawn yet

    def set_frame(self, frame) -> None:
        iv = getattr(frame, "intervals", None)
        samples = getattr(frame, "posterior_samples", None)
        key = (id(iv), None if samples is None else samples.shape)
        if iv is None or key == self._shown:
            return
        self._shown = key
        self.table.setRowCount(len(iv.names))
        for r, (name, b, s, lo, hi) in enumerate(zip(iv.names, iv.best, iv.sd, iv.lower, iv.upper)):
            rel = 100 * 1.96 * s / abs(b) if b else np.inf
            for c, text in enumerate((name, f"{b:.6g}", f"{s:.3g}", f"{lo:.6g}", f"{hi:.6g}", f"{rel:.3g}")):
                self.table.setItem(r, c, QTableWidgetItem(text))
        fit_columns(self.table, stretch=0)
        warnings = "<br>".join(f"⚠ {w}" for w in iv.warnings)
        self.note.setText(f"noise variance {iv.noise_variance:.3g} pA², condition {iv.condition:.3g}"
                          + (f"<br><span style='color:#b00020'>{warnings}</span>" if warnings else ""))
        if samples is not None and len(samples) > 1:
            self._corner_pending = (self.corner.show_samples, iv.names, np.asarray(samples))
        else:
            self._corner_pending = (self.corner.show_normal, iv.names, iv.best, iv.covariance)
        if self.isVisible():
            self.draw_corner()

    def draw_corner(self) -> None:
        """Draw the newest result into the corner plot (when the view is shown: building and
        filling 45 panels at the end of a run froze the window while the tab was hidden)."""
        if self._corner_pending is not None:
            draw, *args = self._corner_pending
            self._corner_pending = None
            draw(*args)

    def showEvent(self, event) -> None:
        super().showEvent(event)
        self.draw_corner()

    def clear(self) -> None:
        self._shown = None
        self._corner_pending = None
        self.table.setRowCount(0)
        self.note.setText("Intervals appear when the fit ends (Fit tab: intervals on).")
        self.corner.clear()
