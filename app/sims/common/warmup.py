"""One compile service per process: the compiled CPU engines are prepared here, one at a time.

A compiled engine (numba) compiles on its first use, or loads its machine code from numba's
on-disk cache. The service does that in the background, in two stages per domain:

1. *compile*: a fresh interpreter (``python -m app.sims.common.warmup DOMAIN [CONFIG]``) calls
   the compiled engine's ``warm_up()`` and, given the run's config, builds that run on ``cpu``
   and advances it once (a cell model, a reaction network or a channel model compiles code of
   its own), which compiles what the cache lacks and writes it there. The helper lowers its
   own priority (nice 10): on two cores it then never delays the run's first frames.
   A cache that crashes or fails to load (a run killed mid-write left it damaged) is found
   here, in the helper process, never in the application: the helper is run once more with
   numba's cache reads turned off, which rewrites every entry it needs;
2. *load*: this process calls the same ``warm_up()``, now a load from the checked cache, once
   no run holds it back (:meth:`CompileService.hold`: a run waiting for its first frame).

While a domain is not ready, a :class:`~app.sims.common.session.Session` on ``cpu`` runs on
the NumPy reference engine and hands the run over (``state()`` / ``restore()``) once it is.
Every in-process compile or load runs under :data:`COMPILE_LOCK`, so two threads never compile
at once; a frozen bundle (no helper interpreter, no on-disk cache) compiles in the service's
thread. The compiled engine's module (its manifest's ``cpu`` engine) defines ``warm_up()``.
"""

from __future__ import annotations

import atexit
import logging
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, replace
from typing import Any, Callable

from app.compute.jit import parallel_guard
from app.sims.common.registry import DOMAINS, resolve

log = logging.getLogger(__name__)

COMPILE_LOCK = threading.RLock()       # held by every in-process compile or cache load
STAGES = ("compiling", "loading")      # the stages a domain goes through (see the module doc)
REBUILD_FLAG = "--rebuild"


def key_of(domain: str, cfg: Any = None) -> str:
    """What the service prepares: a domain's engine, or that of one model class of it
    ('ssa/3f2a...': the config's own generated code too)."""
    if cfg is None:
        return domain
    from app.sims.common.estimate import model_class

    return f"{domain}/{model_class(domain, cfg)}"


@dataclass(frozen=True)
class Preparation:
    """Where the preparation of one domain's compiled engine stands."""

    domain: str
    state: str = "cold"                # cold, preparing, ready, failed
    stage: int = 0                     # 1-based index into STAGES while preparing
    started: float = 0.0               # time.perf_counter() when it began
    seconds: float = 0.0               # how long it took, once ready or failed
    message: str = ""                  # why it failed
    rebuilt: bool = False              # a damaged cache was rebuilt

    @property
    def ready(self) -> bool:
        return self.state == "ready"

    def describe(self) -> str:
        """One line for a status bar: 'preparing the compiled engine: stage 1 of 2 (compiling), 12 s'."""
        if self.state == "preparing":
            elapsed = time.perf_counter() - self.started
            what = STAGES[self.stage - 1] if self.stage else STAGES[0]
            return (f"preparing the compiled engine: stage {self.stage} of {len(STAGES)} ({what}), "
                    f"{elapsed:.0f} s")
        if self.state == "ready":
            return f"compiled engine ready in {self.seconds:.1f} s"
        if self.state == "failed":
            return f"compiled engine unavailable: {self.message}"
        return "compiled engine not prepared yet"


def has_compiled_engine(domain: str) -> bool:
    """True where ``domain`` has a compiled CPU engine apart from its NumPy reference."""
    engines = DOMAINS[domain].engines
    return "cpu" in engines and "cpu-reference" in engines and engines["cpu"] != engines["cpu-reference"]


def warm_up_path(domain: str) -> str:
    """'module:warm_up' of the module that defines ``domain``'s compiled CPU engine."""
    return DOMAINS[domain].engines["cpu"].partition(":")[0] + ":warm_up"


def warm_in_process(domain: str) -> float:
    """Compile or load ``domain``'s compiled engine in this process (under the compile lock)."""
    with COMPILE_LOCK, parallel_guard():
        return float(resolve(warm_up_path(domain))())


class CompileService:
    """Prepares compiled engines in one background thread; ask with :meth:`request`."""

    def __init__(self, helper: bool | None = None) -> None:
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._state: dict[str, Preparation] = {}
        self._queue: list[str] = []
        self._configs: dict[str, Any] = {}
        self._thread: threading.Thread | None = None
        self._process: subprocess.Popen | None = None
        self._closed = False
        self._held: dict[str, int] = {}       # key -> runs waiting for their first frame
        self.helper = (not getattr(sys, "frozen", False)) if helper is None else helper
        self.listeners: list[Callable[[Preparation], None]] = []

    # ---- any thread ---------------------------------------------------------------------
    def status(self, domain: str) -> Preparation:
        with self._lock:
            return self._state.get(domain, Preparation(domain))

    def request(self, domain: str, cfg: Any = None) -> Preparation:
        """Start preparing ``domain``'s compiled engine (with ``cfg``: for that config's model
        class, see :func:`key_of`); no-op when it is ready, queued or failed. Its status."""
        key = key_of(domain, cfg)
        with self._lock:
            prep = self._state.get(key, Preparation(key))
            if prep.state == "cold" and not self._closed:
                prep = Preparation(key, "preparing", 1, time.perf_counter())
                self._state[key] = prep
                self._configs[key] = cfg
                self._queue.append(key)
                if self._thread is None or not self._thread.is_alive():
                    self._thread = threading.Thread(target=self._serve, name="compile-service",
                                                    daemon=True)
                    self._thread.start()
                self._wake.notify_all()
            return prep

    def hold(self, domain: str) -> None:
        """Keep ``domain``'s in-process stage (loading: numba's import, the cache) back until
        :meth:`release`: a run's first frame on the reference engine must not share the GIL
        with it."""
        with self._lock:
            self._held[domain] = self._held.get(domain, 0) + 1

    def release(self, domain: str) -> None:
        """Undo one :meth:`hold` (the run showed its first frame, stopped or failed)."""
        with self._lock:
            left = self._held.get(domain, 0) - 1
            if left > 0:
                self._held[domain] = left
            else:
                self._held.pop(domain, None)
            self._wake.notify_all()

    def wait(self, domain: str, timeout: float | None = None) -> Preparation:
        """Block until ``domain`` is ready or failed (or ``timeout`` passed); its status."""
        end = None if timeout is None else time.perf_counter() + timeout
        with self._lock:
            while self._state.get(domain, Preparation(domain)).state in ("cold", "preparing"):
                left = None if end is None else end - time.perf_counter()
                if (left is not None and left <= 0) or self._closed:
                    break
                self._wake.wait(left if left is not None else 1.0)
            return self._state.get(domain, Preparation(domain))

    def mark_ready(self, domain: str, seconds: float) -> None:
        """Record a domain prepared elsewhere (an engine that compiled in its own thread)."""
        with self._lock:
            if self._state.get(domain, Preparation(domain)).state != "ready":
                self._state[domain] = Preparation(domain, "ready", seconds=seconds)
                self._wake.notify_all()

    def shutdown(self, timeout: float = 10.0) -> None:
        """Drop queued work, end a running helper process and join the thread (app exit)."""
        with self._lock:
            self._closed = True
            self._queue.clear()
            process = self._process
            self._wake.notify_all()
        if process is not None and process.poll() is None:
            process.kill()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    # ---- the service thread -------------------------------------------------------------
    def _set(self, prep: Preparation) -> None:
        with self._lock:
            self._state[prep.domain] = prep
            self._wake.notify_all()
        for listener in list(self.listeners):
            listener(prep)

    def _serve(self) -> None:
        while True:
            with self._lock:
                while not self._queue and not self._closed:
                    self._wake.wait()
                if self._closed:
                    return
                domain = self._queue.pop(0)
            prep = self.status(domain)
            try:
                rebuilt = False
                if self.helper:
                    rebuilt = self._compile_in_helper(domain)
                with self._lock:
                    while self._held.get(domain) and not self._closed:
                        self._wake.wait()
                if self._closed:
                    return
                self._set(replace(prep, stage=2, rebuilt=rebuilt))
                warm_in_process(domain.partition("/")[0])
                self._set(replace(prep, state="ready", stage=2, rebuilt=rebuilt,
                                  seconds=time.perf_counter() - prep.started))
                log.info("%s: compiled engine ready in %.1f s%s", domain,
                         time.perf_counter() - prep.started, " (damaged cache rebuilt)" if rebuilt else "")
            except Exception as exc:      # the run goes on on the reference engine
                log.warning("%s: the compiled engine could not be prepared: %s", domain, exc)
                self._set(replace(prep, state="failed", message=str(exc),
                                  seconds=time.perf_counter() - prep.started))

    def _compile_in_helper(self, domain: str) -> bool:
        """Stage 1 in a fresh interpreter; once more with cache reads off if it fails. True
        when the cache had to be rebuilt."""
        first_error = ""
        for rebuild in (False, True):
            code, output = self._helper(domain, rebuild)
            if self._closed:
                return rebuild
            if code == 0:
                if rebuild:
                    log.warning("%s: numba's cache was damaged (%s); rebuilt", domain, first_error)
                return rebuild
            how = f"died of signal {-code}" if code < 0 else f"exited {code}"
            last = output.strip().splitlines()[-1] if output.strip() else "no output"
            first_error = first_error or f"the helper {how}: {last}"
        raise RuntimeError(first_error)

    def _helper(self, key: str, rebuild: bool) -> tuple[int, str]:
        """Run the helper for ``key`` (the config's YAML on its stdin); (exit code, output)."""
        from app.sims.common.config import dump_yaml

        cfg = self._configs.get(key)
        domain = key.partition("/")[0]
        args = [sys.executable, "-m", "app.sims.common.warmup", domain] + ([REBUILD_FLAG] if rebuild else [])
        text = "" if cfg is None else dump_yaml(cfg)
        with self._lock:
            if self._closed:
                return 1, "closed"
            self._process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                             stdin=subprocess.PIPE, text=True, env=dict(os.environ))
        output, _ = self._process.communicate(text)
        with self._lock:
            code, self._process = self._process.returncode, None
        return code, output


_service: CompileService | None = None
_service_lock = threading.Lock()


def service() -> CompileService:
    """The process's compile service (made on first use; shut down at exit)."""
    global _service
    with _service_lock:
        if _service is None:
            _service = CompileService()
            atexit.register(_service.shutdown)
        return _service


def _skip_cache_reads() -> None:
    """numba's cache: read nothing (every function compiles), write as usual (the rebuild)."""
    from numba.core import caching

    caching.Cache.load_overload = lambda self, sig, target_context: None  # type: ignore[method-assign]
    caching.IndexDataCacheFile._load_index = lambda self: {}  # type: ignore[method-assign]


def _warm_config(domain: str, text: str) -> None:
    """Build the run of config ``text`` on ``cpu`` and advance it once: what its own model compiles."""
    from app.compute.device import backend_context
    from app.sims.common.config import parse_yaml

    module = DOMAINS[domain].load()
    cfg = module.load_config(parse_yaml(text, "<run config>"))
    with backend_context("cpu"):
        sim = module.Simulation.from_config(cfg, "cpu")
        try:
            sim.advance()
        finally:
            sim.close()


def main(argv: list[str], config_text: str = "") -> int:
    """The helper: compile (or load) ``argv[0]``'s compiled engine and the run config on stdin
    (when there is one); ``--rebuild``: ignore the cache."""
    if REBUILD_FLAG in argv:
        _skip_cache_reads()
    start = time.perf_counter()
    resolve(warm_up_path(argv[0]))()
    if config_text.strip():
        _warm_config(argv[0], config_text)
    print(f"{argv[0]}: warm in {time.perf_counter() - start:.2f} s", flush=True)
    return 0


if __name__ == "__main__":
    if hasattr(os, "nice"):
        os.nice(10)        # below the run and the GUI: on two cores the compile must not delay their frames
    sys.exit(main(sys.argv[1:], "" if sys.stdin is None or sys.stdin.isatty() else sys.stdin.read()))
