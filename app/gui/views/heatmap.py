"""Heat map of the mean A count per grid cell at a chosen sample time (spatial SSA model)."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg

from app.gui.views.base import PlotView


class HeatMapView(PlotView):
    """``frame.mean[k][grid_index]`` as an image with a colour bar."""

    def __init__(self, parent=None):
        super().__init__("Mean A per grid cell", "column", "row", parent)
        self.image = pg.ImageItem(axisOrder="row-major")
        self.plot.addItem(self.image)
        self.plot.setAspectLocked(True)
        self.plot.invertY(True)
        self.plot.showGrid(x=False, y=False)
        self.colour_bar = pg.ColorBarItem(values=(0, 1), colorMap=pg.colormap.get("viridis"),
                                          interactive=False)
        self.colour_bar.setImageItem(self.image, insert_in=self.plot)
        self.frame = None
        self.index = -1

    def clear(self) -> None:
        self.frame = None
        self.image.clear()

    def set_frame(self, frame) -> None:
        self.frame = frame
        self.show_index(self.index)

    def show_index(self, k: int) -> None:
        """Show sample ``k`` (negative: the newest)."""
        self.index = k
        frame = self.frame
        if frame is None or frame.grid_index is None or len(frame.times) == 0:
            return
        k = len(frame.times) - 1 if k < 0 or k >= len(frame.times) else k
        values = np.asarray(frame.mean[k])[np.asarray(frame.grid_index)]
        self.image.setImage(values, autoLevels=False)
        top = float(values.max()) if values.size else 1.0
        self.colour_bar.setLevels((0.0, max(top, 1e-9)))
        self.title.setText(f"Mean A per grid cell at t = {frame.times[k]:.4g}")

    def image_data(self) -> np.ndarray | None:
        return self.image.image
