"""The epidermis history: cell count, number of layers and the fraction of cells in each
state against simulated time (``frame.history``)."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QVBoxLayout, QWidget

from app.gui.views.base import (colour, configure_pyqtgraph, integer_axis, legend_outside,
                                show_axis_values)

BASAL_PEN = (46, 89, 242)
SUPRABASAL_PEN = (212, 176, 0)


class EpidermisHistoryView(QWidget):
    """Three plots side by side: cells, layers, state fractions (basal blue, suprabasal yellow)."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        configure_pyqtgraph()
        self.canvas = pg.GraphicsLayoutWidget()
        self.plots: dict[str, pg.PlotItem] = {}
        self.curves: dict[str, pg.PlotDataItem] = {}
        # the titles name the quantity (side by side, a rotated y label would repeat them)
        for k, (key, title) in enumerate((("cells", "cells (count)"), ("layers", "layers (count)"),
                                          ("fractions", "fraction of cells"))):
            p = self.canvas.addPlot(row=0, col=k)
            p.setTitle(title, size="9pt")
            p.setLabel("bottom", "time (model units)")
            p.getAxis("left").setWidth(40)
            show_axis_values(p, False)
            p.showGrid(x=True, y=True, alpha=0.2)
            p.setClipToView(True)
            p.setDownsampling(auto=True, mode="peak")
            self.plots[key] = p
        self.curves["cells"] = self.plots["cells"].plot(pen=pg.mkPen(colour(0), width=2))
        self.curves["layers"] = self.plots["layers"].plot(pen=pg.mkPen(colour(2), width=2))
        fractions = self.plots["fractions"]
        integer_axis(self.plots["cells"])
        integer_axis(self.plots["layers"])
        legend_outside(fractions)
        fractions.setYRange(0.0, 1.0)
        self.curves["basal_fraction"] = fractions.plot(pen=pg.mkPen(BASAL_PEN, width=2), name="basal")
        self.curves["suprabasal_fraction"] = fractions.plot(pen=pg.mkPen(SUPRABASAL_PEN, width=2),
                                                            name="suprabasal")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.canvas)

    def set_frame(self, frame) -> None:
        h = frame.history or {}
        t = np.asarray(h.get("t", ()), float)
        for key, curve in self.curves.items():
            values = np.asarray(h.get(key, ()), float)
            n = min(t.size, values.size)
            curve.setData(t[:n], values[:n])
        for plot in self.plots.values():
            show_axis_values(plot, t.size > 0)

    def has_data(self) -> bool:
        x, _ = self.curves["cells"].getData()
        return x is not None and len(x) > 0

    def clear(self) -> None:
        for curve in self.curves.values():
            curve.setData([], [])
        for plot in self.plots.values():
            show_axis_values(plot, False)
