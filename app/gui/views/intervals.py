"""Uncertainty of a channel fit: the intervals table, identifiability warnings and a corner
plot (MCMC samples where the run drew them, else the Gauss-Newton normal approximation)."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QLabel, QScrollArea, QSplitter, QTableWidget, QTableWidgetItem,
                               QVBoxLayout, QWidget)

from app.gui.tables import fit_columns
from app.gui.views.base import colour, configure_pyqtgraph

COLUMNS = ("parameter", "value", "sd", "95% low", "95% high", "± %")
MAX_POINTS = 2000        # samples drawn per scatter panel
PANEL_PX = 64            # a corner panel's least size (its axis label fits; the plot scrolls)
AXES_PX = 70             # the outer panels' tick values and labels


class CornerPlot(pg.GraphicsLayoutWidget):
    """P x P panels: marginals on the diagonal, pairs below it."""

    def __init__(self, parent=None):
        configure_pyqtgraph()
        super().__init__(parent)
        self.panels: dict[tuple[int, int], pg.PlotItem] = {}

    def show_samples(self, names, samples: np.ndarray) -> None:
        """Marginal histograms and pairwise scatter of ``samples`` (k, P)."""
        self._layout(names)
        rng = np.random.default_rng(0)
        shown = samples[rng.choice(len(samples), min(len(samples), MAX_POINTS), replace=False)]
        for (i, j), plot in self.panels.items():
            if i == j:
                counts, edges = np.histogram(samples[:, i], bins=30)
                plot.plot(edges, counts, stepMode="center", fillLevel=0, brush=colour(0, 120))
            else:
                plot.plot(shown[:, j], shown[:, i], pen=None, symbol="o", symbolSize=2,
                          symbolPen=None, symbolBrush=colour(0, 90))

    def show_normal(self, names, best: np.ndarray, cov: np.ndarray) -> None:
        """Marginal normal densities and 1- and 2-sd ellipses of N(best, cov)."""
        self._layout(names)
        sd = np.sqrt(np.maximum(np.diag(cov), 1e-300))
        angle = np.linspace(0, 2 * np.pi, 100)
        for (i, j), plot in self.panels.items():
            if i == j:
                x = best[i] + sd[i] * np.linspace(-4, 4, 120)
                plot.plot(x, np.exp(-0.5 * ((x - best[i]) / sd[i]) ** 2), pen=pg.mkPen(colour(0), width=1.5))
                continue
            sub = cov[np.ix_([j, i], [j, i])]
            val, vec = np.linalg.eigh(sub)
            circle = np.stack([np.cos(angle), np.sin(angle)])
            for k in (1, 2):
                ellipse = vec @ (np.sqrt(np.maximum(val, 0))[:, None] * circle) * k
                plot.plot(best[j] + ellipse[0], best[i] + ellipse[1], pen=pg.mkPen(colour(k - 1), width=1.2))
            plot.plot([best[j]], [best[i]], pen=None, symbol="+", symbolSize=8, symbolPen=colour(3))

    def _layout(self, names) -> None:
        self.clear()
        self.panels = {}
        p = len(names)
        self.setMinimumSize(p * PANEL_PX + AXES_PX, p * PANEL_PX + AXES_PX)
        for i in range(p):
            for j in range(i + 1):
                plot = self.addPlot(row=i, col=j)
                plot.hideButtons()
                for name in ("left", "bottom"):
                    plot.getAxis(name).enableAutoSIPrefix(False)
                plot.getAxis("left").setStyle(showValues=j == 0 and i > 0)
                plot.getAxis("bottom").setStyle(showValues=i == p - 1)
                if j == 0 and i > 0:
                    plot.setLabel("left", names[i])
                if i == p - 1:
                    plot.setLabel("bottom", names[j])
                self.panels[(i, j)] = plot


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
        corner.setWidgetResizable(True)
        corner.setWidget(self.corner)
        split.addWidget(corner)
        split.setSizes([380, 420])
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(split)
        self._shown = None

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
            self.corner.show_samples(iv.names, np.asarray(samples))
        else:
            self.corner.show_normal(iv.names, iv.best, iv.covariance)

    def clear(self) -> None:
        self._shown = None
        self.table.setRowCount(0)
        self.note.setText("Intervals appear when the fit ends (Fit tab: intervals on).")
        self.corner.clear()
        self.corner.setMinimumSize(0, 0)
