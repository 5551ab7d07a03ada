"""Mean ± SD trajectories of an SSA ensemble, one curve and band per species."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg

from app.gui.views.base import PlotView, colour, legend_outside

MAX_CURVES = 8
INVISIBLE = pg.mkPen((0, 0, 0, 0))


class TrajectoryView(PlotView):
    """Mean ± one standard deviation against time for up to :data:`MAX_CURVES` species.

    For the spatial grid (``frame.grid_index`` set) it draws one curve: the sum over the
    grid cells of the mean A count ("sum of means"), without a band.
    """

    def __init__(self, parent=None):
        super().__init__("Mean ± SD", "time (model time units)", "molecules (count)", parent)
        self.plot.setClipToView(True)
        self.plot.setDownsampling(auto=True, mode="peak")
        self.legend = legend_outside(self.plot)
        self.curves: list[pg.PlotDataItem] = []
        self.bands: list[tuple[pg.PlotDataItem, pg.PlotDataItem, pg.FillBetweenItem]] = []
        self._names: tuple[str, ...] = ()

    def set_time_span(self, t_end: float) -> None:
        """Fix the time axis to [0, t_end] for the coming run (counts keep auto-ranging)."""
        self.plot.setXRange(0.0, t_end, padding=0.02)
        self.plot.enableAutoRange(x=False, y=True)

    def clear(self) -> None:
        self.plot.clear()
        self.legend.clear()
        self.curves, self.bands, self._names = [], [], ()

    def _build(self, names: tuple[str, ...], with_bands: bool) -> None:
        self.clear()
        self._names = names
        for i, name in enumerate(names):
            curve = pg.PlotDataItem(pen=pg.mkPen(colour(i), width=2), name=name)
            if with_bands:
                # an invisible pen, not pen=None: without a pen the curve has no path to fill
                lower = pg.PlotDataItem(pen=INVISIBLE)
                upper = pg.PlotDataItem(pen=INVISIBLE)
                fill = pg.FillBetweenItem(lower, upper, brush=pg.mkBrush(colour(i, 50)))
                self.plot.addItem(fill)
                self.bands.append((lower, upper, fill))
                curve.legend_band = fill.brush()        # the legend shows the band with the line
            self.plot.addItem(curve)
            self.curves.append(curve)

    def set_frame(self, frame) -> None:
        times = np.asarray(frame.times, float)
        if frame.grid_index is not None:
            names = ("A total (sum of means)",)
            if names != self._names:
                self._build(names, with_bands=False)
            total = frame.mean[:, np.asarray(frame.grid_index).ravel()].sum(axis=1)
            self.curves[0].setData(times, total)
            return
        names = tuple(frame.species[:MAX_CURVES])
        if names != self._names:
            self._build(names, with_bands=True)
        for i, curve in enumerate(self.curves):
            mean, std = frame.mean[:, i], frame.std[:, i]
            curve.setData(times, mean)
            lower, upper, _ = self.bands[i]
            lower.setData(times, mean - std)
            upper.setData(times, mean + std)
