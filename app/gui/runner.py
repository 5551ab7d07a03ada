"""The run machinery every panel shares: a worker thread per simulation and the run buttons.

The worker owns a :class:`~app.sims.common.session.Session`. Its ``on_frame`` callback only
stores the newest frame in a lock-protected slot (older ones are dropped); a ~30 Hz timer in
the GUI thread takes it from there and emits ``frame_ready`` once per new frame, so a fast
simulation never floods the event loop.

Drawing shares the CPU with the simulation (on a 2-core machine, with software OpenGL, a 3D
redraw costs as much as a simulation slice), so the GUI keeps its drawing to at most
:data:`DRAW_BUDGET` of the wall time: after a frame whose drawing took ``c`` seconds, the
next one waits ``c / DRAW_BUDGET``. ``c`` is the larger of the GUI thread's CPU time since
the last frame and the wall time from handing the frame over until the event loop is idle
again (painting included; software OpenGL renders in threads of its own, which the GUI
thread's CPU clock does not see). The first frame waits :data:`FIRST_FRAME_AFTER` seconds of
the run (or its end, or a pause), so a sub-second run is drawn once, when done.
"""

from __future__ import annotations

import logging
import threading
import time
from enum import Enum
from typing import Any

from PySide6.QtCore import QCoreApplication, QEventLoop, QThread, QTimer, Signal
from PySide6.QtWidgets import QHBoxLayout, QProgressBar, QPushButton, QVBoxLayout, QWidget

from app.gui.errors import describe
from app.sims.common.session import Session
from app.sims.common.simulation import Domain, Frame

log = logging.getLogger(__name__)

POLL_MS = 33
DRAW_BUDGET = 0.05      # the GUI thread's CPU time as a fraction of wall time, at most
MAX_WAIT = 2.0          # a frame is shown at least this often (seconds), whatever it costs
# A run's first frame waits this long (or for the run's end, or a pause): a run shorter than
# this is drawn once, when done, as QProgressDialog shows nothing for its minimumDuration. On
# CUDA a whole paper-scale run can take 0.2 s; a draw during it holds the GIL inside Qt's
# painting and made the SSA run 1.8x slower in the GUI than headless (H100, 2026-11-24).
# 0.6 s, not more: a run's first result is due within a second of Run (0.2-s CUDA runs are
# still drawn once).
FIRST_FRAME_AFTER = 0.6
# While the first frame waits, the progress bar moves this often (seconds): QProgressBar.setValue
# repaints at once, holding the GIL for 2-3 ms (Xvfb), each time the shown percentage changes.
PROGRESS_EVERY = 0.25
MAX_KEPT = 10_000        # frames kept for publication at most (SimulationWorker.keep_frames)


def flush_paints() -> None:
    """Handle the posted layout, scene and paint events now (user input stays queued).

    A panel calls this before its worker starts: the cleared views then paint before the run,
    not during it. pyqtgraph paints in Python (axes: 5-7 ms each on the 2-core VM), holding the
    GIL the worker needs to launch its kernels; painted during a run of 0.2 s on CUDA they
    took a tenth of its throughput. Twice: a scene's change notice is itself a posted event.
    """
    for _ in range(2):
        QCoreApplication.processEvents(QEventLoop.ProcessEventsFlag.ExcludeUserInputEvents)


class SimulationWorker(QThread):
    """Run one simulation in its own thread and publish its newest frame at display rate.

    Signals
    -------
    run_started()
        The thread began running.
    frame_ready(frame)
        A new frame (in the GUI thread; intermediate frames may have been dropped).
    progress_ready(fraction)
        The newest frame's progress while the first frame waits (nothing is drawn).
    preparing(text)
        The run waits for its compiled engine: 'preparing the compiled engine: stage x of y,
        n s' (the run goes on on the reference engine meanwhile); '' once that is over.
    run_finished(arrays, summary)
        The run ended (finished or stopped); the last frame was published before this.
    failed(message, detail)
        The run raised; ``detail`` holds nvcc's log or the traceback.

    ``QThread`` already owns signals called ``started`` and ``finished`` (no arguments), so
    the run-level signals carry a ``run_`` prefix.
    """

    run_started = Signal()
    frame_ready = Signal(object)
    progress_ready = Signal(float)
    preparing = Signal(str)
    run_finished = Signal(object, object)
    failed = Signal(str, str)

    def __init__(self, domain: Domain, cfg: Any, backend: str, device_index: int = 0,
                 parent=None):
        super().__init__(parent)
        self.domain, self.cfg, self.backend = domain, cfg, backend
        # The Session is plain Python (no GPU object until run()), so building it here lets
        # pause/stop requests made before the thread starts take effect.
        self.session = Session(domain, cfg, backend, device_index, on_frame=self._store)
        self._lock = threading.Lock()
        self._newest: Frame | None = None
        # frames for which keep_frames(frame) holds are all published, in order, never dropped
        # (a recorded movie's epochs); None: only the newest frame counts
        self.keep_frames = None
        self._kept: list[Frame] = []
        self._error: tuple[str, str] | None = None
        self.frames_published = 0
        self.run_seconds = 0.0            # the simulation's own time in its thread, once done
        self.last_frame: Frame | None = None
        self._published_at = 0.0          # wall clock of the last publication
        self._gui_cpu_at = 0.0            # the GUI thread's CPU clock then
        self._wait = 0.0                  # seconds the next publication waits
        self._busy = 0.0                  # wall seconds the last frame kept the GUI busy
        self._result_shown = False        # a frame with progress > 0 has been published
        self._started_at = 0.0            # wall clock of the thread's start
        self._progress_at = 0.0           # wall clock of the last progress_ready
        self._preparing = ""              # the last preparing text emitted
        self._timer = QTimer(self)
        self._timer.setInterval(POLL_MS)
        self._timer.timeout.connect(self._publish)
        self.started.connect(self._on_thread_started)
        self.finished.connect(self._on_thread_finished)

    # ---- worker thread ------------------------------------------------------------------
    def run(self) -> None:
        start = time.perf_counter()
        try:
            self.session.run()
            self.run_seconds = time.perf_counter() - start
            log.info("%s run on %s %s after %.2f s", self.domain.name, self.backend,
                     "stopped" if self.session.stopped else "finished", self.run_seconds)
        except Exception as exc:  # reported in the GUI thread, never raised out of the thread
            self._error = describe(exc)

    def _store(self, frame: Frame) -> None:
        with self._lock:
            if self.keep_frames is not None and self.keep_frames(frame) and len(self._kept) < MAX_KEPT:
                self._kept.append(frame)
                self._newest = None             # older than the kept one
            else:
                self._newest = frame

    @property
    def pending(self) -> bool:
        """True while a frame the run handed over waits for publication (the draw budget)."""
        with self._lock:
            return self._newest is not None or bool(self._kept)

    # ---- GUI thread ---------------------------------------------------------------------
    def _take(self) -> Frame | None:
        with self._lock:
            frame, self._newest = self._newest, None
        return frame

    def _publish(self, force: bool = False) -> None:
        self._check_preparing()
        with self._lock:
            kept, self._kept = self._kept, []
        for frame in kept:                      # frames that must each be drawn (and recorded)
            self.last_frame = frame
            self.frames_published += 1
            self._result_shown = True
            self.frame_ready.emit(frame)
        now = time.perf_counter()
        if not force:
            if (not self.frames_published and now - self._started_at < FIRST_FRAME_AFTER
                    and not self.session.paused):
                with self._lock:
                    waiting = self._newest
                if waiting is not None and now - self._progress_at >= PROGRESS_EVERY:
                    self._progress_at = now          # the progress bar moves meanwhile
                    self.progress_ready.emit(getattr(waiting, "progress", 0.0))
                return
            if now - self._published_at < self._wait:
                return
            # what the GUI thread spent since the last frame: drawing it, painting, events
            cost = max(time.thread_time() - self._gui_cpu_at, self._busy)
            # the first result is shown at once; the budget applies from then on
            self._wait = min(MAX_WAIT, cost / DRAW_BUDGET) if self._result_shown else 0.0
            if now - self._published_at < self._wait:
                return
        frame = self._take()
        if frame is not None:
            self.last_frame = frame
            self.frames_published += 1
            self._result_shown = self._result_shown or getattr(frame, "progress", 1.0) > 0
            # clocks read before the hand-over: the drawing (synchronous) counts as its cost
            self._gui_cpu_at = time.thread_time()
            handed = self._published_at = time.perf_counter()
            self.frame_ready.emit(frame)
            # a zero timer fires once the posted paint requests have been handled
            QTimer.singleShot(0, self, lambda: setattr(self, "_busy", time.perf_counter() - handed))

    def _check_preparing(self) -> None:
        text = self.session.preparing
        if text != self._preparing:
            self._preparing = text
            self.preparing.emit(text)

    def _on_thread_started(self) -> None:
        self._published_at = self._started_at = self._progress_at = time.perf_counter()
        self._gui_cpu_at = time.thread_time()
        self._timer.start()
        self.run_started.emit()

    def _on_thread_finished(self) -> None:
        self._timer.stop()
        self._publish(force=True)
        if self._preparing:
            self._preparing = ""
            self.preparing.emit("")
        if self._error is not None:
            self.failed.emit(*self._error)
        else:
            self.run_finished.emit(self.session.arrays, self.session.summary)

    # ---- requests (any thread) ----------------------------------------------------------
    def pause(self) -> None:
        self.session.pause()

    def resume(self) -> None:
        self.session.resume()

    def stop(self) -> None:
        self.session.stop()

    @property
    def paused(self) -> bool:
        return self.session.paused

    def stop_and_wait(self, timeout_ms: int = 10000) -> bool:
        """Stop and join the thread (used when a panel or the window closes)."""
        self.stop()
        return self.wait(timeout_ms)


class RunState(str, Enum):
    IDLE = "idle"
    RUNNING = "running"
    PAUSED = "paused"
    FINISHED = "finished"


class RunControls(QWidget):
    """Run / Pause (Resume) / Stop / Reset buttons and a progress bar, the same in every panel."""

    run_clicked = Signal()
    pause_clicked = Signal()
    resume_clicked = Signal()
    stop_clicked = Signal()
    reset_clicked = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.run_button = QPushButton("Run")
        self.pause_button = QPushButton("Pause")
        self.stop_button = QPushButton("Stop")
        self.reset_button = QPushButton("Reset")
        for name, button in (("run", self.run_button), ("pause", self.pause_button),
                             ("stop", self.stop_button), ("reset", self.reset_button)):
            button.setObjectName(f"{name}Button")
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.setFormat("%p%")
        buttons = QHBoxLayout()
        for b in (self.run_button, self.pause_button, self.stop_button, self.reset_button):
            buttons.addWidget(b)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(buttons)
        layout.addWidget(self.progress)
        self.run_button.clicked.connect(self.run_clicked)
        self.pause_button.clicked.connect(self._pause_or_resume)
        self.stop_button.clicked.connect(self.stop_clicked)
        self.reset_button.clicked.connect(self.reset_clicked)
        self.state = RunState.IDLE
        self.set_state(RunState.IDLE)

    def _pause_or_resume(self) -> None:
        if self.state is RunState.PAUSED:
            self.resume_clicked.emit()
        else:
            self.pause_clicked.emit()

    def set_state(self, state: RunState) -> None:
        """Enable the buttons that make sense in ``state``."""
        self.state = RunState(state)
        active = self.state in (RunState.RUNNING, RunState.PAUSED)
        self.run_button.setEnabled(not active)
        self.pause_button.setEnabled(active)
        self.pause_button.setText("Resume" if self.state is RunState.PAUSED else "Pause")
        self.stop_button.setEnabled(active)
        self.reset_button.setEnabled(not active)
        if self.state is RunState.IDLE:
            self.set_progress(0.0)

    def set_preparing(self, text: str) -> None:
        """Show ``text`` (the engine being prepared) on the progress bar; '' clears it."""
        self.progress.setFormat(f"%p% · {text}" if text else "%p%")
        self.progress.setToolTip(text)

    def set_progress(self, fraction: float) -> None:
        self.progress.setValue(int(round(1000 * min(max(fraction, 0.0), 1.0))))
