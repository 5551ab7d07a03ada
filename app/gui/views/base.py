"""The shared base of the 2D views: a titled pyqtgraph plot that redraws from a frame."""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QVBoxLayout, QWidget

from app.gui.labels import ElidedLabel

PALETTE = [(31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40),
           (148, 103, 189), (140, 86, 75), (227, 119, 194), (127, 127, 127)]
_configured = False


def configure_pyqtgraph() -> None:
    """White background, black axes, no antialiasing (fast): set once for the app."""
    global _configured
    if not _configured:
        pg.setConfigOptions(background="w", foreground="k", antialias=False)
        _configured = True


def colour(i: int, alpha: int = 255) -> tuple[int, int, int, int]:
    return (*PALETTE[i % len(PALETTE)], alpha)


def cache_axes(plot: pg.PlotItem) -> None:
    """Keep each axis as a pixmap that is redrawn only when its range or labels change (text
    drawing dominates a pyqtgraph repaint; a frame that leaves an axis alone then costs a blit)."""
    for name in ("bottom", "left", "top", "right"):
        plot.getAxis(name).setCacheMode(pg.QtWidgets.QGraphicsItem.CacheMode.DeviceCoordinateCache)


class CurveSample(pg.ItemSample):
    """A legend sample that looks like its curve: the line in the curve's pen; a filled curve
    (a histogram) as a bar in its fill brush outlined by the pen; a curve with a band (set
    ``curve.legend_band`` to the band's brush: the ± SD band) as the line across a filled
    swatch. pyqtgraph's own sample draws a filled curve as a line and a triangle."""

    def paint(self, p, *args) -> None:
        item = self.item
        if not isinstance(item, pg.PlotDataItem) or not item.isVisible():
            super().paint(p, *args)               # scatter plots, bars, the hidden-item eye
            return
        from PySide6.QtCore import QRectF

        opts = item.opts
        pen = pg.mkPen(opts["pen"])
        band = getattr(item, "legend_band", None)
        if band is not None:
            p.fillRect(QRectF(0, 4, 20, 13), pg.mkBrush(band))
        if opts.get("fillLevel") is not None and opts.get("fillBrush") is not None:
            p.setPen(pen)
            p.setBrush(pg.mkBrush(opts["fillBrush"]))
            p.drawRect(QRectF(3, 6, 14, 12))
        else:
            p.setPen(pen)
            p.drawLine(0, 10, 20, 10)
        if opts.get("symbol") is not None:
            from pyqtgraph.graphicsItems.ScatterPlotItem import drawSymbol

            scatter = item.scatter.opts
            p.translate(10, 10)
            drawSymbol(p, opts["symbol"], scatter["size"], pg.mkPen(scatter["pen"]), pg.mkBrush(scatter["brush"]))


class OutsideLegend(pg.LegendItem):
    """A legend for the column beside the data: it never asks for more height than the data
    area has (a 9-parameter legend made a short plot taller than its widget, cutting off its
    time axis); it takes another column instead."""

    def __init__(self):
        self.room = math.inf          # the data area's height (px)
        super().__init__(verSpacing=-4, sampleType=CurveSample)

    def set_room(self, height: float) -> None:
        self.room = height
        self.fit_columns()

    def fit_columns(self) -> None:
        """As many columns as the entries need to fit in :attr:`room`."""
        if not self.items or not math.isfinite(self.room):
            return
        entry = max(max(label.minimumHeight(), sample.height()) for sample, label in self.items)
        rows = max(1, int(self.room // max(entry + self.layout.verticalSpacing(), 1)))
        columns = math.ceil(len(self.items) / rows)
        if columns != self.columnCount:
            self.setColumnCount(columns)

    def sizeHint(self, which, constraint=None):
        """No least height: the data area's height decides the row's, then the columns."""
        from PySide6.QtCore import QSizeF, Qt

        hint = super().sizeHint(which, constraint if constraint is not None else QSizeF())
        return QSizeF(hint.width(), 0.0) if which == Qt.SizeHint.MinimumSize else hint

    def updateSize(self) -> None:
        """pyqtgraph's calls this after the entries change; it set the legend's geometry itself
        (to 0, 0): here the plot's layout places and sizes it."""
        self.fit_columns()
        self.updateGeometry()


def legend_outside(plot: pg.PlotItem) -> pg.LegendItem:
    """A legend in its own column right of the data (never over a curve, never taller than the
    data area); named curves added to ``plot`` join it, as with ``addLegend``, each shown by a
    :class:`CurveSample`."""
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QSizePolicy

    legend = OutsideLegend()
    plot.layout.addItem(legend, 2, 3)
    plot.layout.setColumnStretchFactor(3, 0)
    legend.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Maximum)
    plot.layout.setAlignment(legend, Qt.AlignmentFlag.AlignTop)
    plot.vb.sigResized.connect(lambda vb: legend.set_room(vb.height()))
    plot.legend = legend
    return legend


def integer_axis(plot: pg.PlotItem, name: str = "left", on: bool = True) -> None:
    """Ticks at whole numbers only (counts: cells, layers, synapses); ``on=False`` gives the
    axis pyqtgraph's ticks back."""
    plot.getAxis(name).setTickSpacing()  # pyqtgraph's automatic spacing, then filtered
    axis = plot.getAxis(name)
    vars(axis).pop("tickValues", None)
    axis.picture = None                  # redrawn with the ticks now asked for
    axis.update()
    if not on:
        return
    original = axis.tickValues

    def whole(minVal, maxVal, size):
        levels = []
        for spacing, values in original(minVal, maxVal, size):
            if spacing >= 1:
                levels.append((spacing, values))
            else:                                   # sub-unit spacing: whole numbers instead
                lo, hi = int(np.ceil(minVal)), int(np.floor(maxVal))
                levels.append((1.0, [float(v) for v in range(lo, hi + 1)] if hi - lo < 12 else []))
                break
        return levels

    axis.tickValues = whole


def sparse_log_labels(plot: pg.PlotItem, name: str = "left") -> None:
    """On a log axis label only the ticks at 1, 2 and 5 times a power of ten: across about a
    decade pyqtgraph labelled every 1..9 x 10^k and the labels ran into each other."""
    axis = plot.getAxis(name)
    original = axis.logTickStrings

    def sparse(values, scale, spacing):
        strings = original(values, scale, spacing)
        shown = []
        for value, text in zip(values, strings):
            digit = round(10 ** (float(value) - math.floor(float(value) + 1e-9)))
            shown.append(text if digit in (1, 2, 5, 10) else "")
        return shown

    axis.logTickStrings = sparse


def show_axis_values(plot: pg.PlotItem, shown: bool) -> None:
    """Tick values on (data drawn) or off (no data yet: no made-up ranges such as 0..1).

    Values are written out in full: pyqtgraph's scale suffix ("(x0.001)") would follow a label
    that already names its unit, and made labels too long for their axis."""
    for name in ("bottom", "left"):
        axis = plot.getAxis(name)
        if axis.style.get("showValues", True) != shown:
            axis.setStyle(showValues=shown)
        if axis.autoSIPrefix:
            axis.enableAutoSIPrefix(False)


class PlotView(QWidget):
    """A titled :class:`pyqtgraph.PlotWidget` with a header row for view controls.

    Subclasses add curves and implement :meth:`set_frame` and :meth:`clear`. Until the first
    frame (and after :meth:`clear`) the axes carry their labels but no tick values: an empty
    plot shows no range it has not got.
    """

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        for name, shown in (("set_frame", True), ("clear", False)):
            method = cls.__dict__.get(name)
            if method is not None and not getattr(method, "_marks_axes", False):
                setattr(cls, name, _marking_axes(method, shown))

    def __init__(self, title: str, x_label: str = "", y_label: str = "",
                 parent: QWidget | None = None):
        super().__init__(parent)
        configure_pyqtgraph()
        # bold, one line, eliding where narrow: a title never widens the views' column
        self.title = ElidedLabel(title, least=120)
        bold = self.title.font()
        bold.setBold(True)
        self.title.setFont(bold)
        self.header = QVBoxLayout()
        self.header.setContentsMargins(0, 0, 0, 0)
        self.header.addWidget(self.title)
        self.plot_widget = pg.PlotWidget()
        self.plot = self.plot_widget.getPlotItem()
        self.plot.setLabel("bottom", x_label)
        self.plot.setLabel("left", y_label)
        self.plot.showGrid(x=True, y=True, alpha=0.2)
        cache_axes(self.plot)
        show_axis_values(self.plot, False)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(self.header)
        layout.addWidget(self.plot_widget, 1)

    def set_frame(self, frame) -> None:
        raise NotImplementedError

    def clear(self) -> None:
        raise NotImplementedError


def _marking_axes(method, shown: bool):
    """``method`` followed by showing (a frame was drawn) or hiding (cleared) the tick values."""
    def wrapper(self, *args, **kwargs):
        result = method(self, *args, **kwargs)
        show_axis_values(self.plot, shown)
        return result

    wrapper._marks_axes = True
    wrapper.__name__, wrapper.__doc__ = method.__name__, method.__doc__
    return wrapper
