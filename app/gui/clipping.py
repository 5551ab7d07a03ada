"""Find text drawn in less room than it needs: widgets narrower than they ask for (clipped text,
squeezed combo arrows), plot axis labels longer than their axis, plot titles wider than their
plot, elided table cells and headers, and scroll areas whose content runs past their right edge."""

from __future__ import annotations

from PySide6.QtWidgets import QAbstractButton, QComboBox, QLabel, QScrollArea, QTableView, QWidget

from app.gui.tables import column_needs

CHECKED = (QLabel, QAbstractButton, QComboBox)


def clipped_widgets(root: QWidget, tolerance: int = 1) -> list[str]:
    """Every clipped text under ``root``: :func:`narrow_widgets`, :func:`clipped_axis_labels`,
    :func:`clipped_plot_titles` and :func:`elided_table_text`, one line each."""
    return (narrow_widgets(root, tolerance) + clipped_axis_labels(root, tolerance)
            + clipped_plot_titles(root, tolerance) + elided_table_text(root, tolerance)
            + scrolled_sideways(root, tolerance))


def scrolled_sideways(root: QWidget, tolerance: int = 1) -> list[str]:
    """Visible scroll areas under ``root`` (the controls column) whose content is wider than
    their view: its right part (a button, the end of every line) is hidden until scrolled to.
    One with the property ``scrollsSideways`` (a grid of plots) is meant to."""
    found = []
    for area in root.findChildren(QScrollArea):
        bar = area.horizontalScrollBar()
        if area.property("scrollsSideways"):
            continue
        if area.isVisible() and area.widget() is not None and bar.maximum() > tolerance:
            found.append(f"QScrollArea ({area.objectName() or 'unnamed'}): content "
                         f"{area.widget().width()} px wide in a {area.viewport().width()} px view")
    return found


def narrow_widgets(root: QWidget, tolerance: int = 1) -> list[str]:
    """Visible labels, buttons and combo boxes under ``root`` narrower than their size hint.

    Word-wrapped labels are left out (they wrap instead of clipping), and so are eliding ones
    (:class:`app.gui.labels.ElidedLabel`: "…" and the whole text in the tooltip) and empty ones.
    """
    found = []
    for widget in root.findChildren(QWidget):
        if not isinstance(widget, CHECKED) or not widget.isVisible():
            continue
        if isinstance(widget, QLabel) and (widget.wordWrap() or not widget.text()
                                           or getattr(widget, "elides", False)):
            continue
        hint = widget.sizeHint().width()
        if widget.width() + tolerance < hint:
            text = widget.currentText() if isinstance(widget, QComboBox) else getattr(widget, "text", lambda: "")()
            found.append(f"{type(widget).__name__} {text[:40]!r} ({widget.objectName() or 'unnamed'}): "
                         f"{widget.width()} px < size hint {hint} px")
    return found


def clipped_axis_labels(root: QWidget, tolerance: int = 1) -> list[str]:
    """Axis labels of the visible pyqtgraph plots under ``root`` longer than their axis.

    pyqtgraph centres a label on its axis and never shortens it: a label longer than the axis
    runs past its ends, over the neighbouring axis or out of the widget.
    """
    import pyqtgraph as pg

    found = []
    for view in root.findChildren(pg.GraphicsView):
        if not view.isVisible() or view.scene() is None:
            continue
        for item in view.scene().items():
            if not isinstance(item, pg.AxisItem) or not item.isVisible():
                continue
            label = item.label
            if label is None or not label.isVisible() or not label.toPlainText().strip():
                continue
            margin = label.document().documentMargin()
            text = label.boundingRect().width() - 2 * margin
            vertical = item.orientation in ("left", "right")
            room = item.size().height() if vertical else item.size().width()
            if room + tolerance < text:
                found.append(f"{item.orientation} axis label {label.toPlainText()[:40]!r}: "
                             f"{text:.0f} px on a {room:.0f} px axis")
    return found


def clipped_plot_titles(root: QWidget, tolerance: int = 1) -> list[str]:
    """Titles of the visible pyqtgraph plots under ``root`` wider than their plot or reaching
    past the edge of their view: pyqtgraph centres a title over its plot and never shortens it,
    and a layout whose titles' widths add up to more than the view runs off its right edge."""
    import pyqtgraph as pg

    found = []
    for view in root.findChildren(pg.GraphicsView):
        if not view.isVisible() or view.scene() is None:
            continue
        visible = view.mapToScene(view.viewport().rect()).boundingRect()
        for item in view.scene().items():
            if not isinstance(item, pg.PlotItem) or not item.isVisible():
                continue
            title = item.titleLabel
            if not title.isVisible() or not title.text:
                continue
            margin = title.item.document().documentMargin()
            text = title.item.boundingRect().width() - 2 * margin
            drawn = title.item.mapRectToScene(title.item.boundingRect().adjusted(margin, 0, -margin, 0))
            name = title.item.toPlainText()[:40]
            if item.size().width() + tolerance < text:
                found.append(f"plot title {name!r}: {text:.0f} px over a {item.size().width():.0f} px plot")
            elif drawn.left() + tolerance < visible.left() or drawn.right() > visible.right() + tolerance:
                found.append(f"plot title {name!r}: drawn at x {drawn.left():.0f}..{drawn.right():.0f}, "
                             f"the view shows {visible.left():.0f}..{visible.right():.0f}")
    return found


def elided_table_text(root: QWidget, tolerance: int = 1) -> list[str]:
    """Columns of the visible tables under ``root`` narrower than their header text or their
    widest cell (Qt elides the text with "…")."""
    found = []
    for table in root.findChildren(QTableView):
        if not table.isVisible() or table.model() is None:
            continue
        header = table.horizontalHeader()
        model = table.model()
        for column in range(model.columnCount()):
            if table.isColumnHidden(column):
                continue
            width = table.columnWidth(column)
            title = str(model.headerData(column, header.orientation()) or "")
            header_px, cells_px = column_needs(table, column)
            needs = {"header": header_px if header.isVisible() else 0, "cells": cells_px}
            for part, hint in needs.items():
                if width + tolerance < hint:
                    found.append(f"{type(table).__name__} column {title[:30]!r} "
                                 f"({table.objectName() or 'unnamed'}): {part} need {hint} px, "
                                 f"the column is {width} px")
    return found
