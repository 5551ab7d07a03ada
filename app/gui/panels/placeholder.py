"""The page of a domain whose panel is not built yet: what it will do, and no controls."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from app.sims.common.simulation import Domain


class PlaceholderPage(QWidget):
    """Read-only description of an unbuilt panel."""

    def __init__(self, domain: Domain, parent: QWidget | None = None):
        super().__init__(parent)
        self.domain = domain
        title = QLabel(f"<h2>{domain.label}</h2>")
        headless = (f"<p>The simulation itself runs from the command line: <code>python -m app run "
                    f"resources/presets/{domain.name}/…</code> and <code>python -m app bench "
                    f"{domain.name}</code>.</p>") if domain.available else ""
        body = QLabel(f"<p>{domain.description}</p>{headless}<p><i>This panel is not built yet.</i></p>")
        body.setWordWrap(True)
        body.setObjectName("description")
        body.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(40, 40, 40, 40)
        layout.addWidget(title)
        layout.addWidget(body)
        layout.addStretch(1)
