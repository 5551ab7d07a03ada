"""The main plot of a finished run as a PNG, for ``python -m app run`` (no window needed)."""

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


def render_main_plot(domain: str, frame, path: str | Path) -> Path | None:
    """Draw ``frame`` the way the domain's panel shows its main plot and save it as PNG.

    Returns the path, or None when the domain has no plot yet or there is no frame.
    """
    if frame is None:
        log.warning("no frame to plot")
        return None
    ensure_application()
    if domain == "ssa":
        from app.gui.views.trajectories import TrajectoryView
        view = TrajectoryView()
        view.set_frame(frame)
    elif domain == "channel":
        from app.gui.views.convergence import ConvergenceView
        view = ConvergenceView()
        view.set_frame(frame)
    elif domain == "cardiac":
        from app.gui.views.cardiac import ProbeTraceView
        view = ProbeTraceView()
        view.set_frame(frame)
    elif domain == "epidermis":
        from app.gui.views.epidermis_history import EpidermisHistoryView
        view = EpidermisHistoryView()
        view.set_frame(frame)
        view.resize(*SIZE)
        for plot in view.plots.values():
            plot.enableAutoRange()
        view.plots["fractions"].setYRange(0.0, 1.0)
        if not view.grab().save(str(path)):
            raise OSError(f"could not write {path}")
        print(f"plot in {path}")
        return Path(path)
    elif domain == "network":
        from app.gui.views.network import EpochHistoryView
        view = EpochHistoryView()
        view.set_frame(frame)
        view.resize(*SIZE)
        if not view.grab().save(str(path)):
            raise OSError(f"could not write {path}")
        print(f"plot in {path}")
        return Path(path)
    else:
        log.warning("no plot for domain %s yet", domain)
        return None
    view.resize(*SIZE)
    view.plot.enableAutoRange()
    if not view.grab().save(str(path)):
        raise OSError(f"could not write {path}")
    print(f"plot in {path}")
    return Path(path)
