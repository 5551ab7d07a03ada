"""The shared run machinery: newest-frame slot and button states."""

from __future__ import annotations

import dataclasses

import pytest

pytest.importorskip("PySide6", reason="the GUI extra is not installed")

from app.gui.runner import RunControls, RunState, SimulationWorker
from app.sims.common.simulation import default_preset, load_run_config

pytestmark = pytest.mark.gui


def test_worker_publishes_only_the_newest_frame(qtbot):
    domain, cfg = load_run_config(default_preset("ssa"))
    worker = SimulationWorker(domain, cfg, "cpu")
    frames = [object(), object(), object()]
    for f in frames:
        worker._store(f)                   # what on_frame does in the worker thread
    with qtbot.waitSignal(worker.frame_ready) as blocker:
        worker._publish()                  # what the 30 Hz timer does
    assert blocker.args == [frames[-1]]
    with qtbot.assertNotEmitted(worker.frame_ready):
        worker._publish()                  # nothing new: nothing emitted


def test_stop_before_start_ends_at_once(qtbot):
    domain, cfg = load_run_config(default_preset("ssa"))
    cfg = dataclasses.replace(cfg, ensemble=dataclasses.replace(cfg.ensemble, realizations=4))
    worker = SimulationWorker(domain, cfg, "cpu")
    worker.stop()
    with qtbot.waitSignal(worker.run_finished, timeout=30000) as blocker:
        worker.start()
    arrays, summary = blocker.args
    assert summary["finished"] is False


def test_run_controls_states(qtbot):
    rc = RunControls()
    qtbot.addWidget(rc)
    enabled = lambda: tuple(b.isEnabled() for b in (rc.run_button, rc.pause_button,
                                                   rc.stop_button, rc.reset_button))
    assert enabled() == (True, False, False, True)
    rc.set_state(RunState.RUNNING)
    assert enabled() == (False, True, True, False) and rc.pause_button.text() == "Pause"
    rc.set_state(RunState.PAUSED)
    assert enabled() == (False, True, True, False) and rc.pause_button.text() == "Resume"
    with qtbot.waitSignal(rc.resume_clicked):
        rc.pause_button.click()
    rc.set_state(RunState.FINISHED)
    assert enabled() == (True, False, False, True)
    rc.set_progress(0.5)
    assert rc.progress.value() == 500


def test_drawing_is_throttled_to_its_budget(qtbot):
    """A slow consumer (25 ms of CPU per frame) gets frames no more often than its cost over
    DRAW_BUDGET; the first frame with a result comes at once; the last one is never lost."""
    import time
    from types import SimpleNamespace

    from PySide6.QtCore import QTimer

    from app.gui import runner

    domain, cfg = load_run_config(default_preset("ssa"))
    worker = SimulationWorker(domain, cfg, "cpu")
    drawn: list[float] = []

    def draw(frame) -> None:
        end = time.thread_time() + 0.025
        while time.thread_time() < end:      # CPU work, as a redraw is
            pass
        drawn.append(time.perf_counter())

    worker.frame_ready.connect(draw)
    feeder = QTimer()
    feeder.timeout.connect(lambda: worker._store(SimpleNamespace(progress=0.5)))
    feeder.start(5)                           # a fast simulation: a new frame every 5 ms
    poll = QTimer()
    poll.timeout.connect(worker._publish)
    poll.start(runner.POLL_MS)
    start = time.perf_counter()
    # frames, not a time: a busy machine draws them later, the budget's gaps stay
    qtbot.waitUntil(lambda: len(drawn) >= 4, timeout=120000)
    elapsed = time.perf_counter() - start
    feeder.stop()
    poll.stop()
    gaps = [b - a for a, b in zip(drawn, drawn[1:])]
    assert min(gaps) >= 0.025 / runner.DRAW_BUDGET * 0.9       # within the budget
    assert drawn[0] - start < min(gaps)                        # the first one at once
    assert len(drawn) <= 1 + elapsed / (0.025 / runner.DRAW_BUDGET) + 1
    worker._store(SimpleNamespace(progress=1.0))
    with qtbot.waitSignal(worker.frame_ready):
        worker._publish(force=True)                            # the end of a run: always shown


def test_the_first_frame_waits_for_a_second_of_run_or_its_end_or_a_pause(qtbot):
    """A sub-second run is drawn once, when done; a longer one from FIRST_FRAME_AFTER on; a
    pause shows the newest frame at once."""
    import time
    from types import SimpleNamespace

    from app.gui import runner

    domain, cfg = load_run_config(default_preset("ssa"))
    worker = SimulationWorker(domain, cfg, "cpu")
    drawn: list[float] = []
    progress: list[float] = []
    worker.frame_ready.connect(lambda frame: drawn.append(time.perf_counter()))
    worker.progress_ready.connect(progress.append)
    # the clocks are set, not slept on: on a loaded machine a sleep overshoots FIRST_FRAME_AFTER
    worker._started_at = time.perf_counter()                  # as the thread's start sets it
    worker._store(SimpleNamespace(progress=0.5))
    worker._publish()
    worker._started_at = time.perf_counter()                  # still early in the run ...
    worker._progress_at = time.perf_counter() - runner.PROGRESS_EVERY    # ... a progress tick later
    worker._publish()
    assert not drawn                                          # too early: nothing drawn yet
    assert progress and progress[-1] == 0.5                   # but the progress bar moves
    worker._started_at = time.perf_counter()
    worker.session.pause()
    worker._publish()
    assert len(drawn) == 1                                    # a pause shows it at once
    worker.session.resume()
    worker._started_at = time.perf_counter()
    worker._store(SimpleNamespace(progress=1.0))
    worker._publish(force=True)                               # the end: always shown
    assert len(drawn) == 2

    late = SimulationWorker(domain, cfg, "cpu")
    shown: list[float] = []
    late.frame_ready.connect(lambda frame: shown.append(time.perf_counter()))
    late._started_at = time.perf_counter() - runner.FIRST_FRAME_AFTER     # a second into the run
    late._store(SimpleNamespace(progress=0.5))
    late._publish()
    assert len(shown) == 1                                    # then at once
