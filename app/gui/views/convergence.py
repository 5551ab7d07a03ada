"""Fit convergence: best and median chi^2 against step or wall time, log scale; a labelled
line where the optimiser changes (GA or CMA-ES, then LM or Nelder-Mead, then MCMC)."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QCheckBox, QHBoxLayout

from app.gui.views.base import PlotView, colour, integer_axis, legend_outside, sparse_log_labels

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
        super().__init__("Convergence", "generation", "χ² (pA²)", parent)
        self.wall_toggle = QCheckBox("against wall time (s)")
        row = QHBoxLayout()
        row.addWidget(self.title)
        row.addStretch(1)
        row.addWidget(self.wall_toggle)
        self.header.insertLayout(0, row)
        self.plot.setLogMode(x=False, y=True)
        sparse_log_labels(self.plot)
        integer_axis(self.plot, "bottom")
        self.legend = legend_outside(self.plot)
        self.best = self.plot.plot(pen=pg.mkPen(colour(0), width=2), name="best χ²")
        self.median = self.plot.plot(pen=pg.mkPen(colour(1), width=1.5), name="median χ²")
        self._frame = None
        self.phase_lines: list[pg.InfiniteLine] = []
        self.wall_toggle.toggled.connect(self._axis_changed)

    @property
    def against_wall(self) -> bool:
        return self.wall_toggle.isChecked()

    def _axis_changed(self) -> None:
        self.plot.setLabel("bottom", "wall time (s)" if self.against_wall else "generation")
        integer_axis(self.plot, "bottom", on=not self.against_wall)
        if self._frame is not None:
            self.set_frame(self._frame)
        self.plot.enableAutoRange()

    def set_frame(self, frame) -> None:
        self._frame = frame
        best = np.asarray(frame.history_best, float)
        x = (np.asarray(frame.history_wall, float) if self.against_wall
             else np.arange(len(best), dtype=float))
        self.best.setData(x, positive(best))
        median = np.asarray(frame.history_median, float)
        shown = np.isfinite(median)          # MCMC steps have no median
        self.median.setData(x[shown], positive(median[shown]))
        self._phase_lines(x, getattr(frame, "history_phase", None))

    def _phase_lines(self, x: np.ndarray, phases) -> None:
        """A vertical line labelled with the optimiser's name where each phase begins."""
        from app.sims.channel.simulation import PHASES
        for line in self.phase_lines:
            self.plot.removeItem(line)
        self.phase_lines = []
        if phases is None or len(phases) != len(x) or not len(x):
            return
        phases = np.asarray(phases)
        starts = np.flatnonzero(np.r_[True, phases[1:] != phases[:-1]])
        for k in starts:
            pen = pg.mkPen((120, 120, 120), style=pg.QtCore.Qt.PenStyle.DashLine)
            line = pg.InfiniteLine(pos=float(x[k]), angle=90, pen=pen,
                                   label=PHASES[int(phases[k])], labelOpts={"position": 0.92, "color": (60, 60, 60)})
            self.plot.addItem(line)
            self.phase_lines.append(line)

    def phase_labels(self) -> list[str]:
        return [line.label.textItem.toPlainText() for line in self.phase_lines]

    def clear(self) -> None:
        self._frame = None
        self.best.setData([], [])
        self.median.setData([], [])
        self._phase_lines(np.zeros(0), None)
