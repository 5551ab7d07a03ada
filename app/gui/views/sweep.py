"""The sweep view: one metric against the swept keys, drawn the way the number of keys asks.

One key: replicate mean with SD error bars. Two keys on a grid: a heat map with a colour bar.
More keys (or a sampled box): a scatter matrix, each pair of keys coloured by the metric.
Clicking a point emits ``point_clicked`` with the point's run name (``p00012-r00``).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QVBoxLayout, QWidget

NON_METRICS = {"point", "replicate", "name", "seed", "status", "error", "wall_seconds", "backend",
               "device", "device_index", "worker"}


def metric_columns(rows: Sequence[Mapping[str, Any]], keys: Sequence[str]) -> list[str]:
    """Numeric columns that are neither swept keys nor bookkeeping, in first-seen order."""
    out: list[str] = []
    for row in rows:
        for col, value in row.items():
            if col in out or col in keys or col in NON_METRICS:
                continue
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                out.append(col)
    return out


def aggregate(rows: Sequence[Mapping[str, Any]], keys: Sequence[str], metric: str):
    """Per point: (key values (P, K), replicate mean (P,), replicate SD (P,), first run name)."""
    groups: dict[int, list[Mapping[str, Any]]] = {}
    for row in rows:
        if row.get("status", "ok") == "ok" and isinstance(row.get(metric), (int, float)):
            groups.setdefault(int(row["point"]), []).append(row)
    points = sorted(groups)
    x = np.array([[float(groups[p][0][k]) for k in keys] for p in points]).reshape(len(points), len(keys))
    vals = [np.array([float(r[metric]) for r in groups[p]]) for p in points]
    mean = np.array([v.mean() for v in vals])
    sd = np.array([v.std(ddof=1) if v.size > 1 else 0.0 for v in vals])
    names = [str(groups[p][0]["name"]) for p in points]
    return x, mean, sd, names


def _short(key: str) -> str:
    return key.split(".")[-1]


class SweepView(QWidget):
    """A metric of the sweep against its keys; the metric is picked from a combo box."""

    point_clicked = Signal(str)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.rows: list[Mapping[str, Any]] = []
        self.keys: list[str] = []
        self.metric_box = QComboBox()
        self.metric_box.currentTextChanged.connect(lambda _: self.redraw())
        self.note = QLabel("")
        self.plots = pg.GraphicsLayoutWidget()
        self.plots.setBackground("w")
        top = QHBoxLayout()
        top.addWidget(QLabel("Metric:"))
        top.addWidget(self.metric_box, 1)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.plots, 1)
        layout.addWidget(self.note)

    def set_rows(self, rows: Sequence[Mapping[str, Any]], keys: Sequence[str]) -> None:
        """Show these table rows (called again as rows stream in)."""
        self.rows, self.keys = list(rows), list(keys)
        metrics = metric_columns(self.rows, self.keys)
        current = self.metric_box.currentText()
        if metrics != [self.metric_box.itemText(i) for i in range(self.metric_box.count())]:
            self.metric_box.blockSignals(True)
            self.metric_box.clear()
            self.metric_box.addItems(metrics)
            if current in metrics:
                self.metric_box.setCurrentText(current)
            self.metric_box.blockSignals(False)
        self.redraw()

    def redraw(self) -> None:
        self.plots.clear()
        metric = self.metric_box.currentText()
        if not metric or not self.keys:
            return
        x, mean, sd, names = aggregate(self.rows, self.keys, metric)
        if not names:
            return
        failed = sum(1 for r in self.rows if r.get("status", "ok") != "ok")
        self.note.setText(f"{len(names)} points, {len(self.rows)} runs"
                          + (f", {failed} failed" if failed else "") + "; click a point to open its run")
        grid = len(self.keys) == 2 and len(np.unique(x[:, 0])) * len(np.unique(x[:, 1])) == len(names)
        if len(self.keys) == 1:
            self._line(x[:, 0], mean, sd, names, metric)
        elif grid:
            self._heat_map(x, mean, names, metric)
        else:
            self._scatter_matrix(x, mean, names, metric)

    # ---- one key ----------------------------------------------------------------------------
    def _line(self, x, mean, sd, names, metric) -> None:
        order = np.argsort(x)
        x, mean, sd = x[order], mean[order], sd[order]
        names = [names[i] for i in order]
        plot = self._add_plot(row=0, col=0)
        log_x = bool(np.all(x > 0) and x.max() / x.min() >= 10)
        xs = np.log10(x) if log_x else x        # items added by hand ignore pyqtgraph's log mode
        plot.addItem(pg.ErrorBarItem(x=xs, y=mean, height=2 * sd, beam=0.0, pen=pg.mkPen("#555")))
        plot.plot(xs, mean, pen=pg.mkPen("#1f77b4", width=2))
        self._clickable(plot, xs, mean, names, brushes=None)
        if log_x:
            ticks = [m * 10.0 ** d for d in range(int(np.floor(xs.min())), int(np.ceil(xs.max())) + 1)
                     for m in (1, 2, 5)]
            plot.getAxis("bottom").setTicks([[(np.log10(t), f"{t:g}") for t in ticks
                                              if x.min() / 1.5 <= t <= x.max() * 1.5], []])
        plot.setLabel("bottom", self.keys[0] + (" (log scale)" if log_x else ""))
        plot.setLabel("left", metric + (" (mean ± SD of replicates)" if sd.any() else ""))
        plot.showGrid(x=True, y=True, alpha=0.3)

    # ---- two keys on a grid -----------------------------------------------------------------
    def _heat_map(self, x, mean, names, metric) -> None:
        ux, uy = np.unique(x[:, 0]), np.unique(x[:, 1])
        image = np.full((ux.size, uy.size), np.nan)
        for (a, b), m in zip(x, mean):
            image[np.searchsorted(ux, a), np.searchsorted(uy, b)] = m
        plot = self._add_plot(row=0, col=0)
        item = pg.ImageItem(image)
        plot.addItem(item)
        finite = image[np.isfinite(image)]
        lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
        bar = pg.ColorBarItem(values=(lo, hi if hi > lo else lo + 1), colorMap=pg.colormap.get("viridis"),
                              label=metric)
        bar.setImageItem(item, insert_in=plot)
        plot.getAxis("bottom").setTicks([[(i + 0.5, f"{v:.3g}") for i, v in enumerate(ux)]])
        plot.getAxis("left").setTicks([[(j + 0.5, f"{v:.3g}") for j, v in enumerate(uy)]])
        plot.setLabel("bottom", self.keys[0])
        plot.setLabel("left", self.keys[1])
        centres_x = np.searchsorted(ux, x[:, 0]) + 0.5
        centres_y = np.searchsorted(uy, x[:, 1]) + 0.5
        self._clickable(plot, centres_x, centres_y, names, brushes=pg.mkBrush(0, 0, 0, 0))

    # ---- more keys ----------------------------------------------------------------------------
    def _scatter_matrix(self, x, mean, names, metric) -> None:
        cmap = pg.colormap.get("viridis")
        span = np.ptp(mean) or 1.0
        brushes = [pg.mkBrush(cmap.map((m - mean.min()) / span, mode="qcolor")) for m in mean]
        k = len(self.keys)
        for i in range(k):
            for j in range(k):
                plot = self._add_plot(row=i, col=j)
                if i == j:
                    self._clickable(plot, x[:, j], mean, names, brushes)
                    plot.setLabel("left", metric if j == 0 else "")
                else:
                    self._clickable(plot, x[:, j], x[:, i], names, brushes)
                    if j == 0:
                        plot.setLabel("left", _short(self.keys[i]))
                if i == k - 1:
                    plot.setLabel("bottom", _short(self.keys[j]))
        self.note.setText(self.note.text() + f"; colour: {metric} from {mean.min():.3g} (purple) "
                          f"to {mean.max():.3g} (yellow); diagonal: {metric} against each key")

    def _add_plot(self, row: int, col: int):
        """A plot whose axes write values in full: pyqtgraph's "(x0.001)" scale suffix made a
        key such as a rate read as something else."""
        plot = self.plots.addPlot(row=row, col=col)
        for name in ("bottom", "left"):
            plot.getAxis(name).enableAutoSIPrefix(False)
        return plot

    def _clickable(self, plot, x, y, names, brushes) -> None:
        scatter = pg.ScatterPlotItem(x=np.asarray(x, float), y=np.asarray(y, float), data=names, size=9,
                                     brush=brushes if brushes is not None else pg.mkBrush("#1f77b4"),
                                     pen=pg.mkPen("k", width=0.5), hoverable=True)
        scatter.sigClicked.connect(lambda _item, points, _ev: points and
                                   self.point_clicked.emit(str(points[0].data())))
        plot.addItem(scatter)
