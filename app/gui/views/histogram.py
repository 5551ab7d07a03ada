"""Histogram of one species at one sample time, with an optional comparison ensemble.

Both ensembles are drawn as step curves of probability per count value (probability of a
bin divided by its width), so histograms with different bin layouts line up; the distance
is computed by :func:`app.sims.ssa.stats.histogram_distance` on the two histograms.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QSlider

from app.gui.views.base import PlotView, colour, legend_outside
from app.sims.ssa.stats import DISTANCE_CONVENTION, Histogram, histogram_distance


def step_data(hist: Histogram) -> tuple[np.ndarray, np.ndarray]:
    """(edges, probability per count value) of ``hist`` for a ``stepMode='center'`` curve."""
    p = hist.probabilities() / max(hist.width, 1)
    return hist.edges, p


class HistogramView(PlotView):
    """Species combo, time slider, the histogram and the comparison's distance.

    The slider follows the newest sample while it sits at its right end; once moved by the
    user it stays put until moved back to the end.
    """

    index_changed = Signal(int)

    def __init__(self, parent=None):
        super().__init__("Histogram", "count", "probability per count value", parent)
        self.species_combo = QComboBox()
        self.species_combo.setMinimumContentsLength(8)
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setRange(0, 0)
        self.time_label = QLabel("t = –")
        self.time_label.setMinimumWidth(90)
        row = QHBoxLayout()
        row.addWidget(QLabel("Species"))
        row.addWidget(self.species_combo)
        row.addWidget(QLabel("Time"))
        row.addWidget(self.slider, 1)
        row.addWidget(self.time_label)
        self.header.addLayout(row)
        self.distance_label = QLabel("")
        self.distance_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.header.addWidget(self.distance_label)
        self.legend = legend_outside(self.plot)
        self.curve = self.plot.plot(stepMode="center", fillLevel=0, pen=pg.mkPen(colour(0), width=2),
                                    brush=pg.mkBrush(colour(0, 60)), name="this run")
        self.ref_curve = self.plot.plot(stepMode="center", pen=pg.mkPen(colour(3), width=2))
        self._show_reference(False)
        self.frame = None
        self.reference = None
        self.follow = True
        self.distance: tuple[float, float] | None = None
        self.species_combo.currentIndexChanged.connect(self.redraw)
        self.slider.valueChanged.connect(self._slider_moved)

    # ---- inputs -------------------------------------------------------------------------
    def clear(self) -> None:
        self.frame = None
        self.follow = True
        self.species_combo.blockSignals(True)
        self.species_combo.clear()
        self.species_combo.blockSignals(False)
        self.slider.blockSignals(True)
        self.slider.setRange(0, 0)
        self.slider.blockSignals(False)
        self.curve.setData([], [])
        self.time_label.setText("t = –")
        self.redraw()

    def set_frame(self, frame) -> None:
        names = [frame.species[i] for i in frame.hist_species]
        if [self.species_combo.itemText(i) for i in range(self.species_combo.count())] != names:
            self.species_combo.blockSignals(True)
            self.species_combo.clear()
            self.species_combo.addItems(names)
            self.species_combo.blockSignals(False)
        self.frame = frame
        last = len(frame.times) - 1
        self.slider.blockSignals(True)
        self.slider.setRange(0, max(last, 0))
        if self.follow:
            self.slider.setValue(last)
        self.slider.blockSignals(False)
        self.redraw()

    def set_reference(self, reference) -> None:
        """A comparison ensemble (:class:`EnsembleHistograms`) or None to remove it."""
        self.reference = reference
        self.redraw()

    def _slider_moved(self, value: int) -> None:
        self.follow = value >= self.slider.maximum()
        self.redraw()

    # ---- drawing ------------------------------------------------------------------------
    @property
    def index(self) -> int:
        return self.slider.value()

    def species_name(self) -> str:
        return self.species_combo.currentText()

    def current_histogram(self) -> Histogram | None:
        frame, h = self.frame, self.species_combo.currentIndex()
        if frame is None or h < 0 or len(frame.times) == 0:
            return None
        return frame.histogram(min(self.index, len(frame.times) - 1), h)

    def redraw(self) -> None:
        hist = self.current_histogram()
        if hist is None:
            self.curve.setData([], [])
            self._show_reference(False)
            self.distance_label.setText("")
            return
        k = min(self.index, len(self.frame.times) - 1)
        self.time_label.setText(f"t = {self.frame.times[k]:.4g}")
        self.curve.setData(*step_data(hist))
        self._draw_reference(k, hist)
        self.index_changed.emit(k)

    def _draw_reference(self, k: int, hist: Histogram) -> None:
        self.distance = None
        ref = self.reference.histogram(k, self.species_name()) if self.reference else None
        if ref is None or ref.total == 0 or hist.total == 0:
            self._show_reference(False)
            self.distance_label.setText(self._missing_reference_text(k))
            return
        self.ref_curve.setData(*step_data(ref))
        self._show_reference(True)
        self.distance = histogram_distance(hist, ref)
        d, self_d = self.distance
        note = ""
        t_ref = float(self.reference.times[k])
        if not np.isclose(t_ref, float(self.frame.times[k]), rtol=1e-6, atol=1e-12):
            note = f"  (comparison at t = {t_ref:.4g})"
        self.distance_label.setText(
            f"vs {self.reference.label}: D = {d:.3f} (self-distance {self_d:.3f})   "
            f"{DISTANCE_CONVENTION}{note}")

    def _show_reference(self, visible: bool) -> None:
        """Show or hide the comparison curve and its legend entry."""
        self.legend.removeItem(self.ref_curve)
        if visible:
            self.legend.addItem(self.ref_curve, self.reference.label)
        self.ref_curve.setVisible(visible)

    def _missing_reference_text(self, k: int) -> str:
        if self.reference is None:
            return ""
        if self.species_name() not in self.reference.species:
            return f"{self.reference.label} has no histogram of {self.species_name()}"
        return f"{self.reference.label}: no sample {k} yet"
