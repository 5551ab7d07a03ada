"""The best individual's parameters against generation, each normalised to its search range."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt

from app.gui.views.base import PALETTE, PlotView, colour, integer_axis, legend_outside

STYLES = (Qt.PenStyle.SolidLine, Qt.PenStyle.DashLine, Qt.PenStyle.DotLine, Qt.PenStyle.DashDotLine)


def pen(i: int) -> pg.QtGui.QPen:
    """Colour cycles through the palette, then the line style changes (for > 8 parameters)."""
    return pg.mkPen(colour(i), width=1.5, style=STYLES[(i // len(PALETTE)) % len(STYLES)])


class ParameterHistoryView(PlotView):
    """One curve per parameter: (best - min) / (max - min) against generation, 0..1."""

    def __init__(self, parent=None):
        super().__init__("Best parameters (normalised to their ranges)", "generation",
                         "(p − min) / (max − min)", parent)
        self.plot.setYRange(0.0, 1.0, padding=0.03)
        self.plot.enableAutoRange(x=True, y=False)
        integer_axis(self.plot, "bottom")             # generations (3 of them showed 0.5 steps)
        self.legend = legend_outside(self.plot)
        self.curves: list[pg.PlotDataItem] = []
        self._names: tuple[str, ...] = ()

    def _build(self, names: tuple[str, ...]) -> None:
        self.clear()
        self._names = names
        self.curves = [self.plot.plot(pen=pen(i), name=name) for i, name in enumerate(names)]

    def set_frame(self, frame) -> None:
        names = tuple(frame.param_names)
        if names != self._names:
            self._build(names)
        history = np.asarray(frame.history_params, float)
        if history.ndim != 2 or not len(history):
            return
        x = np.arange(len(history), dtype=float)
        for i, curve in enumerate(self.curves):
            curve.setData(x, history[:, i])

    def clear(self) -> None:
        for curve in self.curves:
            self.plot.removeItem(curve)
        self.legend.clear()
        self.curves, self._names = [], ()
