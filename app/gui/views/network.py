"""Views of the cultured-network panel: the culture, the spike raster, the population rate
with detected bursts, and the per-epoch history."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QCheckBox, QHBoxLayout, QVBoxLayout, QWidget

from app.gui.views.base import PlotView, colour, configure_pyqtgraph, integer_axis, show_axis_values

# Connectivity circles are drawn for at most this many neurons (every k-th neuron of a larger
# culture): each circle is a path of its own, 10,000 took 1-2 s a frame in software rendering.
MAX_CIRCLES = 1000
MAX_RASTER_POINTS = 60000
LEFT_AXIS_PX = 62          # the raster's and the rate's left axes: "10,000" neurons and its label
RATE_TOP = 10.0            # Hz: the colour map's red end (and above)
RATE_COLOURS = pg.ColorMap([0.0, 0.15, 1.0], [(200, 200, 200), (255, 160, 40), (200, 0, 0)])
RASTER_TICK_PX = 2.0       # a raster tick is at least this tall on screen
MARK_PX = (5.0, 16.0)      # the culture's inhibitory and starter marks: least and largest size


def same(shown: np.ndarray | None, new: np.ndarray | None) -> bool:
    """``new`` holds what ``shown`` holds (the item drawing it needs no new data)."""
    if shown is None or new is None:
        return shown is new
    return shown.shape == new.shape and np.array_equal(shown, new)


def cached(item: pg.GraphicsObject) -> pg.GraphicsObject:
    """Keep ``item`` as a pixmap, redrawn when its data or the view's range changes: circles
    and synapses change at epoch ends, the rate image below them at every frame."""
    item.setCacheMode(pg.QtWidgets.QGraphicsItem.CacheMode.DeviceCoordinateCache)
    return item


def circle_neurons(width: int, height: int) -> np.ndarray:
    """Indices of the neurons whose connectivity circles are drawn: all of a culture of up to
    :data:`MAX_CIRCLES`, else every k-th column of every k-th row (spread over the culture;
    every k-th index put them all in a few columns)."""
    step = max(1, int(np.ceil(np.sqrt(width * height / MAX_CIRCLES))))
    while -(-width // step) * -(-height // step) > MAX_CIRCLES:
        step += 1
    return (np.arange(0, height, step)[:, None] * width + np.arange(0, width, step)).ravel()


class CultureView(PlotView):
    """The culture as an image of recent rates (one pixel per neuron, a colour bar in Hz), the
    inhibitory neurons and starters marked on it, connectivity circles, strongest synapses.

    Every item drawing something that changes only at epoch ends (radii, synapses) or never
    during a run (inhibitory neurons, starters) gets new data only when it changed; a 100x100
    frame then costs an image of 10,000 values (10,000 scatter dots with per-dot brushes and
    symbols took most of a frame's drawing)."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__("Culture (colour: recent rate; circles: connectivity radius)",
                         "x (grid units)", "y (grid units)", parent)
        self.show_synapses = QCheckBox("strongest synapses")
        self.show_synapses.setChecked(True)
        self.show_kinds = QCheckBox("□ inhibitory △ starter")
        self.show_kinds.setChecked(True)
        boxes = QHBoxLayout()
        for box in (self.show_synapses, self.show_kinds):
            boxes.addWidget(box)
        boxes.addStretch(1)
        self.header.addLayout(boxes)
        self.plot.setAspectLocked(True)
        self.plot.showGrid(x=False, y=False)          # no grid lines across the image
        self.image = pg.ImageItem(axisOrder="row-major")
        self.colour_bar = pg.ColorBarItem(values=(0.0, RATE_TOP), colorMap=RATE_COLOURS, interactive=False,
                                          width=14, label="rate (Hz)")
        self.colour_bar.setImageItem(self.image, insert_in=self.plot)
        self.circles = cached(pg.ScatterPlotItem(pxMode=False, pen=pg.mkPen(70, 110, 200, 90), brush=None))
        self.lines = cached(pg.PlotDataItem(pen=pg.mkPen(40, 150, 40, 120), connect="pairs"))
        self.inh_lines = cached(pg.PlotDataItem(pen=pg.mkPen(150, 40, 150, 150), connect="pairs"))
        self.inhibitory = pg.ScatterPlotItem(pxMode=True, size=7, symbol="s", pen=pg.mkPen(60, 30, 140),
                                             brush=None)
        self.starters = pg.ScatterPlotItem(pxMode=True, size=7, symbol="t1", pen=pg.mkPen(20, 20, 20),
                                           brush=None)
        for item in (self.image, self.circles, self.lines, self.inh_lines, self.inhibitory, self.starters):
            self.plot.addItem(item)
        self._shown: dict[str, np.ndarray | None] = {}
        self._shape = None
        self.show_synapses.toggled.connect(lambda _: self._redraw_lines())
        self.show_kinds.toggled.connect(self._show_marks)
        self._frame = None
        self.plot.vb.sigRangeChanged.connect(lambda *_: self._fit_marks())
        self.plot.vb.sigResized.connect(lambda *_: self._fit_marks())

    def _show_marks(self, on: bool) -> None:
        for item in (self.inhibitory, self.starters):
            item.setVisible(on)

    def _fit_marks(self) -> None:
        """Inhibitory and starter marks about one grid unit wide (at least 5 px): zoomed out
        they would hide a 100x100 culture, zoomed in they would shrink to specks."""
        span = self.plot.vb.viewRange()[0]
        per_unit = self.plot.vb.width() / max(span[1] - span[0], 1e-9)
        size = float(np.clip(0.8 * per_unit, MARK_PX[0], MARK_PX[1]))
        for item in (self.inhibitory, self.starters):
            if abs(item.opts["size"] - size) >= 0.5:
                item.setSize(size)

    def _changed(self, name: str, value: np.ndarray | None) -> bool:
        """Remember ``value`` as what the item ``name`` shows; True if that differs from before."""
        value = None if value is None else np.asarray(value)
        if name in self._shown and same(self._shown[name], value):
            return False
        self._shown[name] = None if value is None else value.copy()
        return True

    def set_frame(self, frame) -> None:
        self._frame = frame
        width, height = frame.width, frame.height
        self.image.setImage(np.asarray(frame.rate, float).reshape(height, width), autoLevels=False)
        if self._shape != (width, height):
            self._shape = (width, height)
            self._shown.clear()
            self.image.setRect(-0.5, -0.5, width, height)     # pixel centres on the grid points
            self.plot.setRange(xRange=(-1, width), yRange=(-1, height))
        for name, item in (("inhibitory", self.inhibitory), ("starter", self.starters)):
            mask = np.asarray(getattr(frame, name), bool)
            if self._changed(name, mask):
                where = np.flatnonzero(mask)
                item.setData(x=where % width, y=where // width)
        if self._changed("radius", frame.radius):
            where = circle_neurons(width, height)
            self.circles.setData(x=where % width, y=where // width,
                                 size=2 * np.asarray(frame.radius)[where], symbol="o")
        if self._changed("strong", None if frame.strong_pre is None else
                         np.concatenate([frame.strong_pre, frame.strong_post, frame.strong_w])):
            self._redraw_lines()

    def _redraw_lines(self) -> None:
        f = self._frame
        if f is None or not self.show_synapses.isChecked() or f.strong_pre is None or not f.strong_pre.size:
            self.lines.setData([], [])
            self.inh_lines.setData([], [])
            return
        for item, sel in ((self.lines, f.strong_w > 0), (self.inh_lines, f.strong_w < 0)):
            pre, post = f.strong_pre[sel], f.strong_post[sel]
            xs = np.column_stack([pre % f.width, post % f.width]).ravel()
            ys = np.column_stack([pre // f.width, post // f.width]).ravel()
            item.setData(xs.astype(float), ys.astype(float))

    def clear(self) -> None:
        self._frame = None
        self._shown.clear()
        for item in (self.image, self.circles, self.inhibitory, self.starters):
            item.clear()
        self.lines.setData([], [])
        self.inh_lines.setData([], [])


class RasterView(PlotView):
    """A scrolling spike raster of the last :attr:`window` seconds (the run's
    ``analysis.raster_seconds``: the spikes a frame carries).

    Each spike is a vertical tick (one neuron tall, at least :data:`RASTER_TICK_PX` pixels) in
    one line item: a scatter plot's ``setData`` of 11,000 spikes took 12 ms, the ticks' 0.1 ms."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__("Spike raster", "time (s)", "neuron (index)", parent)
        # No grid: the time axis scrolls every frame, and grid lines made its cached picture
        # redraw (and blend) across the whole data area, a quarter of a frame's drawing.
        self.plot.showGrid(x=False, y=False)
        self.ticks = pg.PlotCurveItem(pen=pg.mkPen(20, 20, 20), connect="pairs", skipFiniteCheck=True)
        self.plot.addItem(self.ticks)
        self.window = 5.0
        self._spikes = (np.zeros(0), np.zeros(0))
        self._neurons = None
        self.plot.vb.sigYRangeChanged.connect(lambda *_: self._draw_ticks())
        self.plot.vb.sigResized.connect(lambda *_: self._draw_ticks())

    def set_frame(self, frame) -> None:
        t, n = frame.raster_times, frame.raster_neurons
        if t.size > MAX_RASTER_POINTS:
            keep = np.argsort(t)[-MAX_RASTER_POINTS:]
            t, n = t[keep], n[keep]
        self._spikes = (np.asarray(t, float), np.asarray(n, float))
        self.plot.setXRange(max(0.0, frame.t - self.window), max(frame.t, 0.1), padding=0)
        neurons = frame.width * frame.height
        if neurons != self._neurons:
            self._neurons = neurons
            self.plot.setYRange(0, neurons, padding=0.01)
        self._draw_ticks()
        self.plot.vb.prepareForPaint()      # the new range now, not in a second paint (see below)

    def spikes(self) -> tuple[np.ndarray, np.ndarray]:
        """(times, neurons) of the spikes drawn."""
        return self._spikes

    def _draw_ticks(self) -> None:
        t, n = self._spikes
        lo, hi = self.plot.vb.viewRange()[1]
        half = max(0.4, 0.5 * RASTER_TICK_PX * (hi - lo) / max(self.plot.vb.height(), 1.0))
        self.ticks.setData(np.repeat(t, 2), np.column_stack([n - half, n + half]).ravel())

    def clear(self) -> None:
        self._spikes = (np.zeros(0), np.zeros(0))
        self._neurons = None
        self.ticks.setData([], [])


class PopulationRateView(PlotView):
    """Population rate (spikes per neuron per second) with the burst threshold and bursts.

    :meth:`follow` links its time axis to another plot's (the raster's): one window, moved
    by that plot; the rate axis fits the rate shown in it."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__("Population rate and network bursts", "time (s)", "rate (Hz per neuron)", parent)
        self.plot.showGrid(x=False, y=True, alpha=0.2)     # rate levels; no lines scrolling with time
        self.curve = self.plot.plot(pen=pg.mkPen(colour(0), width=1))
        self.level = pg.InfiniteLine(angle=0, pen=pg.mkPen(200, 0, 0, 120, style=pg.QtCore.Qt.PenStyle.DashLine))
        self.bursts = pg.ScatterPlotItem(pxMode=True, size=9, symbol="t", brush=pg.mkBrush(200, 0, 0),
                                         pen=None)
        self.plot.addItem(self.level)
        self.plot.addItem(self.bursts)
        self.plot.setAutoVisible(y=True)
        self.level.hide()                 # no threshold line across an empty plot

    def follow(self, plot: pg.PlotItem) -> None:
        """Show the time window of ``plot``, moved with it; both left axes get one width, so
        the same time sits at the same x in both (above each other in the panel)."""
        self.plot.enableAutoRange(x=False)
        self.plot.setXLink(plot)
        for axis in (self.plot.getAxis("left"), plot.getAxis("left")):
            axis.setWidth(LEFT_AXIS_PX)

    def set_frame(self, frame) -> None:
        self.curve.setData(frame.pop_times, frame.pop_rate)
        if self.level.value() != frame.burst_level:
            self.level.setValue(frame.burst_level)
        self.level.show()
        lo, hi = self.plot.viewRange()[0]
        shown = frame.pop_rate[(frame.pop_times >= lo) & (frame.pop_times <= hi)]
        top = float(shown.max()) if shown.size else 1.0
        self.bursts.setData(x=frame.burst_times, y=np.full(frame.burst_times.size, max(top, frame.burst_level) * 1.05))
        # pyqtgraph applies a new range (and the auto range) when the scene is about to paint;
        # the changed transform then asked for a second paint of the raster and the rate at
        # every frame. Applied here, one paint shows it.
        self.plot.vb.prepareForPaint()

    def clear(self) -> None:
        self.curve.setData([], [])
        self.bursts.clear()
        self.level.hide()


# short titles: pyqtgraph never shortens one, and four side by side must fit a 1280 px window
HISTORY_PLOTS = (("epoch_mean_radius", "mean radius (grid)"), ("epoch_mean_rate", "mean rate (Hz)"),
                 ("epoch_synapses", "synapses"), ("epoch_bursts_per_minute", "bursts / min"))


class EpochHistoryView(QWidget):
    """Per-epoch plots: mean radius, mean rate, synapse count, bursts per minute."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        configure_pyqtgraph()
        self.canvas = pg.GraphicsLayoutWidget()
        self.plots, self.curves = {}, {}
        self._shown: dict[str, np.ndarray] = {}
        for k, (key, label) in enumerate(HISTORY_PLOTS):
            p = self.canvas.addPlot(row=0, col=k)
            p.setLabel("bottom", "epoch")
            p.setTitle(label, size="9pt")
            p.showGrid(x=True, y=True, alpha=0.2)
            p.setLimits(yMin=0)                 # none is negative: no -0.4..0.4 around all-zero bursts
            p.getAxis("left").setWidth(52)      # room for "2,500" before the first layout pass
            integer_axis(p, "bottom")
            if key == "epoch_synapses":
                integer_axis(p)
            show_axis_values(p, False)
            self.plots[key] = p
            self.curves[key] = p.plot(pen=pg.mkPen(colour(k), width=2), symbol="o", symbolSize=4,
                                      symbolBrush=colour(k))
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.canvas)

    def set_frame(self, frame) -> None:
        """New values at epoch ends only: a curve given the same data again re-ranged its plot
        and repainted both axes at every frame."""
        for key, _ in HISTORY_PLOTS:
            values = np.asarray(frame.history[key], float)
            if not same(self._shown.get(key), values):
                self._shown[key] = values.copy()
                self.curves[key].setData(np.arange(1, values.size + 1), values)
                self.plots[key].vb.prepareForPaint()     # the new range in this paint, not a second
            show_axis_values(self.plots[key], values.size > 0)

    def clear(self) -> None:
        self._shown.clear()
        for curve in self.curves.values():
            curve.setData([], [])
        for plot in self.plots.values():
            show_axis_values(plot, False)
