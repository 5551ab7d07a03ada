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
from typing import Any, Callable, Iterable, Mapping, Sequence

import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QCheckBox, QComboBox, QDoubleSpinBox, QFormLayout, QGroupBox, QHBoxLayout,
                               QLabel, QPushButton, QSlider, QWidget)

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


def knob_for(steerable: Any, value: float, label: str = "") -> Knob:
    """A slider for a declared number (:class:`app.sims.common.steering.Steerable`) now at
    ``value``: one declared on a log scale slides over two decades each side of its value, a
    count from 0 to ten times its value (at least 100), any other number linearly over ten times
    its size each side; always within the declared range."""
    lo, hi = (float(x) for x in steerable.range) if steerable.range is not None else (-math.inf, math.inf)
    value = float(value)
    if steerable.kind == "int":
        lo, hi, log = max(lo, 0.0), min(hi, max(10.0 * abs(value), 100.0)), False
    elif steerable.log and max(lo, value) > 0:
        centre = value if value > 0 else lo
        lo, hi, log = max(lo, centre / 100.0), min(hi, centre * 100.0), True
    else:
        span = 10.0 * max(abs(value), 1.0)
        lo, hi, log = max(lo, value - span), min(hi, value + span), False
    return Knob(steerable.key, label or label_of(steerable.key), lo, hi, value,
                integer=steerable.kind == "int", log=log, unit=steerable.unit, doc=steerable.doc)


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
    """The live controls of the declared steerables: a :class:`KnobSlider` per number with a
    known value, a check box per switch, a combo box per choice, a button per gesture that takes
    no region; ``steered(key, value)`` when one is used. Region gestures go to a
    :class:`BrushTool`."""

    steered = Signal(str, object)

    def __init__(self, title: str = "Steer while running", parent: QWidget | None = None):
        super().__init__(title, parent)
        self.form = QFormLayout(self)
        self.fixed_rows = 0               # rows a panel inserted at the top (kept on a refill)
        self.sliders: dict[str, KnobSlider] = {}
        self.switches: dict[str, QCheckBox] = {}
        self.choices: dict[str, QComboBox] = {}
        self.buttons: dict[str, QPushButton] = {}
        self.values: dict[str, QDoubleSpinBox] = {}    # the value of a gesture that takes one

    def add_fixed_row(self, label: str, widget: QWidget) -> None:
        """A panel's own row at the top (kept when the steerables change)."""
        self.form.insertRow(self.fixed_rows, label, widget)
        self.fixed_rows += 1

    def set_knobs(self, knobs: Iterable[Knob]) -> None:
        """Sliders only (see :meth:`set_steerables`)."""
        self._clear()
        for knob in knobs:
            self._add_slider(knob)
        self._shown()

    def set_steerables(self, steerables: Iterable[Any], values: Mapping[str, Any]) -> None:
        """One control per live steerable without a region (numbers need their value)."""
        self._clear()
        for s in steerables:
            if not s.live or s.region:
                continue
            label = label_of(s.key)
            if s.kind in ("float", "int") and s.key in values:
                self._add_slider(knob_for(s, values[s.key], label))
            elif s.kind == "bool":
                box = QCheckBox()
                box.setObjectName(f"steer:{s.key}")
                box.setChecked(bool(values.get(s.key, False)))
                box.setToolTip(s.doc)
                box.toggled.connect(lambda on, key=s.key: self.steered.emit(key, bool(on)))
                self.form.addRow(label, box)
                self.switches[s.key] = box
            elif s.kind == "choice":
                combo = QComboBox()
                combo.setObjectName(f"steer:{s.key}")
                combo.addItems(list(s.choices))
                if s.key in values:
                    combo.setCurrentText(str(values[s.key]))
                combo.setToolTip(s.doc)
                combo.activated.connect(lambda _, key=s.key, c=combo: self.steered.emit(key, c.currentText()))
                self.form.addRow(label, combo)
                self.choices[s.key] = combo
            elif s.kind == "gesture" and s.range is not None:
                self._add_value_gesture(s, s.key.replace(".", " "), values.get(s.key))
            elif s.kind == "gesture":
                button = QPushButton(label)
                button.setObjectName(f"steer:{s.key}")
                button.setToolTip(s.doc)
                button.clicked.connect(lambda _=False, key=s.key: self.steered.emit(key, None))
                self.form.addRow("", button)
                self.buttons[s.key] = button
        self._shown()

    def _add_value_gesture(self, s: Any, label: str, value: Any) -> None:
        """A gesture that takes a value or none (hold a fit parameter at a value, or free it):
        a spin box, *Set* (the value) and *Clear* (none)."""
        lo, hi = (float(x) for x in s.range)
        spin = QDoubleSpinBox(decimals=6, minimum=lo, maximum=hi)
        spin.setValue(float(value) if isinstance(value, (int, float)) else (lo + hi) / 2)
        spin.setObjectName(f"steer:{s.key}")
        spin.setToolTip(s.doc)
        set_button, clear_button = QPushButton("Set"), QPushButton("Clear")
        set_button.setToolTip(s.doc)
        set_button.clicked.connect(lambda _=False, key=s.key: self.steered.emit(key, float(spin.value())))
        clear_button.clicked.connect(lambda _=False, key=s.key: self.steered.emit(key, None))
        row = QHBoxLayout()
        row.addWidget(spin, 1)
        row.addWidget(set_button)
        row.addWidget(clear_button)
        self.form.addRow(label, row)
        self.values[s.key] = spin
        self.buttons[s.key] = set_button
        self.buttons[f"{s.key}:clear"] = clear_button

    def _add_slider(self, knob: Knob) -> None:
        slider = KnobSlider(knob)
        slider.changed.connect(lambda key, value: self.steered.emit(key, value))
        self.form.addRow(knob.label, slider)
        self.sliders[knob.key] = slider

    def _clear(self) -> None:
        while self.form.rowCount() > self.fixed_rows:
            self.form.removeRow(self.fixed_rows)
        self.sliders, self.switches, self.choices, self.buttons, self.values = {}, {}, {}, {}, {}

    def _shown(self) -> None:
        self.setVisible(bool(self.fixed_rows or self.sliders or self.switches or self.choices or self.buttons))

    def set_live_drag(self, on: bool) -> None:
        for slider in self.sliders.values():
            slider.live_drag = on

    def show_values(self, values: Mapping[str, float]) -> None:
        """Move the sliders to ``values`` (key -> value) without emitting."""
        for key, value in values.items():
            if key in self.sliders:
                self.sliders[key].set_value(value)


def config_values(cfg: Any, steerables: Iterable[Any]) -> dict[str, Any]:
    """The current value of each steerable whose key is a dotted path of ``cfg`` (numbers,
    switches and choices)."""
    values = {}
    for s in steerables:
        node = cfg
        for part in s.key.split("."):
            node = getattr(node, part, None)
            if node is None:
                break
        if isinstance(node, (bool, int, float, str)):
            values[s.key] = node
    return values


def label_of(key: str) -> str:
    """A control's label: the key's last part, in words."""
    return key.rsplit(".", 1)[-1].replace("_", " ")


def brush_label(key: str) -> str:
    """A region gesture's name in the brush's list: 'scale g_Kr' (a factor) and 'set g_Kr' (a
    value) tell the two ways of painting a parameter apart."""
    kind = key.partition(".")[0]
    verb = {"scale": "scale ", "model": "set "}.get(kind, "") if "." in key else ""
    return verb + label_of(key)


class BrushTool(QGroupBox):
    """The declared region gestures (ablate, restore, scale a conductance, wound, stimulate a
    region…): which one a click or drag on the view paints, its value and the brush radius."""

    def __init__(self, title: str = "Brush", unit: str = "mm", parent: QWidget | None = None):
        super().__init__(title, parent)
        self.gesture = QComboBox()
        self.gesture.setObjectName("brushGesture")
        self.value = QDoubleSpinBox(decimals=4, minimum=-1e9, maximum=1e9)
        self.value.setObjectName("brushValue")
        self.radius = QDoubleSpinBox(decimals=3, minimum=1e-3, maximum=1e6, value=1.0)
        self.radius.setObjectName("brushRadius")
        self.radius.setSuffix(f" {unit}")
        form = QFormLayout(self)
        form.addRow("Paint", self.gesture)
        form.addRow("Value", self.value)
        form.addRow("Radius", self.radius)
        self.specs: dict[str, Any] = {}
        self.defaults: dict[str, float] = {}
        self.gesture.currentIndexChanged.connect(self._picked)

    def set_steerables(self, steerables: Iterable[Any], values: Mapping[str, Any] | None = None) -> None:
        """The region gestures of ``steerables``; ``values``: the value each starts with."""
        self.defaults = {k: v for k, v in (values or {}).items() if isinstance(v, (int, float))}
        self.specs = {s.key: s for s in steerables if s.region and s.live}
        self.gesture.blockSignals(True)
        self.gesture.clear()
        for key, s in self.specs.items():
            self.gesture.addItem(brush_label(key), key)
            self.gesture.setItemData(self.gesture.count() - 1, s.doc, Qt.ItemDataRole.ToolTipRole)
        self.gesture.blockSignals(False)
        self._picked()
        self.setVisible(bool(self.specs))

    def choose(self, key: str, value: float | None = None, radius: float | None = None) -> None:
        """Pick the gesture ``key`` (and its value and radius), as a user would."""
        self.gesture.setCurrentIndex(self.gesture.findData(key))
        if value is not None:
            self.value.setValue(value)
        if radius is not None:
            self.radius.setValue(radius)

    def _picked(self) -> None:
        s = self.specs.get(self.gesture.currentData())
        takes_value = s is not None and s.range is not None
        self.value.setEnabled(takes_value)
        if takes_value:
            self.value.setRange(*s.range)
            self.value.setToolTip(s.doc)
            if s.key in self.defaults:
                self.value.setValue(float(self.defaults[s.key]))

    @property
    def key(self) -> str | None:
        return self.gesture.currentData()

    def stroke(self, centre: Sequence[float]) -> tuple[str, float | None, dict[str, Any]] | None:
        """(key, value, region) of a dab at ``centre`` (mm or model units); None: no gesture."""
        if self.key is None:
            return None
        value = float(self.value.value()) if self.value.isEnabled() else None
        return self.key, value, {"kind": "brush", "centre": [float(c) for c in centre],
                                 "radius": float(self.radius.value())}


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


def event_time(event: Any) -> float | None:
    """The simulated time an event took effect at (the domain's time-axis unit)."""
    return getattr(event, "t", None)


class EventMarks:
    """One dashed vertical line per steering event on ``plot``'s x axis (its time axis);
    ``x_of(event)`` gives the x of an event (None: not on this plot; default: its simulated
    time). Lines are reused, and put back after the view's ``plot.clear()``."""

    def __init__(self, plot: pg.PlotItem, x_of: Callable[[Any], float | None] = event_time):
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


class PlotBrush:
    """Clicks and drags on a pyqtgraph plot as brush dabs: ``paint((x, y))`` in the plot's
    data coordinates, on a click and every ``spacing`` units of a drag with the left button
    held; only while ``active()`` holds (the panel's brush has a gesture)."""

    def __init__(self, plot: pg.PlotItem, paint: Callable[[tuple[float, float]], Any],
                 active: Callable[[], bool], spacing: float = 1.0):
        self.plot, self.paint, self.active, self.spacing = plot, paint, active, spacing
        self._last: tuple[float, float] | None = None
        scene = plot.scene()
        scene.sigMouseClicked.connect(self._clicked)
        scene.sigMouseMoved.connect(self._moved)

    def _point(self, scene_pos) -> tuple[float, float] | None:
        if not self.plot.sceneBoundingRect().contains(scene_pos):
            return None
        p = self.plot.vb.mapSceneToView(scene_pos)
        return float(p.x()), float(p.y())

    def _clicked(self, event) -> None:
        point = self._point(event.scenePos())
        if point is not None and self.active() and event.button() == Qt.MouseButton.LeftButton:
            self._last = point
            self.paint(point)

    def _moved(self, scene_pos) -> None:
        from PySide6.QtWidgets import QApplication

        if not QApplication.mouseButtons() & Qt.MouseButton.LeftButton or not self.active():
            self._last = None
            return
        point = self._point(scene_pos)
        if point is None or (self._last is not None and math.dist(point, self._last) < self.spacing):
            return
        self._last = point
        self.paint(point)
