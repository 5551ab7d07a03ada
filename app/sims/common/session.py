"""The loop that owns a running simulation: the same code for the GUI worker and the CLI.

``Session.run`` is called in the thread that owns the simulation (a QThread in the GUI,
the main thread in the CLI). It pushes the CUDA context, builds the simulation, calls
``advance`` until done or stopped, and hands each frame to ``on_frame``. Pause, resume,
stop and parameter changes are thread-safe requests applied between slices.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from app.compute.device import backend_context
from app.sims.common.config import dump_yaml
from app.sims.common.output import save_json, save_npz, save_text
from app.sims.common.simulation import Domain, Frame, Simulation

log = logging.getLogger(__name__)


class Session:
    """Drive one simulation in bounded slices with pause / resume / stop / checkpoint."""

    def __init__(self, domain: Domain, cfg: Any, backend: str, device_index: int = 0,
                 on_frame: Callable[[Frame], None] | None = None,
                 checkpoint: Mapping[str, Any] | None = None):
        self.domain, self.cfg, self.backend = domain, cfg, backend
        self.device_index = device_index
        self.on_frame = on_frame or (lambda frame: None)
        self._checkpoint = checkpoint
        self._resume = threading.Event()
        self._resume.set()
        self._holding = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._changes: dict[str, Any] = {}
        self._actions: list[Callable[[Simulation], None]] = []
        self._pause_when: Callable[[Frame], bool] | None = None
        self.last_frame: Frame | None = None
        self.arrays: dict[str, np.ndarray] = {}
        self.summary: dict[str, Any] = {}
        self.stopped = False

    # ---- requests from any thread -------------------------------------------------------
    def pause(self) -> None:
        self._resume.clear()

    def resume(self) -> None:
        self._resume.set()

    def stop(self) -> None:
        self._stop.set()
        self._resume.set()

    @property
    def paused(self) -> bool:
        return not self._resume.is_set()

    @property
    def holding(self) -> bool:
        """True while the owning thread is parked by a pause (no slice in flight)."""
        return self._holding.is_set()

    def pause_when(self, condition: Callable[[Frame], bool] | None) -> None:
        """Pause by itself after a frame for which ``condition(frame)`` holds (checked in the
        owning thread, so no further slice runs first); None: never."""
        with self._lock:
            self._pause_when = condition

    def request_update(self, changes: Mapping[str, Any]) -> None:
        """Parameter changes, applied before the next slice."""
        with self._lock:
            self._changes.update(changes)

    def request(self, action: Callable[[Simulation], None]) -> None:
        """Run ``action(sim)`` in the owning thread between slices (e.g. take a checkpoint)."""
        with self._lock:
            self._actions.append(action)

    # ---- the owning thread --------------------------------------------------------------
    def run(self) -> Frame | None:
        """Build and advance the simulation until it finishes or is stopped; return the last frame."""
        module = self.domain.load()
        with backend_context(self.backend, self.device_index):
            if self._checkpoint is not None:
                sim = module.Simulation.restore(self._checkpoint, self.backend)
            else:
                sim = module.Simulation.from_config(self.cfg, self.backend)
            try:
                while not sim.finished:
                    if not self._resume.is_set():
                        self._holding.set()
                        self._resume.wait()
                        self._holding.clear()
                    if self._stop.is_set():
                        self.stopped = True
                        break
                    self._apply_requests(sim)
                    frame = sim.advance()
                    self.last_frame = frame
                    self.on_frame(frame)
                    with self._lock:
                        condition = self._pause_when
                    if condition is not None and not frame.done and condition(frame):
                        self.pause()
                self._apply_requests(sim)
                self.arrays, self.summary = sim.results()
            except Exception as exc:          # keep what the run had, then report the failure
                try:
                    self.arrays, summary = sim.results()
                    self.summary = {**summary, "finished": False,
                                    "stopped": {"reason": f"{type(exc).__name__}: {exc}"}}
                except Exception:             # results of a broken state are not always there
                    pass
                raise
            finally:
                sim.close()
        return self.last_frame

    def _apply_requests(self, sim: Simulation) -> None:
        with self._lock:
            changes, self._changes = self._changes, {}
            actions, self._actions = self._actions, []
        if changes:
            sim.update(changes)
        for action in actions:
            action(sim)


def write_run_outputs(out_dir: str | Path, cfg: Any, arrays: Mapping[str, np.ndarray],
                      summary: Mapping[str, Any]) -> Path:
    """Write ``config.yaml``, ``results.npz`` and ``summary.json`` atomically into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    save_text(out / "config.yaml", dump_yaml(cfg))
    save_npz(out / "results.npz", arrays)
    save_json(out / "summary.json", summary)
    return out


def save_checkpoint(path: str | Path, sim: Simulation) -> Path:
    """The simulation's state as one NPZ (config as YAML text inside), written atomically."""
    state = dict(sim.state())
    return save_npz(path, {k: np.asarray(v) for k, v in state.items()})


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    with np.load(path, allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


def run_headless(domain: Domain, cfg: Any, backend: str, out_dir: str | Path | None,
                 progress: Callable[[Frame], None] | None = None) -> Session:
    """The CLI path: run to the end on this thread and write the run's files."""
    start = time.perf_counter()
    session = Session(domain, cfg, backend, on_frame=progress)
    try:
        session.run()
    except Exception:
        if out_dir is not None and session.summary:
            write_run_outputs(out_dir, cfg, session.arrays, session.summary)
            log.warning("the run failed; what it had is in %s", out_dir)
        raise
    log.info("run finished in %.2f s", time.perf_counter() - start)
    if out_dir is not None:
        write_run_outputs(out_dir, cfg, session.arrays, session.summary)
    return session
