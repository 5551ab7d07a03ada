"""Progress of setup steps that can take more than a second (placing cells, scoring a large
first generation): a log line at most once a second, which the CLI prints and the GUI's log
dock shows, so that a long setup is never silent."""

from __future__ import annotations

import logging
import time

log = logging.getLogger("app.setup")


class SetupProgress:
    """Call with the amount done so far; logs ``what: 42 % (n of N)`` at most every ``every`` s
    (the first line only once ``every`` has passed: short setups stay quiet)."""

    def __init__(self, what: str, total: int, every: float = 1.0):
        self.what, self.total, self.every = what, max(int(total), 1), every
        self._start = self._last = time.perf_counter()

    def __call__(self, done: int) -> None:
        now = time.perf_counter()
        if now - self._last >= self.every:
            self._last = now
            log.info("%s: %.0f %% (%s of %s, %.0f s)", self.what, 100.0 * done / self.total,
                     f"{done:,}", f"{self.total:,}", now - self._start)
