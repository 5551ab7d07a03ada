"""The loop that owns a running simulation: the same code for the GUI worker and the CLI.

``Session.run`` is called in the thread that owns the simulation (a QThread in the GUI,
the main thread in the CLI). It pushes the CUDA context, builds the simulation, calls
``advance`` until done or stopped, and hands each frame to ``on_frame``. Pause, resume,
stop and parameter changes are thread-safe requests applied between slices.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import threading
import time
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from app.compute.device import backend_context
from app.sims.common.checkpoint import check_target, read_checkpoint, write_checkpoint
from app.sims.common.config import dump_yaml, to_plain
from app.sims.common.output import RunFolder
from app.sims.common.provenance import input_files
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
        self.started_at = time.time()     # wall-clock start of ``run`` (for the RO-Crate)

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
        self.started_at = time.time()
        with backend_context(self.backend, self.device_index):
            if self.cfg is not None:
                preflight(self.domain, self.cfg, self.backend)
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


def preflight(domain: Domain, cfg: Any, backend: str) -> None:
    """Checks before anything is allocated: the memory the run needs (``estimate_memory`` of
    the module that defines the config class) against what is free, then that module's
    ``check_before_run`` (integer ranges, checkpoint files); a domain may define neither.
    Raises ConfigError."""
    from app.sims.common.memory import check_fits

    config = importlib.import_module(type(cfg).__module__)
    estimate = getattr(config, "estimate_memory", None)
    if estimate is not None:
        check_fits(estimate(cfg, backend), backend, f"this {domain.name} run")
    target = getattr(getattr(cfg, "run", None), "checkpoint", "")
    if target:
        check_target(target)
    check = getattr(config, "check_before_run", None)
    if check is not None:
        check(cfg, backend)


def write_run_outputs(out_dir: str | Path, cfg: Any, arrays: Mapping[str, np.ndarray],
                      summary: Mapping[str, Any],
                      extra: Callable[[Path], None] | None = None, started: float | None = None) -> Path:
    """Write ``config.yaml``, ``results.npz``, ``summary.json`` (and what ``extra`` writes into
    the folder it is given) into ``out_dir`` as one unit, with its RO-Crate (``started``: when
    the run began, epoch seconds): see :class:`RunFolder`."""
    with RunFolder(out_dir) as folder:
        folder.provenance = {"summary": summary, "external": input_files(to_plain(cfg)),
                             **({"started": started} if started else {})}
        folder.save_text("config.yaml", dump_yaml(cfg))
        folder.save_npz("results.npz", arrays)
        folder.save_json("summary.json", summary)
        if extra is not None:
            extra(folder.stage)
    return Path(out_dir)


def save_checkpoint(path: str | Path, sim: Simulation) -> Path:
    """The simulation's state as one NPZ (config as YAML text inside), written atomically, only
    over a file that is one of our checkpoints."""
    return write_checkpoint(path, sim.state(), sim.domain, compressed=True)


def load_checkpoint(path: str | Path, domain: str | None = None) -> dict[str, Any]:
    """A checkpoint's arrays; CheckpointError (a ConfigError) naming the file and the reason."""
    return read_checkpoint(path, domain)


def run_headless(domain: Domain, cfg: Any, backend: str, out_dir: str | Path | None,
                 progress: Callable[[Frame], None] | None = None,
                 extra: Callable[[Session, Path], None] | None = None) -> Session:
    """The CLI path: run to the end on this thread and write the run's files (``extra`` adds
    files, e.g. the PNG, into the same unit)."""
    start = time.perf_counter()
    session = Session(domain, cfg, backend, on_frame=progress)

    def write(out: str | Path) -> None:
        more = None if extra is None else (lambda folder: extra(session, folder))
        write_run_outputs(out, cfg, session.arrays, session.summary, more, session.started_at)

    try:
        session.run()
    except Exception:
        if out_dir is not None and session.summary:
            write(out_dir)
            log.warning("the run failed; what it had is in %s", out_dir)
        raise
    log.info("run finished in %.2f s", time.perf_counter() - start)
    if out_dir is not None:
        write(out_dir)
    return session
