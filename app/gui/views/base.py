"""The shared base of the 2D views: a titled pyqtgraph plot that redraws from a frame."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

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


class PlotView(QWidget):
    """A titled :class:`pyqtgraph.PlotWidget` with a header row for view controls.

    Subclasses add curves and implement :meth:`set_frame` and :meth:`clear`.
    """

    def __init__(self, title: str, x_label: str = "", y_label: str = "",
                 parent: QWidget | None = None):
        super().__init__(parent)
        configure_pyqtgraph()
        self.title = QLabel(f"<b>{title}</b>")
        self.header = QVBoxLayout()
        self.header.setContentsMargins(0, 0, 0, 0)
        self.header.addWidget(self.title)
        self.plot_widget = pg.PlotWidget()
        self.plot = self.plot_widget.getPlotItem()
        self.plot.setLabel("bottom", x_label)
        self.plot.setLabel("left", y_label)
        self.plot.showGrid(x=True, y=True, alpha=0.2)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(self.header)
        layout.addWidget(self.plot_widget, 1)

    def set_frame(self, frame) -> None:
        raise NotImplementedError

    def clear(self) -> None:
        raise NotImplementedError
