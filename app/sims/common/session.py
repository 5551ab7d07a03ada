"""The loop that owns a running simulation: the same code for the GUI worker and the CLI.

``Session.run`` is called in the thread that owns the simulation (a QThread in the GUI,
the main thread in the CLI). It pushes the CUDA context, builds the simulation, calls
``advance`` until done or stopped, and hands each frame to ``on_frame``. Pause, resume,
stop and parameter changes are thread-safe requests applied between slices.

On ``cpu``, while the domain's compiled engine is not ready in this process (its first use
compiles it: seconds to minutes), the run starts on the NumPy reference engine and the compile
service (:mod:`app.sims.common.warmup`) prepares the compiled one in the background; between
two slices, once it is ready, the run is handed over through ``state()`` / ``restore()``
(the same state and Philox streams: the engines' agreement is the results'). Frames meanwhile
say "preparing the compiled engine: stage x of y, n s" in their status line.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import logging
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from app.compute.device import backend_context
from app.compute.jit import parallel_guard
from app.sims.common.checkpoint import check_target, read_checkpoint, write_checkpoint
from app.sims.common.config import ConfigError, dump_yaml, to_plain
from app.sims.common.output import RunFolder
from app.sims.common.progress import SetupStopped, stoppable
from app.sims.common.provenance import input_files
from app.sims.common.simulation import Domain, Frame, Simulation
from app.sims.common.steering import Steerable, SteeringEvent, by_key, check_change
from app.sims.common.warmup import has_compiled_engine, key_of, service

log = logging.getLogger(__name__)


class Session:
    """Drive one simulation in bounded slices with pause / resume / stop / checkpoint."""

    def __init__(self, domain: Domain, cfg: Any, backend: str, device_index: int = 0,
                 on_frame: Callable[[Frame], None] | None = None,
                 checkpoint: Mapping[str, Any] | None = None, handover: bool = True):
        self.domain, self.cfg, self.backend = domain, cfg, backend
        # start on the reference engine while the compiled one is prepared (see the module doc)
        self.handover = handover
        self.device_index = device_index
        self.on_frame = on_frame or (lambda frame: None)
        self._checkpoint = checkpoint
        self._resume = threading.Event()
        self._resume.set()
        self._holding = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._changes: list[tuple[str, Any, dict[str, Any] | None]] = []   # checked, not yet applied
        self._replay: list[SteeringEvent] = []        # the config's steering still to apply
        self._steerables: dict[str, Steerable] | None = None
        self.events: tuple[SteeringEvent, ...] = ()   # the steering applied so far
        self.refused: list[str] = []       # live changes the simulation refused when applying them
        self._actions: list[Callable[[Simulation], None]] = []
        self._pause_when: Callable[[Frame], bool] | None = None
        self.last_frame: Frame | None = None
        self.arrays: dict[str, np.ndarray] = {}
        self.summary: dict[str, Any] = {}
        self.stopped = False
        self.started_at = time.time()     # wall-clock start of ``run`` (for the RO-Crate)
        self.engine = backend                 # the backend the run is on now
        self.handed_over: dict[str, float] | None = None
        self._handing = False
        self._key = domain.name               # what the compile service prepares for this run

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

    @property
    def steerables(self) -> dict[str, Steerable]:
        """What this run takes while it runs (its domain's ``steerables(cfg)``), by key."""
        if self._steerables is None:
            self._steerables = by_key(steerables_of(self.cfg)) if self.cfg is not None else {}
        return self._steerables

    def steer(self, key: str, value: Any, region: Mapping[str, Any] | None = None) -> None:
        """A change from any thread: checked now (ConfigError naming the key or the value),
        applied at the next step boundary and recorded in :attr:`events` with its ``at``."""
        value, checked = check_change(self.steerables, key, value, region)
        with self._lock:
            self._changes.append((key, value, checked))

    def request_update(self, changes: Mapping[str, Any]) -> None:
        """Several :meth:`steer` changes at once, ``{key: value}``: all checked before any is queued."""
        checked = [(key, *check_change(self.steerables, key, value)) for key, value in changes.items()]
        with self._lock:
            self._changes.extend(checked)

    def request(self, action: Callable[[Simulation], None]) -> None:
        """Run ``action(sim)`` in the owning thread between slices (e.g. take a checkpoint)."""
        with self._lock:
            self._actions.append(action)

    # ---- the owning thread --------------------------------------------------------------
    @property
    def preparing(self) -> str:
        """'preparing the compiled engine: stage x of y, n s' while the run waits for it, else ''."""
        if not self._handing:
            return ""
        prep = service().status(self._key)
        return prep.describe() if prep.state == "preparing" else ""

    def _start_backend(self) -> str:
        """The backend the run starts on: the reference engine while the compiled one is prepared."""
        name = self.domain.name
        if self.handover and self.backend == "cpu" and has_compiled_engine(name):
            cfg = self.cfg if self._checkpoint is None else None
            self._key = key_of(name, cfg)
            service().hold(self._key)         # its in-process stage waits for the first frame
            prep = service().request(name, cfg)
            if prep.state == "preparing":
                self._handing = True
                log.info("%s: starting on the NumPy reference engine while the compiled engine is "
                         "prepared", name)
                return "cpu-reference"
            service().release(self._key)
        return self.backend

    def _guard(self, engine: str) -> contextlib.AbstractContextManager:
        """:func:`parallel_guard` for an engine that may run numba code; the NumPy reference
        engine needs none (and so does not import numba before the first frame)."""
        return contextlib.nullcontext() if engine == "cpu-reference" else parallel_guard()

    def _build(self, module: Any, backend: str) -> Simulation:
        with self._guard(backend):
            if self._checkpoint is not None:
                sim = module.Simulation.restore(self._checkpoint, backend)
            else:
                sim = module.Simulation.from_config(self.cfg, backend)
        if self.cfg is None:
            self._steerables = by_key(steerables_of(sim.cfg))
        # a resumed run has applied the first events of its config's list already
        self._replay = list(getattr(sim.cfg, "steering", ()))[len(sim.steered):]
        self.events = sim.steered
        return sim

    def _maybe_hand_over(self, module: Any, sim: Simulation, started: float) -> Simulation:
        """The run on the compiled engine once it is ready (between slices), else ``sim``."""
        prep = service().status(self._key)
        if prep.state == "failed":
            self._handing = False
            log.warning("%s: the run stays on the NumPy reference engine (%s)", self.domain.name, prep.message)
            return sim
        if prep.state != "ready" or not sim.can_hand_over:
            return sim
        self._handing = False
        try:
            with parallel_guard():
                new = module.Simulation.restore(sim.state(), self.backend)
        except Exception as exc:          # the run goes on where it was
            log.warning("%s: no hand-over to the compiled engine: %s", self.domain.name, exc)
            return sim
        progress = self.last_frame.progress if self.last_frame is not None else 0.0
        self.handed_over = {"progress": float(progress), "after_seconds": time.perf_counter() - started,
                            "engine_ready_seconds": prep.seconds}
        log.info("%s: handed over to the compiled engine at %.1f %% of the run (%.1f s in)",
                 self.domain.name, 100 * progress, self.handed_over["after_seconds"])
        sim.close()
        self.engine = self.backend
        return new

    def run(self) -> Frame | None:
        """Build and advance the simulation until it finishes or is stopped; return the last frame."""
        module = self.domain.load()
        self.started_at = time.time()
        started = time.perf_counter()
        with backend_context(self.backend, self.device_index), stoppable(self._stop):
            if self.cfg is not None:
                preflight(self.domain, self.cfg, self.backend)
            self.engine = self._start_backend()
            held = self._key if self._handing else None     # held back by _start_backend
            try:
                sim = self._build(module, self.engine)
            except SetupStopped:          # Stop during a long setup: nothing ran, nothing to keep
                if held is not None:
                    service().release(held)
                self.stopped = True
                return None
            except BaseException:
                if held is not None:
                    service().release(held)
                raise
            if self.engine == "cpu" and self.backend == "cpu" and has_compiled_engine(self.domain.name):
                service().mark_ready(key_of(self.domain.name, self.cfg if self._checkpoint is None else None),
                                     getattr(getattr(sim, "engine", None), "compile_seconds", 0.0))
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
                    if self._handing:
                        sim = self._maybe_hand_over(module, sim, started)
                    target = self._replay[0] if self._replay else None
                    try:
                        with self._guard(self.engine):
                            frame = (sim.advance() if target is None
                                     else sim.advance(until=target.at, within=target.within))
                    except SetupStopped:  # Stop inside a long slice: the state before it is kept
                        self.stopped = True
                        break
                    # changes made during the slice take effect at its end and show in its frame
                    if not frame.done and self._apply_steering(sim):
                        frame = sim.frame() or frame
                    if self.events:
                        frame = replace(frame, events=self.events)
                    preparing = self.preparing          # a finished run waits for nothing
                    if preparing and not frame.done:
                        frame = replace(frame, status=f"{frame.status} · {preparing}" if frame.status else preparing)
                    self.last_frame = frame
                    self.on_frame(frame)
                    if held is not None:
                        service().release(held)
                        held = None
                    with self._lock:
                        condition = self._pause_when
                    if condition is not None and not frame.done and condition(frame):
                        self.pause()
                self._apply_requests(sim)
                self.arrays, self.summary = sim.results()
                if self._replay and not self.stopped:
                    log.warning("%s: %d steering event(s) of the config were past the run's end "
                                "(first at step %d, the run ended at %d)", self.domain.name,
                                len(self._replay), self._replay[0].at, sim.step)
                self._note_engines()
            except Exception as exc:          # keep what the run had, then report the failure
                try:
                    self.arrays, summary = sim.results()
                    self.summary = {**summary, "finished": False,
                                    "stopped": {"reason": f"{type(exc).__name__}: {exc}"}}
                except Exception:             # results of a broken state are not always there
                    pass
                raise
            finally:
                if held is not None:
                    service().release(held)
                sim.close()
        return self.last_frame

    def _note_engines(self) -> None:
        """Which engines the run used, in its summary (a hand-over or a run left on the reference)."""
        if self.backend != self.engine or self.handed_over is not None:
            # 'backend' stays the one asked for; 'engines' says which engines ran it
            self.summary = {**self.summary, "backend": self.backend, "engines": {
                "started_on": "cpu-reference", "finished_on": self.engine,
                **({"handed_over": self.handed_over} if self.handed_over else {})}}

    def _apply_requests(self, sim: Simulation) -> None:
        with self._lock:
            actions, self._actions = self._actions, []
        self._apply_steering(sim)
        for action in actions:
            action(sim)

    def _apply_steering(self, sim: Simulation) -> bool:
        """The config's events due at this step, then the live changes, if the run is at a step
        boundary (else they wait for it); whether any was applied."""
        if not sim.at_boundary:
            return False
        here = (sim.step, sim.within) if self._replay else (0, 0)    # a domain may have no step counter
        while self._replay and (self._replay[0].at, self._replay[0].within) <= here:
            event = self._replay.pop(0)
            if (event.at, event.within) < here:
                raise SteeringError(f"the steering event at step {event.at}"
                                    f"{f' (+{event.within})' if event.within else ''} ({event.key}) was "
                                    f"not applied: the run had passed it (step {sim.step}"
                                    f"{f' (+{sim.within})' if sim.within else ''})")
            sim.steer(event.key, event.value, event.region)
        with self._lock:
            changes, self._changes = self._changes, []
        for key, value, region in changes:
            try:
                sim.steer(key, value, region)
            except ConfigError as exc:   # a check across settings the key alone could not make
                log.warning("%s: the change %s = %r was refused: %s", self.domain.name, key, value, exc)
                self.refused.append(f"{key} = {value!r}: {exc.message}")
        if sim.steered == self.events:
            return False
        for e in sim.steered[len(self.events):]:
            log.info("%s: at step %d, %s = %r (was %r)", self.domain.name, e.at, e.key, e.value, e.old)
        self.events = sim.steered
        return True

    def steered_config(self) -> Any:
        """The run's config with the steering applied so far as its ``steering:`` list: the
        ``config.yaml`` that replays this run."""
        if self.cfg is None or not hasattr(self.cfg, "steering"):
            return self.cfg
        return replace(self.cfg, steering=self.events)


class SteeringError(RuntimeError):
    """A config's steering event the run could not apply at its step."""


def steerables_of(cfg: Any) -> tuple[Steerable, ...]:
    """The keys the domain of ``cfg`` takes while running (its config module's ``steerables``)."""
    config = importlib.import_module(type(cfg).__module__)
    declared = getattr(config, "steerables", None)
    return () if declared is None else tuple(declared(cfg))


def memory_estimate(cfg: Any, backend: str) -> Any:
    """The run's :class:`app.sims.common.memory.MemoryEstimate` (``estimate_memory`` of the
    module that defines the config class), or None where the domain has none."""
    estimate = getattr(importlib.import_module(type(cfg).__module__), "estimate_memory", None)
    return None if estimate is None else estimate(cfg, backend)


def preflight(domain: Domain, cfg: Any, backend: str) -> None:
    """Checks before anything is allocated: the memory the run needs (``estimate_memory`` of
    the module that defines the config class) against what is free, then that module's
    ``check_before_run`` (integer ranges, checkpoint files); a domain may define neither.
    Raises ConfigError."""
    from app.sims.common.memory import check_fits

    config = importlib.import_module(type(cfg).__module__)
    need = memory_estimate(cfg, backend)
    if need is not None:
        check_fits(need, backend, f"this {domain.name} run")
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
        write_run_outputs(out, session.steered_config(), session.arrays, session.summary, more, session.started_at)

    try:
        session.run()
    except Exception:
        if out_dir is not None and session.summary:
            write(out_dir)
            log.warning("the run failed; what it had is in %s", out_dir)
        raise
    log.info("run finished in %.2f s", time.perf_counter() - start)
    if out_dir is not None and (session.summary or not session.stopped):
        write(out_dir)
    return session
