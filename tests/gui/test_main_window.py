"""The shell: panel list, placeholders, device selector, status bar, errors, log dock."""

from __future__ import annotations

import logging
import sys
import threading

import pytest

pytest.importorskip("PySide6", reason="the GUI extra is not installed")
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication, QLabel, QPushButton

from app.gui import errors
from app.gui.panels import Panel, PlaceholderPage
from app.gui.runner import RunControls
from app.sims.common.simulation import DOMAINS

pytestmark = pytest.mark.gui


def test_window_lists_the_five_panels_and_opens_ssa(window):
    labels = [window.panel_list.item(i).text() for i in range(window.panel_list.count())]
    assert labels == [DOMAINS[n].label for n in ("channel", "cardiac", "network", "epidermis", "ssa")]
    assert isinstance(window.current_page(), Panel)
    assert window.current_page().domain.name == "ssa"
    assert window.current_page().base_cfg.name == "Decay-dimerization"
    assert window.device_combo.itemText(0) == "auto"
    assert window.device_combo.count() >= 2          # auto + at least the CPU
    assert "CPU" in window.device_label.text() or "CUDA" in window.device_label.text()
    assert "—" in window.device_label.text()         # the reason is shown


@pytest.mark.parametrize("name", ["epidermis"])
def test_unbuilt_panels_show_description_and_no_controls(window, name):
    page = window.select_panel(name)
    assert window.current_page() is page
    assert isinstance(page, PlaceholderPage)
    text = page.findChild(QLabel, "description").text()
    assert DOMAINS[name].description in text
    assert "not built yet" in text
    assert not page.findChildren(RunControls)
    assert not [b for b in page.findChildren(QPushButton) if b.text() == "Run"]
    assert not window.panel_actions[0].isEnabled()   # Save run config needs a panel


def test_broken_yaml_reports_errors_and_keeps_the_window(window, tmp_path, shown_errors):
    syntax = tmp_path / "syntax.yaml"
    syntax.write_text("domain: ssa\nmodel: {species: [\n")
    bad_value = tmp_path / "bad.yaml"
    good = (window.current_panel().config_path).read_text()
    bad_value.write_text(good.replace("realizations: 512", "realizations: -5"))
    assert not window.open_config(syntax)
    assert not window.open_config(bad_value)
    assert not window.open_config(tmp_path / "missing.yaml")
    assert len(shown_errors) == 3
    assert "YAML syntax error" in shown_errors[0][1]
    assert "ensemble.realizations" in shown_errors[1][1] and "out of range" in shown_errors[1][1]
    assert "cannot read file" in shown_errors[2][1]
    assert window.isVisible()
    assert window.current_panel().base_cfg.name == "Decay-dimerization"   # unchanged


def test_unbuilt_domain_config_is_refused(window, tmp_path, shown_errors):
    path = tmp_path / "epidermis.yaml"
    path.write_text("domain: epidermis\n")
    assert not window.open_config(path)
    assert "not built yet" in shown_errors[0][1]
    # the cardiac panel is built: its preset opens there
    from app.sims.common.simulation import default_preset
    assert window.open_config(default_preset("cardiac"))
    assert window.current_panel().domain.name == "cardiac" and len(shown_errors) == 1


def test_log_dock_receives_records_from_other_threads(window, qtbot):
    thread = threading.Thread(target=lambda: logging.getLogger("app.test").warning("hello from a thread"))
    thread.start()
    thread.join()
    qtbot.waitUntil(lambda: "hello from a thread" in window.log_dock.text(), timeout=2000)


def test_excepthook_logs_and_shows_instead_of_aborting(window, qtbot, shown_errors, monkeypatch):
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)
    errors.install_excepthook(lambda: window)
    try:
        raise ValueError("boom")
    except ValueError:
        sys.excepthook(*sys.exc_info())
    assert shown_errors[-1][0] == "Unexpected error"
    assert "ValueError: boom" in shown_errors[-1][1]
    assert "Traceback" in shown_errors[-1][2]
    qtbot.waitUntil(lambda: "ValueError: boom" in window.log_dock.text(), timeout=2000)


def test_show_error_does_not_block(qtbot, monkeypatch):
    from PySide6.QtWidgets import QMessageBox, QWidget
    monkeypatch.setattr(errors, "show_error", errors.show_error)   # the real one
    parent = QWidget()
    qtbot.addWidget(parent)
    errors.show_error(parent, "Title", "text", "detail")           # returns at once
    boxes = parent.findChildren(QMessageBox)
    assert boxes and boxes[0].detailedText() == "detail"
    boxes[0].close()


def test_main_runs_the_event_loop_and_returns(qapp, monkeypatch):
    import app.gui as gui
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)
    QTimer.singleShot(300, lambda: [w.close() for w in QApplication.topLevelWidgets() if w.isVisible()])
    guard = QTimer()                       # a fallback quit, stopped so it cannot hit a later test
    guard.setSingleShot(True)
    guard.timeout.connect(qapp.quit)
    guard.start(600)
    try:
        assert gui.main([]) == 0
    finally:
        guard.stop()
