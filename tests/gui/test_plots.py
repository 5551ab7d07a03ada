"""Every domain's plot.png is drawn (not blank) with labelled axes; plots show no tick values
before data; legends sit outside the data."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

pytest.importorskip("PySide6", reason="the GUI extra is not installed")
import pyqtgraph as pg
from PIL import Image

from app.gui.export import render_main_plot
from app.sims.common.session import Session
from app.sims.common.simulation import DOMAINS, find_preset, load_run_config

pytestmark = pytest.mark.gui


def short(name: str, cfg):
    """A run of about a second on the NumPy engine with a frame worth drawing."""
    if name == "ssa":
        return replace(cfg, ensemble=replace(cfg.ensemble, realizations=32, t_end=1.0, samples=11))
    if name == "channel":
        return replace(cfg, ga=replace(cfg.ga, population=16, generations=3))
    if name == "cardiac":
        return replace(cfg, mesh=replace(cfg.mesh, nx=12, ny=12), protocol=replace(cfg.protocol, t_end=30.0),
                       output=replace(cfg.output, probe_cells=[0, 70]))
    if name == "network":
        return replace(cfg, run=replace(cfg.run, epochs=3, epoch_seconds=0.5, slice_seconds=0.5))
    if name == "epidermis":
        return replace(cfg, tissue=replace(cfg.tissue, cells=4),
                       run=replace(cfg.run, steps=40, relax_steps=10, history_every=10))
    raise AssertionError(name)


PRESET = {"ssa": "ssa/birth-death", "channel": "channel/lesson-model-a-small",
          "cardiac": "cardiac/03-sheet-spiral-s1s2-ach-small", "network": "network/lesson-bursts-appear",
          "epidermis": "epidermis/lesson-first-divisions"}


def labelled(plot: pg.PlotItem) -> bool:
    """An x label and a y label (or a title naming the quantity, as in the small multiples)."""
    bottom = plot.getAxis("bottom").labelText
    left = plot.getAxis("left").labelText or plot.titleLabel.text
    return bool(bottom.strip()) and bool(left.strip())


@pytest.mark.parametrize("name", list(PRESET))
def test_main_plot_is_drawn_with_labelled_axes(qtbot, tmp_path, name, monkeypatch):
    _, cfg = load_run_config(find_preset(PRESET[name]))
    session = Session(DOMAINS[name], short(name, cfg), "cpu-reference")
    session.run()
    views = []
    from app.gui import export

    monkeypatch.setattr(export, "_save_view",
                        lambda view, path, save=export._save_view: (views.append(view), save(view, path))[1])
    path = render_main_plot(name, session.last_frame, tmp_path / "plot.png")
    assert path is not None and path.exists()
    pixels = np.asarray(Image.open(path).convert("L"), float)
    assert pixels.std() > 10                                  # not a blank image
    assert (pixels < 128).mean() > 0.003                      # lines and text were drawn
    plots = [item for item in views[0].findChildren(pg.PlotWidget)] or []
    items = [w.getPlotItem() for w in plots]
    items += [item for view in views for canvas in view.findChildren(pg.GraphicsLayoutWidget)
              for item in canvas.ci.items if isinstance(item, pg.PlotItem)]
    assert items, "no plot found in the main plot"
    assert all(labelled(item) for item in items), [
        (i.getAxis("bottom").labelText, i.getAxis("left").labelText) for i in items]


def test_empty_plot_shows_no_tick_values_until_data(qtbot):
    from app.gui.views.trajectories import TrajectoryView

    view = TrajectoryView()
    qtbot.addWidget(view)
    axis = view.plot.getAxis("left")
    assert axis.style["showValues"] is False
    _, cfg = load_run_config(find_preset("ssa/birth-death"))
    session = Session(DOMAINS["ssa"], short("ssa", cfg), "cpu-reference")
    session.run()
    view.set_frame(session.last_frame)
    assert axis.style["showValues"] is True
    view.clear()
    assert axis.style["showValues"] is False


def test_legend_sits_beside_the_data(qtbot):
    from app.gui.views.trajectories import TrajectoryView

    view = TrajectoryView()
    qtbot.addWidget(view)
    view.resize(700, 400)
    _, cfg = load_run_config(find_preset("ssa/birth-death"))
    session = Session(DOMAINS["ssa"], short("ssa", cfg), "cpu-reference")
    session.run()
    view.set_frame(session.last_frame)
    view.show()
    qtbot.waitExposed(view)
    legend = view.legend.sceneBoundingRect()
    data = view.plot.vb.sceneBoundingRect()
    assert legend.width() > 0 and legend.left() >= data.right() - 1   # beside, not over
