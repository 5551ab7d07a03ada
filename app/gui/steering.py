"""Live steering in the panels: sliders built from a domain's declared steerables, and the
applied changes marked on the plots' time axes.

A panel builds a :class:`SteeringBox` from the steerables its domain declares (key, range,
log scale) and connects its ``steered(key, value)`` signal to :meth:`Panel.steer
<app.gui.panels.base.Panel.steer>`, which hands the change to the running session (or, before
Run, to the next run at its step 0: the same gesture). Frames carry the events applied so far;
:class:`EventMarks` draws one vertical line per event on a plot's time axis.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFormLayout, QGroupBox, QHBoxLayout, QLabel, QSlider, QWidget

STEPS = 1000                 # slider positions across a knob's range
LOG_DECADES = 2.0            # a positive range wider than this many decades slides on a log scale
EVENT_PEN = pg.mkPen((200, 80, 0), width=1, style=Qt.PenStyle.DashLine)


@dataclass(frozen=True)
class Knob:
    """One steerable number as a slider: ``key`` is what :meth:`Session.steer` takes."""

    key: str
    label: str
    lo: float
    hi: float
    value: float
    integer: bool = False
    log: bool | None = None          # None: a log scale where the range spans decades
    unit: str = ""
    doc: str = ""

    @property
    def logarithmic(self) -> bool:
        if self.log is not None:
            return self.log and self.lo > 0
        return self.lo > 0 and math.log10(self.hi / self.lo) > LOG_DECADES


def to_position(knob: Knob, value: float) -> int:
    """The slider position (0..STEPS) of ``value`` (clipped to the knob's range)."""
    value = min(max(value, knob.lo), knob.hi)
    if knob.hi == knob.lo:
        return 0
    if knob.logarithmic:
        share = math.log(value / knob.lo) / math.log(knob.hi / knob.lo)
    else:
        share = (value - knob.lo) / (knob.hi - knob.lo)
    return int(round(STEPS * share))


def to_value(knob: Knob, position: int) -> float:
    """The value at slider ``position`` (a whole number for an integer knob)."""
    share = position / STEPS
    if knob.logarithmic:
        value = knob.lo * (knob.hi / knob.lo) ** share
    else:
        value = knob.lo + (knob.hi - knob.lo) * share
    value = min(max(value, knob.lo), knob.hi)
    return float(round(value)) if knob.integer else float(f"{value:.4g}")


def format_value(knob: Knob, value: float) -> str:
    text = f"{int(value)}" if knob.integer else f"{value:.4g}"
    return f"{text} {knob.unit}".strip()


class KnobSlider(QWidget):
    """A slider and the value it stands for. ``changed(key, value)`` on release (or a key
    press); while dragging too when :attr:`live_drag` is on (explore mode re-runs anyway)."""

    changed = Signal(str, float)

    def __init__(self, knob: Knob, parent: QWidget | None = None):
        super().__init__(parent)
        self.knob = knob
        self.live_drag = False
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setObjectName(f"steer:{knob.key}")
        self.slider.setRange(0, STEPS)
        self.slider.setMinimumWidth(120)
        self.label = QLabel()
        self.label.setMinimumWidth(self.label.fontMetrics().horizontalAdvance("0.0000e-00 mV"))
        tip = f"{knob.doc}; " if knob.doc else ""
        scale = "log scale" if knob.logarithmic else "linear scale"
        self.setToolTip(f"{tip}{format_value(knob, knob.lo)} to {format_value(knob, knob.hi)}, {scale}")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.slider, 1)
        layout.addWidget(self.label)
        self.set_value(knob.value)
        self.slider.valueChanged.connect(self._moved)
        self.slider.sliderReleased.connect(self._released)

    @property
    def value(self) -> float:
        return to_value(self.knob, self.slider.value())

    def set_value(self, value: float) -> None:
        """Show ``value`` without emitting ``changed``."""
        self.slider.blockSignals(True)
        self.slider.setValue(to_position(self.knob, value))
        self.slider.blockSignals(False)
        self.label.setText(format_value(self.knob, value))

    def set_to(self, value: float) -> None:
        """Move to ``value`` as the user would, emitting ``changed`` (scripts and tests)."""
        self.set_value(value)
        self.changed.emit(self.knob.key, self.value)

    def _moved(self, position: int) -> None:
        value = to_value(self.knob, position)
        self.label.setText(format_value(self.knob, value))
        if self.live_drag or not self.slider.isSliderDown():
            self.changed.emit(self.knob.key, value)

    def _released(self) -> None:
        if not self.live_drag:
            self.changed.emit(self.knob.key, self.value)


class SteeringBox(QGroupBox):
    """A group of :class:`KnobSlider`s; ``steered(key, value)`` when one moves."""

    steered = Signal(str, float)

    def __init__(self, title: str = "Steer while running", parent: QWidget | None = None):
        super().__init__(title, parent)
        self.form = QFormLayout(self)
        self.sliders: dict[str, KnobSlider] = {}

    def set_knobs(self, knobs: Iterable[Knob]) -> None:
        """Replace the sliders with one per knob (a newly loaded model)."""
        while self.form.rowCount():
            self.form.removeRow(0)
        self.sliders = {}
        for knob in knobs:
            slider = KnobSlider(knob)
            slider.changed.connect(self.steered)
            self.form.addRow(knob.label, slider)
            self.sliders[knob.key] = slider
        self.setVisible(bool(self.sliders))

    def set_live_drag(self, on: bool) -> None:
        for slider in self.sliders.values():
            slider.live_drag = on

    def show_values(self, values: dict[str, float]) -> None:
        """Move the sliders to ``values`` (key -> value) without emitting."""
        for key, value in values.items():
            if key in self.sliders:
                self.sliders[key].set_value(value)


def describe_event(event: Any) -> str:
    """'k1: 0.5 -> 2' (or 'ablate: brush at (x, y), r = ...') for a tooltip or a log line."""
    key, value, old = event.key, event.value, getattr(event, "old", None)
    region = getattr(event, "region", None)
    text = f"{key}: {_short(old)} -> {_short(value)}" if old is not None else f"{key}: {_short(value)}"
    if region:
        text += f" ({_short_region(region)})"
    return text


def _short(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)) and len(value) > 4:
        return f"[{len(value)} values]"
    return str(value)


def _short_region(region: Any) -> str:
    if isinstance(region, dict):
        return ", ".join(f"{k} {_short(v)}" for k, v in region.items())
    return _short(region)


class EventMarks:
    """One dashed vertical line per steering event on ``plot``'s x axis (its time axis);
    ``x_of(event)`` gives the x of an event (None: not on this plot). Lines are reused, and put
    back after the view's ``plot.clear()``."""

    def __init__(self, plot: pg.PlotItem, x_of: Callable[[Any], float | None]):
        self.plot, self.x_of = plot, x_of
        self.lines: list[pg.InfiniteLine] = []
        self.shown: tuple = ()

    def set_events(self, events: Sequence[Any]) -> None:
        events = tuple(events or ())
        marks = [(x, describe_event(e)) for e in events if (x := self.x_of(e)) is not None]
        items = self.plot.items
        if events == self.shown and all(line in items for line in self.lines[:len(marks)]):
            return
        self.shown = events
        while len(self.lines) < len(marks):
            line = pg.InfiniteLine(angle=90, movable=False, pen=EVENT_PEN)
            line.setZValue(5)
            self.lines.append(line)
        for k, line in enumerate(self.lines):
            if k < len(marks):
                x, text = marks[k]
                line.setPos(x)
                line.setToolTip(text)
                if line not in items:
                    self.plot.addItem(line, ignoreBounds=True)
                line.show()
            else:
                line.hide()

    @property
    def positions(self) -> list[float]:
        """The x of each shown mark (tests)."""
        return [line.value() for line in self.lines if line.isVisible() and line in self.plot.items]
