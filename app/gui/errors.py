"""Error reporting for the GUI: log the problem and show it without blocking or crashing.

Every error path goes through :func:`report_error`, which logs and then calls the module
attribute :func:`show_error` (tests replace it with ``monkeypatch`` to record messages).
"""

from __future__ import annotations

import logging
import sys
import traceback
from types import TracebackType

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox, QWidget

log = logging.getLogger("app.gui")


def show_error(parent: QWidget | None, title: str, text: str, detail: str = "") -> None:
    """Show a non-blocking error box (``open()``, not ``exec()``) with optional details."""
    box = QMessageBox(QMessageBox.Icon.Critical, title, text, QMessageBox.StandardButton.Ok, parent)
    if detail:
        box.setDetailedText(detail)
    box.setObjectName("errorBox")
    box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose, True)
    box.open()


def describe(exc: BaseException, bug: bool = False) -> tuple[str, str]:
    """(one-line message, detail) for an exception; detail holds nvcc logs or, for a bug (an
    exception the app does not raise on purpose, or any uncaught one: ``bug``), a traceback."""
    from app.compute.kernels import KernelCompileError
    from app.sims.common.config import ConfigError

    if isinstance(exc, ConfigError):
        return str(exc), ""
    if isinstance(exc, KernelCompileError):
        return str(exc).splitlines()[0] if str(exc) else "kernel compile error", getattr(exc, "log", "")
    detail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    if bug:
        return f"Something went wrong inside BioGPU Studio ({exc or type(exc).__name__}).", detail
    if isinstance(exc, OSError) and exc.strerror:
        where = exc.filename if exc.filename is not None else ""
        return (f"{where}: {exc.strerror}" if where else exc.strerror), ""
    if isinstance(exc, EXPECTED) and str(exc):
        return str(exc), ""                  # a message for the user, not a bug: no traceback
    # a bug: a plain sentence, the traceback collapsed under "Show Details…" (and in the log)
    return f"Something went wrong inside BioGPU Studio ({exc or type(exc).__name__}).", detail


# What the app raises on purpose, with a message written for users (a bug raises anything else).
EXPECTED = (RuntimeError, ValueError, OSError, MemoryError)


def report_error(parent: QWidget | None, title: str, text: str, detail: str = "") -> None:
    """Log ``text`` (and ``detail``) and show it in an error box."""
    log.error("%s: %s", title, text)
    if detail:
        log.error("%s", detail.rstrip())
    # Looked up at call time so tests can monkeypatch ``errors.show_error``.
    sys.modules[__name__].show_error(parent, title, text, detail)


def report_exception(parent: QWidget | None, title: str, exc: BaseException, bug: bool = False) -> None:
    """:func:`report_error` for an exception."""
    text, detail = describe(exc, bug)
    if not detail:
        log.debug("%s", "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).rstrip())
    report_error(parent, title, text, detail)


def install_excepthook(parent_getter=lambda: None) -> None:
    """Route uncaught exceptions (e.g. in Qt slots) to the log and an error box, not an abort."""

    def hook(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
        if issubclass(kind, KeyboardInterrupt):
            sys.__excepthook__(kind, exc, tb)
            return
        try:
            report_exception(parent_getter(), "Unexpected error", exc.with_traceback(tb), bug=True)
        except Exception:  # never let the hook itself take the app down
            sys.__excepthook__(kind, exc, tb)

    sys.excepthook = hook
