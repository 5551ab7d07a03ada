"""GA convergence: best and median chi^2 against generation or wall time, log scale."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QCheckBox, QHBoxLayout

from app.gui.views.base import PlotView, colour, legend_outside

FLOOR = 1e-300   # log axes cannot show 0 (an exact fit); drawn at this floor instead


def positive(values: np.ndarray) -> np.ndarray:
    """``values`` with non-positive and non-finite entries lifted to a drawable floor."""
    y = np.asarray(values, float)
    ok = np.isfinite(y) & (y > 0)
    floor = y[ok].min() * 0.1 if ok.any() else 1.0
    return np.where(ok, y, max(floor, FLOOR))


class ConvergenceView(PlotView):
    """Best and median chi^2 per generation; the header toggle switches the x axis to wall time."""

    def __init__(self, parent=None):
        super().__init__("Convergence", "generation", "χ²", parent)
        self.wall_toggle = QCheckBox("against wall time (s)")
        row = QHBoxLayout()
        row.addWidget(self.title)
        row.addStretch(1)
        row.addWidget(self.wall_toggle)
        self.header.insertLayout(0, row)
        self.plot.setLogMode(x=False, y=True)
        self.legend = legend_outside(self.plot)
        self.best = self.plot.plot(pen=pg.mkPen(colour(0), width=2), name="best χ²")
        self.median = self.plot.plot(pen=pg.mkPen(colour(1), width=1.5), name="median χ²")
        self._frame = None
        self.wall_toggle.toggled.connect(self._axis_changed)

    @property
    def against_wall(self) -> bool:
        return self.wall_toggle.isChecked()

    def _axis_changed(self) -> None:
        self.plot.setLabel("bottom", "wall time (s)" if self.against_wall else "generation")
        if self._frame is not None:
            self.set_frame(self._frame)
        self.plot.enableAutoRange()

    def set_frame(self, frame) -> None:
        self._frame = frame
        best = np.asarray(frame.history_best, float)
        x = (np.asarray(frame.history_wall, float) if self.against_wall
             else np.arange(len(best), dtype=float))
        self.best.setData(x, positive(best))
        self.median.setData(x, positive(frame.history_median))

    def clear(self) -> None:
        self._frame = None
        self.best.setData([], [])
        self.median.setData([], [])
