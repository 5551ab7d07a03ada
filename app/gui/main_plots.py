"""The main plot of each built-in domain, as ``python -m app run`` saves it (``plot.png``).

A domain's manifest names its function (``main_plot="app.gui.main_plots:ssa"``); each takes
the run's last frame and returns the view, drawn and sized, for :func:`app.gui.export.render_main_plot`
to grab. A domain from another package names a function of its own.
"""

from __future__ import annotations

from app.gui.export import SIZE


def _single_plot(view, frame):
    """A view with one ``plot``: draw the frame, size it, fit the axes to the data."""
    view.set_frame(frame)
    view.resize(*SIZE)
    view.plot.enableAutoRange()
    return view


def ssa(frame):
    from app.gui.views.trajectories import TrajectoryView
    return _single_plot(TrajectoryView(), frame)


def channel(frame):
    from app.gui.views.convergence import ConvergenceView
    return _single_plot(ConvergenceView(), frame)


def cardiac(frame):
    from app.gui.views.cardiac import ProbeTraceView
    return _single_plot(ProbeTraceView(), frame)


def epidermis(frame):
    from app.gui.views.epidermis_history import EpidermisHistoryView
    view = EpidermisHistoryView()
    view.set_frame(frame)
    view.resize(*SIZE)
    for plot in view.plots.values():
        plot.enableAutoRange()
    view.plots["fractions"].setYRange(0.0, 1.0)
    return view


def network(frame):
    from app.gui.views.network import EpochHistoryView
    view = EpochHistoryView()
    view.set_frame(frame)
    view.resize(*SIZE)
    return view
