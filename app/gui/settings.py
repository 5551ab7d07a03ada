"""What the workbench remembers between starts, through ``QSettings`` (INI format).

One place makes the settings object, so tests isolate it with
``QSettings.setPath(QSettings.IniFormat, QSettings.UserScope, tmp_path)`` (or
``BIOGPU_SETTINGS_DIR``) and never touch the user's file.
"""

from __future__ import annotations

import os

from PySide6.QtCore import QEvent, QObject, QSettings, Qt, QTimer
from PySide6.QtWidgets import QSplitter

ORGANIZATION = "BioGPU"
APPLICATION = "BioGPU Studio"


def settings() -> QSettings:
    """The application's settings (an INI file in the user's config folder)."""
    folder = os.environ.get("BIOGPU_SETTINGS_DIR")
    if folder:
        return QSettings(os.path.join(folder, "biogpu-studio.ini"), QSettings.Format.IniFormat)
    return QSettings(QSettings.Format.IniFormat, QSettings.Scope.UserScope, ORGANIZATION, APPLICATION)


def measured_rates() -> dict[str, float]:
    """{'domain.engine.model class': work per wall second} of the last finished runs here
    (:func:`app.sims.common.estimate.rate_key`)."""
    store = settings()
    store.beginGroup("rates")
    rates = {}
    for key in store.childKeys():
        if key.count(".") != 2:          # rates of an older version: no model class
            continue
        try:
            rates[key] = float(store.value(key))
        except (TypeError, ValueError):
            continue
    store.endGroup()
    return rates


def record_rate(key: str, rate: float) -> None:
    """Remember a finished run's work per wall second (``key``: its rate key) for later estimates."""
    if rate > 0:
        settings().setValue(f"rates/{key}", float(rate))


def _stretch(splitter: QSplitter, index: int) -> int:
    policy = splitter.widget(index).sizePolicy()
    horizontal = splitter.orientation() == Qt.Orientation.Horizontal
    return policy.horizontalStretch() if horizontal else policy.verticalStretch()


def fitted_sizes(splitter: QSplitter, saved: list[int], total: int) -> list[int]:
    """``saved`` sizes fitted to ``total`` pixels: a pane of stretch factor 0 (a controls column,
    the panel list) keeps its size; the stretching panes share the rest in their saved ratio."""
    fixed = {i for i in range(len(saved)) if _stretch(splitter, i) == 0}
    if len(fixed) == len(saved):
        fixed = set()
    rest = max(total - sum(saved[i] for i in fixed), 0)
    weights = sum(size for i, size in enumerate(saved) if i not in fixed) or 1
    return [size if i in fixed else round(size * rest / weights) for i, size in enumerate(saved)]


class SplitterMemory(QObject):
    """A splitter's remembered sizes, applied once it has its final geometry.

    ``QSplitter.restoreState`` on a splitter not laid out yet keeps the saved sizes' ratio when
    the first layout pass sizes it: in a window that came back narrower (clamped to the
    screen) the controls column lost 41 px. This applies :func:`fitted_sizes` after each show
    and resize of the splitter until ``SETTLE_MS`` after its first show, or until the user
    drags its handle; until then :func:`splitter_text` reports the remembered sizes.
    """

    SETTLE_MS = 300
    EVENTS = (QEvent.Type.Show, QEvent.Type.Resize, QEvent.Type.LayoutRequest)

    def __init__(self, splitter: QSplitter, sizes: list[int]):
        super().__init__(splitter)
        self.splitter = splitter
        self.sizes = sizes
        self.active = True
        splitter.installEventFilter(self)
        splitter.splitterMoved.connect(self.finish)
        if splitter.isVisible():
            self._apply()
            QTimer.singleShot(self.SETTLE_MS, self.finish)

    def _apply(self) -> None:
        total = sum(self.splitter.sizes())
        if self.active and total > 0:
            self.splitter.setSizes(fitted_sizes(self.splitter, self.sizes, total))

    def eventFilter(self, watched, event) -> bool:
        kind = event.type()
        if self.active and kind in self.EVENTS and watched.isVisible():
            if kind == QEvent.Type.Show:
                QTimer.singleShot(self.SETTLE_MS, self.finish)
            QTimer.singleShot(0, self._apply)          # after QSplitter's own layout pass
        return False

    def finish(self) -> None:
        """Stop applying (the splitter keeps its sizes from now on)."""
        if self.active:
            self.active = False
            self.splitter.removeEventFilter(self)
            self.splitter.splitterMoved.disconnect(self.finish)


def _memory(splitter: QSplitter) -> SplitterMemory | None:
    found = [m for m in splitter.findChildren(SplitterMemory, "",
                                              Qt.FindChildOption.FindDirectChildrenOnly)
             if m.active]
    return found[-1] if found else None


def restore_splitter(splitter: QSplitter, text: object) -> bool:
    """Give ``splitter`` the sizes :func:`splitter_text` wrote, once it is laid out; False when
    ``text`` is not such a list (an older settings file kept ``saveState`` bytes)."""
    if not isinstance(text, str):
        return False
    try:
        sizes = [int(part) for part in text.split(",")]
    except ValueError:
        return False
    if len(sizes) != splitter.count() or min(sizes) < 0 or sum(sizes) == 0:
        return False
    previous = _memory(splitter)
    if previous is not None:
        previous.finish()
    SplitterMemory(splitter, sizes)
    return True


def splitter_text(splitter: QSplitter) -> str:
    """The splitter's sizes as "a,b,…" (the remembered ones while they wait to be applied);
    "" for a splitter never laid out (a panel not shown: it fits its controls when it is)."""
    memory = _memory(splitter)
    sizes = memory.sizes if memory is not None else splitter.sizes()
    return ",".join(str(int(size)) for size in sizes) if sum(sizes) > 0 else ""
