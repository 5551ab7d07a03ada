"""No panel clips a label, button or combo box at 1280x800 or 1920x1080."""

from __future__ import annotations

import pytest

pytest.importorskip("PySide6", reason="the GUI extra is not installed")

from PySide6.QtWidgets import QTabWidget, QWidget

from app.gui.clipping import clipped_widgets

pytestmark = pytest.mark.gui


@pytest.mark.parametrize("size", [(1280, 800), (1920, 1080)])
def test_no_widget_is_narrower_than_its_size_hint(window, qtbot, size):
    window.resize(*size)
    problems = []
    checked = 0
    for name in list(window.pages):
        panel = window.select_panel(name)
        qtbot.wait(150)
        pages = [(None, 0)] + [(tabs, i) for tabs in panel.findChildren(QTabWidget)
                               for i in range(tabs.count())]
        for tabs, index in pages:              # every tab of every tab widget in turn
            if tabs is not None:
                if not tabs.isVisible():
                    continue
                tabs.setCurrentIndex(index)
                qtbot.wait(50)
            problems += [f"{name} at {size[0]}x{size[1]}: {p}" for p in clipped_widgets(window)]
            checked += sum(w.isVisible() for w in panel.findChildren(QWidget))
    assert checked > 100                       # the walk saw the panels' widgets
    assert not problems, "\n".join(problems)


def test_the_checker_sees_a_clipped_button(window, qtbot):
    from PySide6.QtWidgets import QPushButton

    button = QPushButton("a button with a long text that cannot fit", window)
    button.setGeometry(0, 0, 40, 20)
    button.show()
    qtbot.wait(10)
    assert any("a button with a long" in p for p in clipped_widgets(window))
