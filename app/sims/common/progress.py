"""Progress of setup steps that can take more than a second (placing cells, scoring a large
first generation): a log line at most once a second, which the CLI prints and the GUI's log
dock shows, so that a long setup is never silent. Each progress call is also where Stop takes
effect inside such a step (:func:`stoppable`): a run stops within a second or so even while
its setup or one slice lasts minutes."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

log = logging.getLogger("app.setup")
_local = threading.local()


class SetupStopped(Exception):
    """Stop was asked while a long step was under way; raised from its next progress call."""


@contextmanager
def stoppable(event: threading.Event) -> Iterator[None]:
    """In this thread, while inside: progress calls raise :class:`SetupStopped` once ``event``
    is set (the Session's stop request)."""
    previous = getattr(_local, "stop", None)
    _local.stop = event
    try:
        yield
    finally:
        _local.stop = previous


def check_stop() -> None:
    """Raise :class:`SetupStopped` when this thread's run was asked to stop."""
    event = getattr(_local, "stop", None)
    if event is not None and event.is_set():
        raise SetupStopped("stopped during a long step")


class SetupProgress:
    """Call with the amount done so far; logs ``what: 42 % (n of N)`` at most every ``every`` s
    (the first line only once ``every`` has passed: short setups stay quiet)."""

    def __init__(self, what: str, total: int, every: float = 1.0):
        self.what, self.total, self.every = what, max(int(total), 1), every
        self._start = self._last = time.perf_counter()

    def __call__(self, done: int) -> None:
        check_stop()
        now = time.perf_counter()
        if now - self._last >= self.every:
            self._last = now
            log.info("%s: %.0f %% (%s of %s, %.0f s)", self.what, 100.0 * done / self.total,
                     f"{done:,}", f"{self.total:,}", now - self._start)
