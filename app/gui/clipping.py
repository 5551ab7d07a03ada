"""Find widgets drawn narrower than they ask for (clipped text, squeezed combo arrows)."""

from __future__ import annotations

from PySide6.QtWidgets import QAbstractButton, QComboBox, QLabel, QWidget

CHECKED = (QLabel, QAbstractButton, QComboBox)


def clipped_widgets(root: QWidget, tolerance: int = 1) -> list[str]:
    """Visible labels, buttons and combo boxes under ``root`` narrower than their size hint.

    Word-wrapped labels are left out (they wrap instead of clipping), and so are empty ones.
    Returns one line per widget: its class, text and widths.
    """
    found = []
    for widget in root.findChildren(QWidget):
        if not isinstance(widget, CHECKED) or not widget.isVisible():
            continue
        if isinstance(widget, QLabel) and (widget.wordWrap() or not widget.text()):
            continue
        hint = widget.sizeHint().width()
        if widget.width() + tolerance < hint:
            text = widget.currentText() if isinstance(widget, QComboBox) else getattr(widget, "text", lambda: "")()
            found.append(f"{type(widget).__name__} {text[:40]!r} ({widget.objectName() or 'unnamed'}): "
                         f"{widget.width()} px < size hint {hint} px")
    return found
