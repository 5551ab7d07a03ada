"""The best fit over the data, every sweep, against time from the sweep's start (ms)."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QComboBox, QHBoxLayout

from app.gui.views.base import PlotView, colour

DATA_PEN = pg.mkPen((120, 120, 120, 160), width=1)


def with_breaks(x: np.ndarray, y: np.ndarray, offsets: np.ndarray, sweeps: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """The chosen sweeps' samples joined into one polyline with NaN breaks between sweeps."""
    xs, ys = [], []
    for k in sweeps:
        a, b = int(offsets[k]), int(offsets[k + 1])
        xs += [x[a:b], [np.nan]]
        ys += [y[a:b], [np.nan]]
    if not xs:
        return np.zeros(0), np.zeros(0)
    return np.concatenate(xs), np.concatenate(ys)


class SweepFitView(PlotView):
    """Data as thin grey lines, the best individual's currents as coloured lines per sweep.

    The header combo shows all sweeps or one; the data are redrawn only when they change, the fit
    every frame.
    """

    def __init__(self, parent=None):
        super().__init__("Best fit (a colour per sweep) and data (grey)", "time from sweep start (ms)",
                         "current (pA)", parent)
        self.sweep_combo = QComboBox()
        self.sweep_combo.setMinimumContentsLength(16)
        self.sweep_combo.addItem("all sweeps", -1)
        row = QHBoxLayout()
        row.addWidget(self.title)
        row.addStretch(1)
        row.addWidget(self.sweep_combo)
        self.header.insertLayout(0, row)
        self.plot.setClipToView(True)
        self.plot.setDownsampling(auto=True, mode="peak")
        self.data_curve = self.plot.plot(pen=DATA_PEN, connect="finite", name="data")
        self.fit_curves: list[pg.PlotDataItem] = []
        self._labels: tuple[str, ...] = ()
        self._frame = None
        self._target = None
        self.sweep_combo.currentIndexChanged.connect(self._choice_changed)

    @property
    def sweeps(self) -> list[int]:
        """Indices of the sweeps on show."""
        k = self.sweep_combo.currentData()
        return list(range(len(self._labels))) if k is None or k < 0 else [k]

    def _build(self, labels: tuple[str, ...]) -> None:
        for curve in self.fit_curves:
            self.plot.removeItem(curve)
        self._labels = labels
        self.fit_curves = [self.plot.plot(pen=pg.mkPen(colour(k), width=1.5)) for k in range(len(labels))]
        self.sweep_combo.blockSignals(True)
        while self.sweep_combo.count() > 1:
            self.sweep_combo.removeItem(1)
        for k, label in enumerate(labels):
            self.sweep_combo.addItem(label, k)
        self.sweep_combo.blockSignals(False)
        self._target = None

    def _choice_changed(self) -> None:
        self._target = None
        if self._frame is not None:
            self.set_frame(self._frame)
        self.plot.enableAutoRange()

    def set_frame(self, frame) -> None:
        self._frame = frame
        labels = tuple(frame.sweep_labels)
        if labels != self._labels:
            self._build(labels)
        times, offsets = np.asarray(frame.times, float), np.asarray(frame.offsets)
        shown = set(self.sweeps)
        target = np.asarray(frame.target, float)
        if self._target is None or not np.array_equal(self._target, target):
            self.data_curve.setData(*with_breaks(times, target, offsets, sorted(shown)), connect="finite")
            self._target = target
        traces = np.asarray(frame.best_traces, float)
        for k, curve in enumerate(self.fit_curves):
            if k in shown:
                a, b = int(offsets[k]), int(offsets[k + 1])
                curve.setData(times[a:b], traces[a:b])
            else:
                curve.setData([], [])

    def fit_data(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(x, y) drawn for sweep ``k``'s fit."""
        return self.fit_curves[k].getData()

    def clear(self) -> None:
        self._frame = None
        self._target = None
        self.data_curve.setData([], [])
        for curve in self.fit_curves:
            curve.setData([], [])
