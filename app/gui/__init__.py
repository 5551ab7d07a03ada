"""BioGPU Studio's Qt shell. Nothing in app.sims or app.compute imports this package."""

from __future__ import annotations

import gc
import sys
from pathlib import Path

from app.gui.qt_compat import guard_singleton_refcounts

guard_singleton_refcounts()   # before anything in this package emits a Qt signal


def main(argv: list[str] | None = None, config_path: str | Path | None = None) -> int:
    """Start the GUI: the main window with ``config_path`` (or the default SSA preset) open.

    Returns the event loop's exit code.
    """
    from PySide6.QtWidgets import QApplication

    from app.gui.errors import install_excepthook
    from app.gui.main_window import MainWindow, open_default
    from app.gui.qt_compat import collect_garbage_in_gui_thread

    app = QApplication.instance() or QApplication(list(argv) if argv is not None else sys.argv[:1])
    app.setApplicationName("BioGPU Studio")
    collector = collect_garbage_in_gui_thread()
    window = MainWindow()
    install_excepthook(lambda: window)
    open_default(window, config_path)
    window.show()
    try:
        return app.exec()
    finally:
        collector.timer.stop()
        gc.enable()
