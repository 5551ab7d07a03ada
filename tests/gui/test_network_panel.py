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
    qtbot.waitUntil(lambda: worker.session.holding, timeout=30000)   # the slice in flight landed
    qtbot.wait(100)                                 # and was published by the display timer
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
    assert len(network.culture.dots.data) == 36
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


def test_culture_of_10000_neurons_draws_from_a_few_dots(network):
    """A 100x100 culture: the dots share the palette's 64 brushes (one rendered dot per brush and
    symbol in pyqtgraph's atlas, not one per neuron: 5 s a frame before), and connectivity
    circles are drawn for every k-th neuron only."""
    from types import SimpleNamespace

    from app.gui.views.network import MAX_CIRCLES

    rng = np.random.default_rng(3)
    n = 100 * 100
    view = network.culture
    for _ in range(2):
        frame = SimpleNamespace(width=100, height=100, radius=rng.uniform(0.5, 3, n), rate=rng.uniform(0, 20, n),
                                inhibitory=rng.random(n) < 0.2, starter=rng.random(n) < 0.01,
                                strong_pre=None, strong_post=None, strong_w=None)
        view.set_frame(frame)
    assert len(view.dots.data) == n
    assert len(view.dots.fragmentAtlas) <= 64 * 3
    assert 0 < len(view.circles.data) <= MAX_CIRCLES
