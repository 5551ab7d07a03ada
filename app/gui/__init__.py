"""BioGPU Studio's Qt shell. Nothing in app.sims or app.compute imports this package."""

from __future__ import annotations

import gc
import os
import sys
from pathlib import Path

from app.gui.qt_compat import guard_singleton_refcounts

guard_singleton_refcounts()   # before anything in this package emits a Qt signal


NO_DISPLAY = """error: no display to open the window on (DISPLAY and WAYLAND_DISPLAY are unset).
Start BioGPU Studio from a desktop session, or on a headless machine under a virtual screen:
    xvfb-run -a biogpu
The simulations run without a window too: biogpu run CONFIG.yaml (see README.md)."""


def has_display() -> bool:
    """Whether Qt can open a window here (Linux needs X11 or Wayland unless a platform is set)."""
    if not sys.platform.startswith("linux") or os.environ.get("QT_QPA_PLATFORM"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def main(argv: list[str] | None = None, config_path: str | Path | None = None,
         quit_after: float | None = None, first_frame: str | None = None, again: bool = False) -> int:
    """Start the GUI: the main window with ``config_path`` (or the default SSA preset) open.

    Returns the event loop's exit code (2, with what to do instead, when there is no display).
    ``quit_after`` closes the window after that many seconds (install smoke tests);
    ``first_frame`` (a panel) times its first frame and quits (:mod:`app.gui.first_frame`).
    """
    if not has_display():
        print(NO_DISPLAY, file=sys.stderr)
        return 2
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from app.gui.errors import install_excepthook
    from app.gui.main_window import MainWindow, open_default
    from app.gui.qt_compat import collect_garbage_in_gui_thread, freeze_startup_objects

    app = QApplication.instance() or QApplication(list(argv) if argv is not None else sys.argv[:1])
    app.setApplicationName("BioGPU Studio")
    from PySide6.QtGui import QIcon

    from app.package_data import data_dir
    app.setWindowIcon(QIcon(str(data_dir("resources") / "icons" / "biogpu-studio.png")))
    collector = collect_garbage_in_gui_thread()
    window = MainWindow()
    install_excepthook(lambda: window)
    open_default(window, config_path)
    window.show()
    freeze_startup_objects()
    if quit_after is not None:
        QTimer.singleShot(int(1000 * quit_after), window.close)
    if first_frame is not None:
        from app.gui.first_frame import time_first_frames
        time_first_frames(app, window, first_frame, again)
    try:
        return app.exec()
    finally:
        collector.timer.stop()
        gc.enable()
