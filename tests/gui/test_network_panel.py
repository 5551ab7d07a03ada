"""The cultured-network panel: run / pause / resume / stop, pause at epoch ends, checkpoint
resume, views and exports (CPU engine, small cultures)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("PySide6", reason="the GUI extra is not installed")
from PySide6.QtCore import Qt
from PySide6.QtGui import QImage

from app.gui.runner import RunState

pytestmark = pytest.mark.gui


@pytest.fixture
def network(window):
    panel = window.select_panel("network")
    panel.backend.setCurrentIndex(panel.backend.findData("cpu"))
    panel.width_box.setValue(6)
    panel.height_box.setValue(6)
    panel.start_radius.setValue(0.8)
    panel.rho.setValue(0.02)
    panel.epochs.setValue(3)
    panel.epoch_seconds.setValue(0.4)
    panel.slice_seconds.setValue(0.05)
    panel.checkpoint.setText("")
    return panel


def test_run_pause_resume_stop(network, window, qtbot):
    network.epochs.setValue(5000)   # 2,000 s simulated: the compiled engine does 50 epochs in 0.3 s
    assert network.start_run()
    worker = network.worker
    qtbot.waitUntil(lambda: worker.frames_published >= 2, timeout=30000)
    qtbot.mouseClick(network.run_controls.pause_button, Qt.MouseButton.LeftButton)
    assert worker.paused and network.run_controls.state is RunState.PAUSED
    # the slice in flight landed and its frame was published (however slow the machine)
    qtbot.waitUntil(lambda: worker.session.holding and not worker.pending, timeout=30000)
    frames = worker.frames_published
    qtbot.wait(400)
    assert worker.frames_published == frames, "frames arrived while paused"
    qtbot.mouseClick(network.run_controls.pause_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: worker.frames_published > frames, timeout=30000)
    with qtbot.waitSignal(worker.run_finished, timeout=30000):
        qtbot.mouseClick(network.run_controls.stop_button, Qt.MouseButton.LeftButton)
    assert network.run_controls.state is RunState.FINISHED
    frame = network.last_frame
    assert not frame.done and frame.t > 0
    x, y = network.pop_rate.curve.getData()
    assert x is not None and len(x) > 0
    assert np.array_equal(network.culture.image.image, frame.rate.reshape(6, 6))
    assert "realtime" in window.throughput_label.text()
    assert network.arrays is not None and "final_W" in network.arrays


def test_pause_at_epoch_end_then_finish_views_and_exports(network, qtbot, tmp_path):
    network.pause_at_epoch.setChecked(True)
    assert network.start_run()
    worker = network.worker
    qtbot.waitUntil(lambda: network.run_controls.state is RunState.PAUSED, timeout=30000)
    assert worker.paused
    assert network.last_frame.epoch_boundary and network.last_frame.epoch == 1
    network.pause_at_epoch.setChecked(False)
    with qtbot.waitSignal(worker.run_finished, timeout=20000):
        network.resume_run()
    frame = network.last_frame
    assert frame.done and frame.epoch == 3
    assert len(frame.history["epoch_mean_radius"]) == 3
    _, radius = network.history.curves["epoch_mean_radius"].getData()
    assert len(radius) == 3

    spikes, hist, conn, png = (tmp_path / n for n in ("s.npz", "h.csv", "c.npz", "v.png"))
    network.export("spikes", spikes)
    network.export("history", hist)
    network.export("connectivity", conn)
    network.export("png", png)
    network.export("nwb", tmp_path / "n.nwb")
    network.export("neuroml", tmp_path / "n.nml")
    assert (tmp_path / "n.nwb").stat().st_size > 0 and "<blockingPlasticSynapse" in (tmp_path / "n.nml").read_text()
    assert "<Include file=\"n.nml\"/>" in (tmp_path / "LEMS_n.xml").read_text()      # its simulation
    from app.sims.network.export_neuroml import to_neuroml
    network.neuroml_epoch.setValue(0)                    # the culture's connections at the start
    network.export("neuroml", tmp_path / "start.nml")
    start = (tmp_path / "start.nml").read_text()
    assert start == to_neuroml(network.current_config(), network.arrays, epoch=0) != (tmp_path / "n.nml").read_text()
    network.neuroml_epoch.setValue(7)                    # a run of 3 epochs has no epoch 7: refused, named
    with pytest.raises(Exception, match="epoch 7"):
        network.export("neuroml", tmp_path / "late.nml")
    with np.load(spikes) as data:
        assert data["spike_times"].size == data["spike_neurons"].size > 0
    assert open(hist).readline().strip().startswith("epoch,epoch_mean_radius")
    assert np.loadtxt(hist, delimiter=",", skiprows=1).shape == (3, 5)
    with np.load(conn) as data:
        assert data["final_W"].size == data["final_W_pre"].size == frame.synapses
    image = QImage(str(png))
    assert image.width() > 100 and image.height() > 100


def test_resume_from_checkpoint(network, qtbot, tmp_path):
    ckpt = tmp_path / "culture.ckpt.npz"
    network.checkpoint.setText(str(ckpt))
    network.epochs.setValue(2)
    with qtbot.waitSignal(network.worker.run_finished if network.start_run() else None, timeout=20000):
        pass
    assert ckpt.exists() and network.last_frame.epoch == 2
    network.apply_config(network.base_cfg)          # forget the controls' state
    network.resume_from(ckpt)
    assert "epoch 2" in network.resume_label.text()
    network.epochs.setValue(3)
    assert network.start_run()
    with qtbot.waitSignal(network.worker.run_finished, timeout=20000):
        pass
    frame = network.last_frame
    assert frame.done and frame.epoch == 3 and len(frame.history["epoch_mean_rate"]) == 3


def test_epoch_plots_never_show_negative_values(qtbot, short_run):
    """All-zero bursts per minute: the axis starts at 0 (it showed -0.4..0.4)."""
    from dataclasses import replace

    from app.gui.views.network import HISTORY_PLOTS, EpochHistoryView

    view = EpochHistoryView()
    qtbot.addWidget(view)
    view.resize(900, 250)
    view.show()
    qtbot.waitExposed(view)
    _, frame = short_run("network")
    history = {key: np.zeros(len(frame.history[key])) for key, _ in HISTORY_PLOTS}
    view.set_frame(replace(frame, history={**frame.history, **history}))
    qtbot.wait(50)
    for key, _ in HISTORY_PLOTS:
        low, high = view.plots[key].viewRange()[1]
        assert low >= 0 and high > 0, (key, low, high)


def test_raster_and_population_rate_share_one_time_window(network, qtbot):
    """The rate plot shows the raster's window (the run's raster_seconds, in s), moved with it
    at every frame; before, the rate showed the time its data spanned (up to 20 s) beside a
    5-s raster."""
    network.epochs.setValue(40)                     # 16 s simulated: the window moves
    raster, rate = network.raster.plot, network.pop_rate.plot
    assert raster.getAxis("bottom").labelText == rate.getAxis("bottom").labelText == "time (s)"
    windows = []
    assert network.start_run()
    network.worker.frame_ready.connect(lambda frame: windows.append(
        (frame.t, raster.viewRange()[0], rate.viewRange()[0])))
    with qtbot.waitSignal(network.worker.run_finished, timeout=60000):
        pass
    assert windows
    for t, shown, rate_shown in windows:
        assert rate_shown == pytest.approx(shown)
        assert shown == pytest.approx([max(0.0, t - 5.0), max(t, 0.1)])
    t, shown, _ = windows[-1]
    assert t == pytest.approx(16.0) and shown == pytest.approx([11.0, 16.0])


def test_burst_threshold_line_only_with_data(qtbot, short_run):
    """An empty rate plot showed a dashed threshold line at an arbitrary height."""
    from app.gui.views.network import PopulationRateView

    view = PopulationRateView()
    qtbot.addWidget(view)
    assert not view.level.isVisible()
    frame = short_run("network")[1]
    view.set_frame(frame)
    assert view.level.isVisible() and view.level.value() == pytest.approx(frame.burst_level)
    view.clear()
    assert not view.level.isVisible()


def test_raster_and_rate_put_the_same_time_above_each_other(qtbot):
    """Raster ticks up to 10,000 neurons and rate ticks below 1 Hz: one left-axis width, so the
    two data areas span the same x (their time axes line up)."""
    from types import SimpleNamespace

    from PySide6.QtWidgets import QVBoxLayout, QWidget

    from app.gui.views.network import PopulationRateView, RasterView

    raster, rate = RasterView(), PopulationRateView()
    rate.follow(raster.plot)
    box = QWidget()
    column = QVBoxLayout(box)
    column.addWidget(raster)
    column.addWidget(rate)
    qtbot.addWidget(box)
    box.resize(600, 500)
    times = np.linspace(10.0, 20.0, 200)
    frame = SimpleNamespace(t=20.0, width=100, height=100, raster_times=times,
                            raster_neurons=np.arange(200) * 50, pop_times=times,
                            pop_rate=0.3 + 0.1 * np.sin(times), burst_level=0.6, burst_times=np.zeros(0))
    raster.set_frame(frame)
    rate.set_frame(frame)
    box.show()
    qtbot.waitExposed(box)
    qtbot.wait(50)
    spans = []
    for view in (raster, rate):
        rect = view.plot.vb.sceneBoundingRect()
        ends = [view.plot_widget.mapTo(box, view.plot_widget.mapFromScene(p)).x()
                for p in (rect.topLeft(), rect.topRight())]
        spans.append(ends)
    assert spans[0] == pytest.approx(spans[1], abs=1), spans
    assert rate.plot.viewRange()[0] == pytest.approx([15.0, 20.0])


def culture_frame(width: int, height: int, rate, radius=0.05, inhibitory=(), starter=(), **extra):
    """A network frame for the culture view: ``inhibitory``/``starter`` list neuron indices."""
    from types import SimpleNamespace

    n = width * height
    kinds = {name: np.isin(np.arange(n), list(where)) for name, where in (("inhibitory", inhibitory),
                                                                         ("starter", starter))}
    fields = dict(width=width, height=height, rate=np.broadcast_to(np.asarray(rate, float), n).copy(),
                  radius=np.broadcast_to(np.asarray(radius, float), n).copy(), strong_pre=None,
                  strong_post=None, strong_w=None, **kinds)
    return SimpleNamespace(**{**fields, **extra})


def shown_view(qtbot, view, size=(620, 420)):
    qtbot.addWidget(view)
    view.resize(*size)
    view.show()
    qtbot.waitExposed(view)
    return view


def colours_near(view, x: float, y: float, reach: int = 0) -> np.ndarray:
    """The RGBs the view shows within ``reach`` pixels of data point (x, y), (k, 3)."""
    from PySide6.QtCore import QPointF

    image = view.plot_widget.grab().toImage()
    pixel = view.plot_widget.mapFromScene(view.plot.vb.mapViewToScene(QPointF(x, y)))
    return np.array([image.pixelColor(pixel.x() + dx, pixel.y() + dy).getRgb()[:3]
                     for dx in range(-reach, reach + 1) for dy in range(-reach, reach + 1)])


def colour_at(view, x: float, y: float) -> np.ndarray:
    return colours_near(view, x, y)[0]


def test_culture_image_colours_neurons_by_recent_rate(qtbot):
    """One pixel per neuron, neuron i at (i % width, i // width): silent grey, 1.5 Hz orange,
    >= 10 Hz red (the 10,000 per-neuron scatter dots are gone); a colour bar gives the scale."""
    from app.gui.views.network import RATE_TOP, CultureView

    view = shown_view(qtbot, CultureView())
    width, height = 20, 10
    rate = np.zeros(width * height)
    rate[7 * width + 3] = 25.0                  # (3, 7): far above the red end
    rate[2 * width + 15] = RATE_TOP             # (15, 2): at the red end
    rate[5 * width + 10] = 0.15 * RATE_TOP      # (10, 5): the map's orange stop
    view.set_frame(culture_frame(width, height, rate, inhibitory=[2 * width + 15]))
    qtbot.wait(50)
    assert view.image.image.shape == (height, width)
    grey, orange, red = (200, 200, 200), (255, 160, 40), (200, 0, 0)
    for (x, y), expected in (((3, 7), red), ((15, 2), red), ((10, 5), orange), ((7, 3), grey),
                             ((0, 0), grey), ((19, 9), grey)):
        shown = colour_at(view, x + 0.3, y + 0.3)      # off the centre, where its circle is
        assert np.abs(shown - expected).max() <= 8, ((x, y), shown, expected)
    assert view.colour_bar.levels() == (0.0, RATE_TOP)


def test_culture_marks_inhibitory_neurons_and_starters(qtbot):
    """One overlay per kind at the neurons' grid positions (one symbol and pen each), drawn
    again only when the kinds change; the rate colour still shows inside the outline."""
    from app.gui.views.network import CultureView

    view = shown_view(qtbot, CultureView())
    width, height = 12, 8
    inhibitory, starter = [0, 13, 95], [5, 40]
    frame = culture_frame(width, height, 20.0, inhibitory=inhibitory, starter=starter)
    view.set_frame(frame)
    for item, where in ((view.inhibitory, inhibitory), (view.starters, starter)):
        x, y = item.getData()
        assert sorted(zip(x, y)) == sorted((i % width, i // width) for i in where)
    qtbot.wait(50)
    assert np.abs(colour_at(view, 13 % width + 0.2, 13 // width + 0.2) - (200, 0, 0)).max() <= 8
    assert view.inhibitory.opts["symbol"] != view.starters.opts["symbol"]
    view.show_kinds.setChecked(False)                   # the rate map alone
    assert not view.inhibitory.isVisible() and not view.starters.isVisible()
    view.show_kinds.setChecked(True)
    view.set_frame(culture_frame(width, height, 20.0, inhibitory=[1], starter=[]))
    assert list(zip(*view.inhibitory.getData())) == [(1, 0)]
    assert len(view.starters.getData()[0]) == 0


def test_culture_redraws_circles_and_synapses_only_when_they_change(qtbot, monkeypatch):
    """Radii and synapses change at epoch ends: frames in between leave their items alone
    (their cached pictures stay); a new radius gives circles of the new diameter."""
    from app.gui.views.network import CultureView

    view = shown_view(qtbot, CultureView())
    synapses = dict(strong_pre=np.array([0, 5]), strong_post=np.array([7, 2]), strong_w=np.array([1.0, -1.0]))
    calls = []
    for name in ("circles", "lines"):
        item = getattr(view, name)
        original = item.setData
        monkeypatch.setattr(item, "setData", lambda *a, _o=original, _n=name, **k: (calls.append(_n), _o(*a, **k)))
    view.set_frame(culture_frame(4, 3, 1.0, radius=0.5, **synapses))
    view.set_frame(culture_frame(4, 3, 7.0, radius=0.5, **synapses))
    assert calls == ["circles", "lines"]
    assert np.array_equal(view.image.image, np.full((3, 4), 7.0))
    view.set_frame(culture_frame(4, 3, 7.0, radius=1.25, **synapses))
    assert calls == ["circles", "lines", "circles"]
    assert np.allclose(view.circles.data["size"], 2.5)
    xs, ys = view.lines.getData()
    assert list(zip(xs, ys)) == [(0, 0), (3, 1)]               # 0 -> 7 excitatory
    xs, ys = view.inh_lines.getData()
    assert list(zip(xs, ys)) == [(1, 1), (2, 0)]               # 5 -> 2 inhibitory
    view.show_synapses.setChecked(False)
    assert len(view.lines.getData()[0] if view.lines.getData()[0] is not None else []) == 0
    view.clear()
    assert view.image.image is None and len(view.inhibitory.getData()[0]) == 0


def test_raster_draws_each_spike_as_a_tick(qtbot):
    """The raster holds the frame's spikes, each a tick at its time spanning its neuron (one line
    item: a scatter plot's setData of 11,000 spikes took 12 ms a frame), at least 2 px tall."""
    from types import SimpleNamespace

    from app.gui.views.network import RASTER_TICK_PX, RasterView

    view = shown_view(qtbot, RasterView(), (600, 300))
    rng = np.random.default_rng(5)
    times = rng.uniform(15.0, 20.0, 3000)
    neurons = rng.integers(0, 10000, 3000)
    frame = SimpleNamespace(t=20.0, width=100, height=100, raster_times=times, raster_neurons=neurons)
    view.set_frame(frame)
    qtbot.wait(50)
    shown_t, shown_n = view.spikes()
    assert np.array_equal(shown_t, times) and np.array_equal(shown_n, neurons)
    x, y = view.ticks.getData()
    assert np.array_equal(x[0::2], times) and np.array_equal(x[1::2], times)
    assert np.all(y[0::2] < neurons) and np.all(y[1::2] > neurons)
    lo, hi = view.plot.vb.viewRange()[1]
    pixels = (y[1::2] - y[0::2]) / (hi - lo) * view.plot.vb.height()
    assert pixels.min() == pytest.approx(RASTER_TICK_PX, rel=0.05)
    assert colours_near(view, times[0], neurons[0], reach=1).max(axis=1).min() < 100   # a dark tick
    assert colours_near(view, 17.5, 10050, reach=1).min() == 255                       # above all
    view.clear()
    assert view.spikes()[0].size == 0


def test_culture_of_10000_neurons_is_one_image(network):
    """A 100x100 culture: one image of 10,000 rates (10,000 scatter dots with per-dot brushes
    and symbols took most of a frame's drawing), connectivity circles for neurons spread over
    the whole culture (every k-th index drew them in 10 of its 100 columns)."""
    from app.gui.views.network import MAX_CIRCLES, circle_neurons

    rng = np.random.default_rng(3)
    n = 100 * 100
    view = network.culture
    for _ in range(2):
        rate = rng.uniform(0, 20, n)
        view.set_frame(culture_frame(100, 100, rate, radius=rng.uniform(0.5, 3, n),
                                     inhibitory=np.flatnonzero(rng.random(n) < 0.2),
                                     starter=np.flatnonzero(rng.random(n) < 0.01)))
    assert np.array_equal(view.image.image, rate.reshape(100, 100))
    x, y = view.circles.getData()
    assert 500 <= len(x) <= MAX_CIRCLES
    assert len(np.unique(x)) >= 20 and len(np.unique(y)) >= 20 and x.max() >= 90 and y.max() >= 90
    for width, height in ((1, 5000), (5000, 1), (317, 211)):
        where = circle_neurons(width, height)
        assert MAX_CIRCLES // 2 <= len(where) <= MAX_CIRCLES, (width, height, len(where))
        assert where.max() < width * height and len(np.unique(where)) == len(where)
    assert len(circle_neurons(10, 10)) == 100                   # a small culture: every neuron


def test_epoch_plot_titles_fit_their_plots_at_1280_px(window, qtbot, short_run):
    """At 1280 px the last title read "bursts per minu..." (cut at the view's edge)."""
    from app.gui.clipping import clipped_plot_titles

    window.resize(1280, 800)
    panel = window.select_panel("network")
    cfg, frame = short_run("network")
    panel.apply_config(cfg)
    panel.show_frame(frame)
    qtbot.wait(120)
    assert panel.history.isVisible() and panel.history.width() < 1280
    assert not clipped_plot_titles(window)
