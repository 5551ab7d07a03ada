"""The shell: panel list, device selector, status bar, errors, log dock."""

from __future__ import annotations

import logging
import sys
import threading
import time

import pytest

pytest.importorskip("PySide6", reason="the GUI extra is not installed")
from PySide6.QtCore import QCoreApplication, QEvent, QEventLoop, QTimer
from PySide6.QtWidgets import QApplication

from app.gui import errors
from app.gui.panels import Panel
from app.sims.common.simulation import DOMAINS

pytestmark = pytest.mark.gui


def test_window_lists_the_five_panels_and_opens_ssa(window):
    labels = [window.panel_list.item(i).text() for i in range(window.panel_list.count())]
    assert labels == [DOMAINS[n].label for n in ("ssa", "channel", "cardiac", "network", "epidermis")]
    assert isinstance(window.current_page(), Panel)
    assert window.current_page().domain.name == "ssa"
    assert window.current_page().base_cfg.name == "Decay-dimerization"
    assert window.device_combo.itemText(0) == "auto"
    assert window.device_combo.count() >= 2          # auto + at least the CPU
    assert "CPU" in window.device_label.text() or "CUDA" in window.device_label.text()
    assert "—" in window.device_label.text()         # the reason is shown


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
    assert "boom" in shown_errors[-1][1] and "ValueError:" not in shown_errors[-1][1]
    assert "Traceback" in shown_errors[-1][2]            # collapsed under "Show Details…"
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
    """gui.main() runs app.exec() and returns once the window closes, leaving the event loop
    usable for the tests after it.

    The timers start when the loop runs, not when main() is called: building the window takes
    seconds on a loaded machine, and a quit timer that expires before exec() starts posts a
    second QEvent.Quit beside the one from closing the window. The first ends exec(); the second,
    delivered after it returned, sets the main thread's quit flag for good, and every later
    QEventLoop.exec() (pytest-qt's waitSignal, waitUntil, wait) then returns at once without
    processing events: worker threads' queued signals never arrive and later tests time out."""
    import app.gui as gui
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)
    guard = QTimer()                       # a fallback quit if closing did not end the loop
    guard.setSingleShot(True)
    guard.timeout.connect(qapp.quit)
    fired: list[bool] = []
    guard.timeout.connect(lambda: fired.append(True))

    def loop_started() -> None:
        QTimer.singleShot(300, lambda: [w.close() for w in QApplication.topLevelWidgets() if w.isVisible()])
        guard.start(5000)

    QTimer.singleShot(0, loop_started)
    try:
        assert gui.main([]) == 0
    finally:
        guard.stop()
        QCoreApplication.removePostedEvents(qapp, QEvent.Type.Quit)
    assert not fired, "closing the window did not end the event loop"
    loop = QEventLoop()                    # the loop still waits for events after main() returned
    QTimer.singleShot(50, loop.quit)
    start = time.perf_counter()
    assert loop.exec() == 0 and time.perf_counter() - start > 0.04


def test_status_bar_texts_end_in_an_ellipsis_not_off_the_window(window, qtbot):
    """A finished epidermis run's status beside the device text ran off a 1280-px window."""
    window.resize(1280, 800)
    qtbot.wait(50)
    status = ("7.63e+03 steps/s, step 6,000/6,000, 32 cells, 2 layers, 50% suprabasal, "
              "compiled engine ready in 44.1 s (compile or cache load)")
    panel = window.select_panel("epidermis")
    panel.status_changed.emit(status)
    qtbot.wait(50)
    labels = (window.device_label, window.throughput_label)
    for label in labels:
        right = label.mapTo(window, label.rect().topRight()).x()
        assert 0 < right <= window.width(), (label.text(), right)
    shown = [label.shown_text() for label in labels]
    assert window.throughput_label.shown_text().startswith("7.63e+03 steps/s")
    if "no usable NVIDIA GPU" in window.device_label.text():    # the short CPU line: room for all
        assert window.throughput_label.shown_text() == status
    window.throughput_label.setText(status * 3)
    assert window.throughput_label.shown_text().endswith("…")     # less room than the text needs
    window.throughput_label.setText(status)
    for label, text in zip(labels, shown):
        assert label.toolTip() == (label.text() if text != label.text() else "")
    panel.status_changed.emit("2 steps/s")
    qtbot.wait(50)
    assert window.throughput_label.shown_text() == "2 steps/s" and not window.throughput_label.toolTip()


def test_without_cuda_the_status_bar_states_the_cpu_engines_calmly(window, caplog):
    window.device_combo.setCurrentIndex(0)                              # auto
    if window.selected_device()[0] == "cuda":
        pytest.skip("CUDA works here")
    text = window.device_label.text()
    assert "install" not in text and "extra" not in text and "CPU engines" in text
    with caplog.at_level(logging.INFO):
        window._device_changed()
        window._device_changed()
    assert "No usable NVIDIA GPU" not in caplog.text                    # said once, at the start


def test_auto_device_runs_a_single_cell_on_the_cpu_and_a_sheet_on_the_gpu(window, monkeypatch):
    """With a GPU, the toolbar's 'auto' gives a cardiac single cell the CPU (the panel's run,
    its estimate and its log line say so) and a sheet the GPU."""
    from app.compute import device
    gpu = device.Device("cuda", 0, "a test GPU")
    monkeypatch.setattr(device, "cuda_status", lambda: device.CudaStatus(True, "", (gpu,)))
    window.device_combo.setCurrentIndex(0)                              # auto
    panel = window.select_panel("cardiac")
    assert window.open_config("resources/presets/cardiac/00-single-cell-1hz.yaml")
    backend, _, reason = panel.run_device(panel.current_config())
    assert backend == "cpu" and "single cell" in reason
    assert window.open_config("resources/presets/cardiac/02-sheet-spiral-s1s2.yaml")
    assert panel.run_device(panel.current_config())[0] == "cuda"
