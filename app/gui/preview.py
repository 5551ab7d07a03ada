"""The model at rest: a loaded config's initial state, built off the GUI thread, so the
tissue, the culture or the sheet is drawn before the first Run (a lesson asks students to
click or drag on something they must see)."""

from __future__ import annotations

import logging
from typing import Any

from PySide6.QtCore import QThread, Signal

from app.sims.common.simulation import Domain

log = logging.getLogger(__name__)


class RestPreview(QThread):
    """Build ``cfg`` on the NumPy reference engine (no compilation, no GPU), take its first
    frame and close it.

    Signals
    -------
    ready(frame)
        The initial frame (emitted from the thread; delivered queued to the GUI thread).
    """

    ready = Signal(object)

    def __init__(self, domain: Domain, cfg: Any, parent=None):
        super().__init__(parent)
        self.domain, self.cfg = domain, cfg

    def run(self) -> None:
        try:
            sim = self.domain.load().Simulation.from_config(self.cfg, "cpu-reference")
            try:
                frame = sim.frame()
            finally:
                sim.close()
        except Exception as exc:  # noqa: BLE001  (a preview never stops a panel: the run reports)
            log.debug("%s: no picture at rest: %s", self.domain.name, exc)
            return
        self.ready.emit(frame)
