"""``gui --first-frame PANEL``: Run on the panel's CPU default preset as soon as the window is
up, print ``FIRST s`` (seconds from Run to the run's first frame) and quit; with ``--again``
also a second run once the compiled engine is ready (``AGAIN s``). The GUI half of
``bench startup``, the same for the desktop bundle."""

from __future__ import annotations

import time

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication, QWidget

from app.sims.common.warmup import service

GIVE_UP_MS = 900_000      # a run that shows nothing in 15 min ends the measurement (no FIRST)


def time_first_frames(qt: QApplication, window: QWidget, name: str, again: bool = False) -> None:
    """Start the measurement (from the event loop): select panel ``name``, its CPU engine and
    default preset, press Run, and close the window after the first frame (or second run's)."""
    if name not in window.pages:
        raise SystemExit(f"error: --first-frame {name}: no such panel (panels: {', '.join(window.pages)})")
    panel = window.select_panel(name)
    panel.backend.setCurrentIndex(panel.backend.findData("cpu"))
    panel.open_default_preset()
    runs = 2 if again else 1
    results: list[float] = []

    def run() -> None:
        start = time.perf_counter()

        def first(frame) -> None:
            if len(results) < runs and panel.worker is not None:
                results.append(time.perf_counter() - start)
                print(("FIRST" if len(results) == 1 else "AGAIN"), results[-1], flush=True)
                panel.worker.frame_ready.disconnect(first)
                panel.stop_run()

        panel.start_run()
        panel.worker.frame_ready.connect(first)
        panel.worker.run_finished.connect(after)

    def after(*_) -> None:
        if len(results) == 1 and runs == 2:
            service().wait(panel.worker.session._key, timeout=GIVE_UP_MS / 1000)
            QTimer.singleShot(100, run)
        elif len(results) >= runs or not results:
            window.close()
            qt.quit()

    QTimer.singleShot(0, run)
    QTimer.singleShot(GIVE_UP_MS, qt.quit)
