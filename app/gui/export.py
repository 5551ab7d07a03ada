"""The main plot of a finished run as a PNG, for ``python -m app run`` (no window needed),
and the atomic PNG writers the panels and figures share."""

from __future__ import annotations

import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)

SIZE = (900, 520)


def ensure_application():
    """The running QApplication, or a new one (offscreen when there is no display)."""
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance()
    if app is None:
        if not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"):
            os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
        app = QApplication([])
    return app


def save_png(image, path: str | Path) -> Path:
    """A QImage or QPixmap as PNG, written atomically (temporary file, then rename)."""
    from PySide6.QtCore import QBuffer, QIODevice

    from app.sims.common.output import atomic_write_bytes

    buffer = QBuffer()
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    if not image.save(buffer, "PNG"):
        raise OSError(f"could not encode {path}")
    return atomic_write_bytes(path, bytes(buffer.data()))


def save_figure(widget, path: str | Path) -> Path:
    """``widget`` as a figure by the suffix of ``path``: PNG (pixels), SVG or PDF (vectors: the
    plots' lines, points and text stay sharp at any size), written atomically."""
    from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QPoint, QRect, QSizeF
    from PySide6.QtGui import QPageSize, QPainter, QPdfWriter
    from PySide6.QtWidgets import QWidget

    from app.sims.common.output import atomic_write_bytes

    suffix = Path(path).suffix.lower()
    if suffix == ".png":
        return save_png(widget.grab(), path)
    if suffix not in (".svg", ".pdf"):
        raise ValueError(f"{Path(path).name}: a figure is saved as .png, .svg or .pdf")
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    size = widget.size()
    if suffix == ".svg":
        from PySide6.QtSvg import QSvgGenerator

        device = QSvgGenerator()
        device.setOutputDevice(buffer)
        device.setSize(size)
        device.setViewBox(QRect(0, 0, size.width(), size.height()))
        device.setTitle("BioGPU Studio figure")
    else:
        device = QPdfWriter(buffer)
        device.setResolution(96)            # one widget pixel = one PDF point at 96 dpi
        device.setPageSize(QPageSize(QSizeF(size.width() * 0.75, size.height() * 0.75),
                                     QPageSize.Unit.Point))
        device.setPageMargins(device.pageLayout().margins() * 0)
    painter = QPainter(device)
    try:
        QWidget.render(widget, painter, QPoint(0, 0))      # a QGraphicsView's own render differs
    finally:
        painter.end()
    buffer.close()
    return atomic_write_bytes(path, bytes(data))


def save_rgba_png(rgba, path: str | Path) -> Path:
    """An (H, W, 4) uint8 RGBA array (a vispy render) as PNG, written atomically."""
    import numpy as np
    from PySide6.QtGui import QImage

    image = np.ascontiguousarray(rgba, np.uint8)
    h, w = image.shape[:2]
    return save_png(QImage(image.data, w, h, 4 * w, QImage.Format.Format_RGBA8888), path)


def render_main_plot(domain: str, frame, path: str | Path) -> Path | None:
    """Draw ``frame`` the way the domain's panel shows its main plot and save it as PNG.

    The domain's manifest names the drawing function. Returns the path, or None when the
    domain has no main plot or there is no frame.
    """
    from app.sims.common.registry import DOMAINS, resolve

    if frame is None:
        log.warning("no frame to plot")
        return None
    manifest = DOMAINS[domain]
    if manifest.main_plot is None:
        log.warning("the %s domain has no main plot", domain)
        return None
    ensure_application()
    return _save_view(resolve(manifest.main_plot)(frame), path)


def _save_view(view, path: str | Path) -> Path:
    return save_png(view.grab(), path)


def render_sweep_plot(rows, keys, path: str | Path, metric: str | None = None) -> Path | None:
    """The sweep view of a finished sweep (first metric unless ``metric`` is named) as PNG."""
    ensure_application()
    from app.gui.views.sweep import SweepView

    view = SweepView()
    view.resize(*SIZE)
    view.set_rows(rows, keys)
    if metric:
        view.metric_box.setCurrentText(metric)
    if not view.metric_box.currentText():
        log.warning("the sweep has no metric to plot")
        return None
    view.show()                      # lay out, then grab the plots alone (no combo box)
    out = save_png(view.plots.grab(), path)
    view.close()
    import shiboken6
    shiboken6.delete(view)           # now, not at interpreter exit (Qt may be gone by then)
    return out
