"""A one-line label that elides its text with "…" where it has less room than the text needs
(the status bar at 1280 px: a finished epidermis run's status ran off the window's edge)."""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QPainter
from PySide6.QtWidgets import QLabel


class ElidedLabel(QLabel):
    """A QLabel for plain text that shows as much of it as fits, ending in "…", with the whole
    text as its tooltip while elided. It asks for its text's width (``sizeHint``) and settles
    for :attr:`least` pixels (``minimumSizeHint``)."""

    elides = True          # app.gui.clipping: elided text is not clipped text

    def __init__(self, text: str = "", least: int = 120, parent=None):
        super().__init__(text, parent)
        self.least = least
        self.setTextFormat(Qt.TextFormat.PlainText)

    def minimumSizeHint(self) -> QSize:
        hint = super().minimumSizeHint()
        return QSize(min(hint.width(), self.least), hint.height())

    def shown_text(self) -> str:
        """The text as drawn now (elided where it does not fit)."""
        room = self.contentsRect().width()
        return self.fontMetrics().elidedText(self.text(), Qt.TextElideMode.ElideRight, room)

    def setText(self, text: str) -> None:
        super().setText(text)
        self._update_tooltip()

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._update_tooltip()

    def _update_tooltip(self) -> None:
        self.setToolTip(self.text() if self.shown_text() != self.text() else "")

    def paintEvent(self, event) -> None:
        painter = QPainter(self)
        self.style().drawItemText(painter, self.contentsRect(), int(self.alignment()), self.palette(),
                                  self.isEnabled(), self.shown_text(), self.foregroundRole())


def short_path(path, limit: int = 36) -> str:
    """A file's name for a label or a list, at most ``limit`` characters ("…" in the middle):
    a long path or name must not widen the controls (the whole path goes in a tooltip)."""
    from pathlib import Path

    name = Path(str(path)).name
    if len(name) <= limit:
        return name
    keep = limit - 1
    return name[:(keep + 1) // 2] + "…" + name[len(name) - keep // 2:]
