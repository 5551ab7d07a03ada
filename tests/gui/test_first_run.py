"""The first run on a fresh machine: the panel says the engine is being prepared (stage, seconds),
shows results from the reference engine meanwhile, stops at once, and the window closes
cleanly while the compiled engine is still compiling. Tests wait for signals, never times."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading

import pytest

pytest.importorskip("PySide6", reason="the GUI extra is not installed")

from app.sims.common import session as session_module  # noqa: E402
from app.sims.common import warmup  # noqa: E402
from app.sims.common.warmup import CompileService  # noqa: E402

pytestmark = pytest.mark.gui


@pytest.fixture
def slow_compile(monkeypatch):
    """A compile service whose helper 'compiles' until the test releases it."""
    release = threading.Event()

    def helper(self, domain, rebuild):
        release.wait(120)
        return 0, ""

    monkeypatch.setattr(CompileService, "_helper", helper)
    monkeypatch.setattr(warmup, "warm_in_process", lambda domain: 0.0)
    service = CompileService(helper=True)
    monkeypatch.setattr(session_module, "service", lambda: service)
    import app.gui.panels.base as base
    monkeypatch.setattr(base, "service", lambda: service)
    yield release
    release.set()
    service.shutdown()


def test_preparing_is_shown_results_arrive_and_stop_works(ssa, qtbot, set_ensemble, slow_compile):
    set_ensemble(ssa, realizations=64, t_end=1e6, samples=101)       # far longer than the test
    texts, formats = [], []
    assert ssa.start_run()
    ssa.worker.preparing.connect(texts.append)
    # the bar as the panel's own slot (connected first) left it: a frame may reset it right after
    ssa.worker.preparing.connect(lambda text: formats.append(ssa.run_controls.progress.format()))
    with qtbot.waitSignal(ssa.worker.preparing, timeout=30000,
                          check_params_cb=lambda text: text.startswith("preparing")):
        pass
    assert "stage 1 of 2 (compiling)" in texts[0]
    assert "preparing the compiled engine" in formats[0]
    with qtbot.waitSignal(ssa.worker.frame_ready, timeout=30000) as frame:
        pass                                # a result from the reference engine meanwhile
    assert "preparing the compiled engine" in frame.args[0].status
    with qtbot.waitSignal(ssa.worker.run_finished, timeout=30000):
        ssa.stop_run()                      # the compile is still running
    assert ssa.worker.session.stopped
    assert ssa.run_controls.progress.format() == "%p%"
    assert ssa.worker.session.summary["engines"]["finished_on"] == "cpu-reference"


CLOSE_DURING_COMPILE = textwrap.dedent("""
    import sys, time
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication
    import app.gui
    from app.gui.main_window import MainWindow, open_default
    from app.sims.common.warmup import service

    qt = QApplication(sys.argv[:1])
    window = MainWindow()
    open_default(window)
    window.show()
    panel = window.select_panel("ssa")
    panel.backend.setCurrentIndex(panel.backend.findData("cpu"))
    def started(text):
        if text.startswith("preparing"):
            print("preparing seen", flush=True)
            QTimer.singleShot(200, window.close)
    panel.start_run()
    panel.worker.preparing.connect(started)
    QTimer.singleShot(120000, qt.quit)       # a guard: never hang the test
    qt.exec()
    print("closed; ssa", service().status(panel.worker.session._key).state, flush=True)
""")


def test_closing_the_window_during_the_first_compile_exits_cleanly(tmp_path):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba"),
           "BIOGPU_SETTINGS_DIR": str(tmp_path / "settings")}
    out = subprocess.run([sys.executable, "-c", CLOSE_DURING_COMPILE], env=env, capture_output=True,
                         text=True, timeout=300, cwd=os.getcwd())
    assert out.returncode == 0, out.stderr[-3000:]
    assert "preparing seen" in out.stdout and "closed; ssa preparing" in out.stdout, out.stdout


def test_gui_first_frame_times_the_default_run_and_quits(tmp_path):
    """``gui --first-frame PANEL`` (bench startup's GUI half, also the bundle's): Run on the
    panel's CPU default, one FIRST line with the seconds to its first frame, exit 0."""
    env = {**os.environ, "BIOGPU_SETTINGS_DIR": str(tmp_path / "settings"), "QT_QPA_PLATFORM": "offscreen"}
    out = subprocess.run([sys.executable, "-m", "app", "gui", "--first-frame", "ssa"], env=env,
                         capture_output=True, text=True, timeout=300, cwd=os.getcwd())
    assert out.returncode == 0, out.stderr[-3000:]
    lines = [line.split() for line in out.stdout.splitlines() if line.startswith("FIRST ")]
    assert len(lines) == 1 and float(lines[0][1]) > 0, out.stdout
    bad = subprocess.run([sys.executable, "-m", "app", "gui", "--first-frame", "nope"], env=env,
                         capture_output=True, text=True, timeout=300, cwd=os.getcwd())
    assert bad.returncode != 0 and "no such panel (panels: ssa" in bad.stderr
