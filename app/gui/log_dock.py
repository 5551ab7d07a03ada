"""The log dock: Python ``logging`` records shown in a read-only text view.

Records may come from any thread; :class:`QtLogHandler` marshals them to the GUI thread
through a queued signal.
"""

from __future__ import annotations

import logging

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import QDockWidget, QPlainTextEdit, QWidget

MAX_LINES = 5000


class _Emitter(QObject):
    record = Signal(str)


class QtLogHandler(logging.Handler):
    """A logging handler that forwards formatted records to a Qt signal."""

    def __init__(self, level: int = logging.INFO):
        super().__init__(level)
        self.emitter = _Emitter()
        self.setFormatter(logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s",
                                            "%H:%M:%S"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.emitter.record.emit(self.format(record))
        except RuntimeError:   # the Qt side is gone (window closed)
            pass
        except Exception:
            self.handleError(record)


class LogDock(QDockWidget):
    """A dock with the application log; attaches a handler to the root logger while alive."""

    def __init__(self, parent: QWidget | None = None, level: int = logging.INFO):
        super().__init__("Log", parent)
        self.setObjectName("logDock")
        self.view = QPlainTextEdit(readOnly=True)
        self.view.setMaximumBlockCount(MAX_LINES)
        self.view.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.setWidget(self.view)
        self.handler = QtLogHandler(level)
        self.handler.emitter.record.connect(self.append, Qt.ConnectionType.QueuedConnection)
        root = logging.getLogger()
        if root.level > level or root.level == logging.NOTSET:
            root.setLevel(level)
        root.addHandler(self.handler)

    def append(self, line: str) -> None:
        self.view.appendPlainText(line)

    def text(self) -> str:
        return self.view.toPlainText()

    def detach(self) -> None:
        """Stop receiving records (call before the window goes away)."""
        logging.getLogger().removeHandler(self.handler)
