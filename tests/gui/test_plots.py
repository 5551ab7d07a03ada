"""Every domain's plot.png is drawn (not blank) with labelled axes; plots show no tick values
before data; legends sit outside the data."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("PySide6", reason="the GUI extra is not installed")
import pyqtgraph as pg
from PIL import Image

from app.gui.export import render_main_plot

pytestmark = pytest.mark.gui

PANELS = ("ssa", "channel", "cardiac", "network", "epidermis")


def labelled(plot: pg.PlotItem) -> bool:
    """An x label and a y label (or a title naming the quantity, as in the small multiples)."""
    bottom = plot.getAxis("bottom").labelText
    left = plot.getAxis("left").labelText or plot.titleLabel.text
    return bool(bottom.strip()) and bool(left.strip())


@pytest.mark.parametrize("name", PANELS)
def test_main_plot_is_drawn_with_labelled_axes(qtbot, tmp_path, name, monkeypatch, short_run):
    _, frame = short_run(name)
    views = []
    from app.gui import export

    monkeypatch.setattr(export, "_save_view",
                        lambda view, path, save=export._save_view: (views.append(view), save(view, path))[1])
    path = render_main_plot(name, frame, tmp_path / "plot.png")
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


def test_empty_plot_shows_no_tick_values_until_data(qtbot, short_run):
    from app.gui.views.trajectories import TrajectoryView

    view = TrajectoryView()
    qtbot.addWidget(view)
    axis = view.plot.getAxis("left")
    assert axis.style["showValues"] is False
    view.set_frame(short_run("ssa")[1])
    assert axis.style["showValues"] is True
    view.clear()
    assert axis.style["showValues"] is False


def test_legend_sits_beside_the_data(qtbot, short_run):
    from app.gui.views.trajectories import TrajectoryView

    view = TrajectoryView()
    qtbot.addWidget(view)
    view.resize(700, 400)
    view.set_frame(short_run("ssa")[1])
    view.show()
    qtbot.waitExposed(view)
    legend = view.legend.sceneBoundingRect()
    data = view.plot.vb.sceneBoundingRect()
    assert legend.width() > 0 and legend.left() >= data.right() - 1   # beside, not over


@pytest.mark.parametrize("size", [(700, 400), (450, 200)])
def test_a_long_legend_stays_beside_the_data_and_inside_its_plot(qtbot, size):
    """Twelve parameters in a short plot: the legend takes a second column rather than make
    the plot taller than its widget (which cut off the generation axis); never over the data."""
    from types import SimpleNamespace

    from app.gui.views.parameter_history import ParameterHistoryView

    view = ParameterHistoryView()
    qtbot.addWidget(view)
    view.resize(*size)
    names = tuple(f"k{i}" for i in range(12))
    view.set_frame(SimpleNamespace(param_names=names, history_params=np.linspace(0, 1, 60).reshape(5, 12)))
    view.show()
    qtbot.waitExposed(view)
    qtbot.wait(50)
    legend = view.legend.sceneBoundingRect()
    data = view.plot.vb.sceneBoundingRect()
    axis = view.plot.getAxis("bottom").sceneBoundingRect()
    height = view.plot_widget.viewport().height()
    assert len(view.legend.items) == 12
    assert legend.left() >= data.right() - 1                     # beside, not over
    assert legend.bottom() <= data.bottom() + 1 and axis.bottom() <= height + 1, (legend, axis, height)
    assert view.legend.columnCount == (1 if size[1] >= 400 else 2)
    tops = sorted({round(sample.sceneBoundingRect().top()) for sample, _ in view.legend.items})
    assert max(np.diff(tops)) <= 24, tops                       # rows packed, not spread out


def test_generation_axes_tick_whole_generations(qtbot):
    """Three generations showed ticks at 0.5 and 1.5; against wall time the ticks are free."""
    from types import SimpleNamespace

    from app.gui.views.convergence import ConvergenceView
    from app.gui.views.parameter_history import ParameterHistoryView

    frame = SimpleNamespace(history_best=np.array([9.0, 4.0, 2.0]), history_median=np.array([12.0, 8.0, 5.0]),
                            history_wall=np.array([0.01, 0.02, 0.03]), history_phase=None,
                            param_names=("a", "b"), history_params=np.full((3, 2), 0.5))

    def ticks(view) -> list[float]:
        axis = view.plot.getAxis("bottom")
        lo, hi = view.plot.viewRange()[0]
        return [v for _, values in axis.tickValues(lo, hi, axis.width()) for v in values]

    convergence, parameters = ConvergenceView(), ParameterHistoryView()
    for view in (convergence, parameters):
        qtbot.addWidget(view)
        view.resize(500, 300)
        view.set_frame(frame)
        view.show()
        qtbot.waitExposed(view)
        assert ticks(view) and all(v == int(v) for v in ticks(view)), ticks(view)
    convergence.wall_toggle.setChecked(True)
    assert any(v != int(v) for v in ticks(convergence))


def sample_pixels(sample) -> np.ndarray:
    """The legend sample painted on white, (20, 20, 3) RGB."""
    from PySide6.QtGui import QColor, QImage, QPainter

    image = QImage(20, 20, QImage.Format.Format_RGB32)
    image.fill(QColor("white"))
    painter = QPainter(image)
    sample.paint(painter)
    painter.end()
    return np.array([[image.pixelColor(x, y).getRgb()[:3] for x in range(20)] for y in range(20)])


def test_legend_samples_look_like_their_curves(qtbot, short_run):
    """Mean: its line across a filled swatch of its SD band; histogram: a bar in its fill,
    outlined by its pen (pyqtgraph drew a line and a triangle); comparison: a line."""
    from app.gui.views.base import CurveSample, colour
    from app.gui.views.histogram import HistogramView
    from app.gui.views.trajectories import TrajectoryView
    from app.gui.panels.ssa_data import EnsembleHistograms

    white = np.array([255, 255, 255])
    line = np.array(colour(0)[:3])
    trajectories = TrajectoryView()
    qtbot.addWidget(trajectories)
    frame = short_run("ssa")[1]
    trajectories.set_frame(frame)
    (sample, label), *_ = trajectories.legend.items
    assert isinstance(sample, CurveSample) and label.text == frame.species[0]
    pixels = sample_pixels(sample)
    assert (pixels[10, :] == line).all()                          # the mean's pen, across
    band = pixels[5, 2]
    assert (band != white).any() and (band == pixels[15, 17]).all()   # a swatch, above and below
    assert band[2] > band[0]                                      # in the species' colour
    assert (pixels[1, :] == white).all() and (pixels[19, :] == white).all()

    histogram = HistogramView()
    qtbot.addWidget(histogram)
    histogram.set_frame(frame)
    histogram.set_reference(EnsembleHistograms.from_frame(frame, "reference"))
    (bar, bar_label), (ref, ref_label) = histogram.legend.items
    assert (bar_label.text, ref_label.text) == ("this run", "reference")
    pixels = sample_pixels(bar)
    fill = pixels[12, 10]
    assert (fill != white).any() and fill[2] > fill[0]
    assert (pixels[8:16, 6:14] == fill).all()                     # filled, left half too (no triangle)
    assert (pixels[12, 3] == line).all() and (pixels[6, 10] == line).all()   # outlined by the pen
    pixels = sample_pixels(ref)
    assert (pixels[10, :] == np.array(colour(3)[:3])).all() and (pixels[14, :] == white).all()


DIMENSIONLESS = {"generation", "epoch", "count", "column", "row", "probability per count value"}


def test_every_axis_label_names_its_unit(window):
    """A label says its unit in parentheses, unless it is a count or an index ("χ²" had none)."""
    missing = []
    for name, page in window.pages.items():
        for view in page.findChildren(pg.GraphicsView):
            for item in view.scene().items():
                if isinstance(item, pg.AxisItem) and item.labelText.strip():
                    text = item.labelText.strip()
                    if not ("(" in text and text.endswith(")")) and text not in DIMENSIONLESS:
                        missing.append(f"{name}: {item.orientation} axis {text!r}")
    assert not missing, missing


def test_a_log_axis_labels_1_2_5_times_powers_of_ten(qtbot):
    """Across a decade pyqtgraph labelled 2..9 x 10^3 and the labels ran into each other."""
    from types import SimpleNamespace

    from app.gui.views.convergence import ConvergenceView

    view = ConvergenceView()
    qtbot.addWidget(view)
    view.resize(400, 260)
    best = np.geomspace(3e4, 1.6e3, 20)
    view.set_frame(SimpleNamespace(history_best=best, history_median=best * 1.5,
                                   history_wall=np.arange(20.0), history_phase=None))
    view.show()
    qtbot.waitExposed(view)
    qtbot.wait(50)                                   # the range follows the data
    axis = view.plot.getAxis("left")
    values = [v for _, level in axis.tickValues(*axis.range, axis.height()) for v in level]
    labels = dict(zip(values, axis.tickStrings(values, 1.0, 1.0)))
    shown = sorted(round(10 ** v) for v, text in labels.items() if text)
    assert len(values) > 6 and shown
    assert all(str(x)[0] in "125" for x in shown), shown
    assert {3000, 4000, 7000} & {round(10 ** v) for v in values}     # ticked, not labelled
