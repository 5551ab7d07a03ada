"""Views of the cultured-network panel: the culture, the spike raster, the population rate
with detected bursts, and the per-epoch history."""

from __future__ import annotations

import functools

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QCheckBox, QVBoxLayout, QWidget

from app.gui.views.base import PlotView, colour, configure_pyqtgraph, integer_axis, show_axis_values

# Connectivity circles are drawn for at most this many neurons (every k-th neuron of a larger
# culture): each circle is a path of its own, 10,000 took 1-2 s a frame in software rendering.
MAX_CIRCLES = 1000
MAX_RASTER_POINTS = 60000
LEFT_AXIS_PX = 62          # the raster's and the rate's left axes: "10,000" neurons and its label


@functools.cache
def _rate_palette() -> tuple:
    """The 64 dot brushes, made once: pyqtgraph's symbol atlas keeps one rendered dot per brush
    object, so fresh brushes every frame re-rendered all 10,000 dots of a 100x100 culture."""
    cmap = pg.ColorMap([0.0, 0.15, 1.0], [(200, 200, 200), (255, 160, 40), (200, 0, 0)])
    return tuple(pg.mkBrush(*rgba) for rgba in cmap.getLookupTable(0.0, 1.0, 64))


def rate_brushes(rate: np.ndarray, top: float = 10.0) -> list:
    """Dot colours from the recent rate: grey (silent) through orange to red (>= top Hz)."""
    palette = _rate_palette()
    idx = np.clip((np.asarray(rate) / top) * 63, 0, 63).astype(int)
    return [palette[i] for i in idx]


class CultureView(PlotView):
    """Neurons as dots coloured by recent rate, connectivity circles, strongest synapses."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__("Culture (dots: recent rate; circles: connectivity radius, of at most 1,000 neurons)",
                         "x (grid units)", "y (grid units)", parent)
        self.show_synapses = QCheckBox("strongest synapses")
        self.show_synapses.setChecked(True)
        self.header.addWidget(self.show_synapses)
        self.plot.setAspectLocked(True)
        self.circles = pg.ScatterPlotItem(pxMode=False, pen=pg.mkPen(70, 110, 200, 90), brush=None)
        self.lines = pg.PlotDataItem(pen=pg.mkPen(40, 150, 40, 120), connect="pairs")
        self.inh_lines = pg.PlotDataItem(pen=pg.mkPen(150, 40, 150, 150), connect="pairs")
        self.dots = pg.ScatterPlotItem(pxMode=True, size=6, pen=None)
        for item in (self.circles, self.lines, self.inh_lines, self.dots):
            self.plot.addItem(item)
        self._shape = None
        self.show_synapses.toggled.connect(lambda _: self._redraw_lines())
        self._frame = None

    def set_frame(self, frame) -> None:
        self._frame = frame
        n = frame.width * frame.height
        x = np.arange(n) % frame.width
        y = np.arange(n) // frame.width
        symbols = np.where(frame.inhibitory, "s", np.where(frame.starter, "t", "o"))
        self.dots.setData(x=x, y=y, brush=rate_brushes(frame.rate), symbol=list(symbols))
        every = -(-n // MAX_CIRCLES)
        self.circles.setData(x=x[::every], y=y[::every], size=2 * np.asarray(frame.radius)[::every], symbol="o")
        if self._shape != (frame.width, frame.height):
            self._shape = (frame.width, frame.height)
            self.plot.setRange(xRange=(-1, frame.width), yRange=(-1, frame.height))
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
        for item in (self.circles, self.dots):
            item.clear()
        self.lines.setData([], [])
        self.inh_lines.setData([], [])


class RasterView(PlotView):
    """A scrolling spike raster of the last :attr:`window` seconds (the run's
    ``analysis.raster_seconds``: the spikes a frame carries)."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__("Spike raster", "time (s)", "neuron (index)", parent)
        self.points = pg.ScatterPlotItem(pxMode=True, size=2, pen=None, brush=pg.mkBrush(20, 20, 20))
        self.plot.addItem(self.points)
        self.window = 5.0

    def set_frame(self, frame) -> None:
        t, n = frame.raster_times, frame.raster_neurons
        if t.size > MAX_RASTER_POINTS:
            keep = np.argsort(t)[-MAX_RASTER_POINTS:]
            t, n = t[keep], n[keep]
        self.points.setData(x=t, y=n)
        self.plot.setXRange(max(0.0, frame.t - self.window), max(frame.t, 0.1), padding=0)
        self.plot.setYRange(0, frame.width * frame.height, padding=0.01)

    def clear(self) -> None:
        self.points.clear()


class PopulationRateView(PlotView):
    """Population rate (spikes per neuron per second) with the burst threshold and bursts.

    :meth:`follow` links its time axis to another plot's (the raster's): one window, moved
    by that plot; the rate axis fits the rate shown in it."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__("Population rate and network bursts", "time (s)", "rate (Hz per neuron)", parent)
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
        self.level.setValue(frame.burst_level)
        self.level.show()
        lo, hi = self.plot.viewRange()[0]
        shown = frame.pop_rate[(frame.pop_times >= lo) & (frame.pop_times <= hi)]
        top = float(shown.max()) if shown.size else 1.0
        self.bursts.setData(x=frame.burst_times, y=np.full(frame.burst_times.size, max(top, frame.burst_level) * 1.05))

    def clear(self) -> None:
        self.curve.setData([], [])
        self.bursts.clear()
        self.level.hide()


HISTORY_PLOTS = (("epoch_mean_radius", "mean radius (grid units)"), ("epoch_mean_rate", "mean rate (Hz)"),
                 ("epoch_synapses", "synapses (count)"), ("epoch_bursts_per_minute", "bursts per minute"))


class EpochHistoryView(QWidget):
    """Per-epoch plots: mean radius, mean rate, synapse count, bursts per minute."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        configure_pyqtgraph()
        self.canvas = pg.GraphicsLayoutWidget()
        self.plots, self.curves = {}, {}
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
        for key, _ in HISTORY_PLOTS:
            values = np.asarray(frame.history[key], float)
            self.curves[key].setData(np.arange(1, values.size + 1), values)
            show_axis_values(self.plots[key], values.size > 0)

    def clear(self) -> None:
        for curve in self.curves.values():
            curve.setData([], [])
        for plot in self.plots.values():
            show_axis_values(plot, False)
