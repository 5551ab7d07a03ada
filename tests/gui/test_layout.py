"""No panel clips a label, button, combo box, plot axis label or table text at 1280x800 or
1920x1080, at rest and showing a finished run."""

from __future__ import annotations

import pytest

pytest.importorskip("PySide6", reason="the GUI extra is not installed")

from PySide6.QtWidgets import QTabWidget, QWidget

from app.gui.clipping import clipped_widgets

pytestmark = pytest.mark.gui


def _walk(window, qtbot, label: str) -> tuple[list[str], int]:
    """Every panel and every tab of its tab widgets in turn: (clipped texts, widgets seen)."""
    problems, checked = [], 0
    for name in list(window.pages):
        panel = window.select_panel(name)
        qtbot.wait(120)
        pages = [(None, 0)] + [(tabs, i) for tabs in panel.findChildren(QTabWidget)
                               for i in range(tabs.count())]
        for tabs, index in pages:
            if tabs is not None:
                if not tabs.isVisible():
                    continue
                tabs.setCurrentIndex(index)
                qtbot.wait(40)
            problems += [f"{name} {label}: {p}" for p in clipped_widgets(window)
                         if f"{name} {label}: {p}" not in problems]
            checked += sum(w.isVisible() for w in panel.findChildren(QWidget))
    return problems, checked


@pytest.mark.parametrize("size", [(1280, 800), (1920, 1080)])
def test_no_text_is_clipped_at_rest_or_with_results(window, qtbot, size, short_run):
    window.resize(*size)
    at = f"at {size[0]}x{size[1]}"
    problems, checked = _walk(window, qtbot, f"{at} at rest")
    assert checked > 100                       # the walk saw the panels' widgets
    for name, panel in window.pages.items():   # a finished run in every panel
        cfg, frame = short_run(name)
        panel.apply_config(cfg)
        panel.show_frame(frame)
    more, _ = _walk(window, qtbot, f"{at} with results")
    assert not problems + more, "\n".join(problems + more)


def test_the_checker_sees_a_clipped_button_axis_label_and_table_column(window, qtbot):
    import pyqtgraph as pg
    from PySide6.QtWidgets import QPushButton, QScrollArea, QTableWidget, QTableWidgetItem

    button = QPushButton("a button with a long text that cannot fit", window)
    button.setGeometry(0, 0, 40, 20)
    plot = pg.PlotWidget(window)
    plot.setLabel("left", "a long quantity name (with its unit)")
    plot.setGeometry(50, 0, 300, 120)
    table = QTableWidget(1, 2, window)
    table.setHorizontalHeaderLabels(["a long column title", "b"])
    table.setItem(0, 1, QTableWidgetItem("a cell text far wider than the column"))
    table.setGeometry(400, 0, 200, 120)
    scroll = QScrollArea(window)
    scroll.setObjectName("a column")
    inner = QWidget()
    inner.setMinimumWidth(600)
    scroll.setWidget(inner)
    scroll.setGeometry(0, 200, 200, 100)
    for widget in (button, plot, table, scroll):
        widget.show()
    table.setColumnWidth(0, 40)
    table.setColumnWidth(1, 60)
    qtbot.wait(20)
    found = "\n".join(clipped_widgets(window))
    assert "a button with a long" in found
    assert "left axis label 'a long quantity name" in found
    assert "column 'a long column title'" in found and "header need" in found
    assert "column 'b'" in found and "cells need" in found
    assert "QScrollArea (a column): content 600 px wide" in found


def test_rotor_cores_in_the_title_leave_the_controls_column_whole(window, qtbot):
    """The count of rotor cores shown during a run does not widen the tissue view's header and
    so take width from the controls column (at 1280 px it hid the column's right edge)."""
    import numpy as np
    window.resize(1280, 800)
    panel = window.select_panel("cardiac")
    qtbot.wait(120)
    before = panel.splitter.sizes()
    panel.tissue.show_cores(np.array([[1.0, 0.6, 0.0], [2.0, 0.6, 0.0], [3.0, 0.6, 0.0]]))
    qtbot.wait(120)
    assert panel.splitter.sizes() == before
    assert not [p for p in clipped_widgets(window) if "QScrollArea" in p]
