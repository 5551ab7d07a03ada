"""Controls built from a config dataclass's field specs (as magicgui and pyqtgraph's parameter
trees do): a field's type and :func:`app.sims.common.config.spec` give the widget, its range
or choices and its tooltip; the form shows a config and reads the edited one back.

    form = ConfigForm(SSAConfig)
    box = form.group("Ensemble", ["ensemble.realizations", ("ensemble.t_end", "t end"), ...])
    form.show(cfg)                 # config -> widgets
    cfg = form.read(cfg)           # widgets -> a copy of cfg with those fields replaced

Fields are named by dotted paths from the root dataclass. Widgets: a check box (bool), a
combo box (choices), a spin box (int within Qt's 32-bit range, float), a line edit (text,
whole numbers beyond 32 bits such as 64-bit seeds, numbers over many decades such as
1e-30..1e30). Panels add only their domain's own widgets.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from typing import Any, Iterable, Mapping

from PySide6.QtGui import QDoubleValidator, QRegularExpressionValidator
from PySide6.QtWidgets import (QCheckBox, QComboBox, QDoubleSpinBox, QFormLayout, QGroupBox,
                               QLineEdit, QSpinBox, QWidget)

from app.sims.common.config import ConfigError

INT32_MAX = 2**31 - 1
FLOAT_LIMIT = 1e15            # a spin box needs finite bounds
MAX_DECIMALS = 10

Item = str | tuple[str, str]    # a field path, or (path, label)


@dataclasses.dataclass(frozen=True)
class FieldSpec:
    """What a form needs of one field: its type, spec metadata and default."""

    path: str
    type: Any
    range: tuple[float, float] | None
    choices: tuple | None
    doc: str
    unit: str
    default: Any


def field_spec(root: type, path: str) -> FieldSpec:
    """The :class:`FieldSpec` of the dotted ``path`` inside dataclass ``root``."""
    cls: Any = root
    parts = path.split(".")
    for i, name in enumerate(parts):
        fields = {f.name: f for f in dataclasses.fields(cls)}
        if name not in fields:
            raise KeyError(f"{root.__name__} has no field {'.'.join(parts[:i + 1])}")
        f, tp = fields[name], _plain_type(typing.get_type_hints(cls)[name])
        if i < len(parts) - 1:
            cls = tp
    meta = f.metadata
    default = f.default if f.default is not dataclasses.MISSING else None
    return FieldSpec(path, tp, meta.get("range"), meta.get("choices"), meta.get("doc", ""),
                     meta.get("unit", ""), default)


def _plain_type(tp: Any) -> Any:
    """``X | None`` -> ``X``."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        options = [o for o in typing.get_args(tp) if o is not type(None)]
        if len(options) == 1:
            return options[0]
    return tp


def tooltip(spec: FieldSpec) -> str:
    """The field's doc line, with its unit and valid range."""
    parts = [spec.doc[:1].upper() + spec.doc[1:]] if spec.doc else []
    if spec.unit:
        parts.append(f"unit: {spec.unit}")
    if spec.range is not None:
        parts.append(f"valid: {spec.range[0]:g} to {spec.range[1]:g}")
    return "; ".join(parts)


def decimals_for(value: float, at_least: int = 0) -> int:
    """Decimals that show ``value`` without rounding (at most :data:`MAX_DECIMALS`)."""
    for decimals in range(at_least, MAX_DECIMALS + 1):
        if math.isclose(round(value, decimals), value, rel_tol=1e-9, abs_tol=0.0):
            return decimals
    return MAX_DECIMALS


def make_widget(spec: FieldSpec, *, decimals: int | None = None, step: float | None = None) -> QWidget:
    """The control for one field (see the module docstring), with range, choices and tooltip."""
    lo, hi = spec.range if spec.range is not None else (-FLOAT_LIMIT, FLOAT_LIMIT)
    widget: QWidget
    if spec.type is bool:
        widget = QCheckBox()
    elif spec.choices is not None:
        widget = QComboBox()
        for choice in spec.choices:
            widget.addItem(str(choice), choice)
    elif spec.type is int and -INT32_MAX - 1 <= lo and hi <= INT32_MAX:
        widget = QSpinBox()
        widget.setRange(int(lo), int(hi))
        widget.setSingleStep(int(step or 1))
        widget.setGroupSeparatorShown(hi >= 10_000)
    elif spec.type is int:
        widget = QLineEdit()
        widget.setValidator(QRegularExpressionValidator(r"-?\d{1,20}" if lo < 0 else r"\d{1,20}"))
    elif spec.type is float and max(abs(lo), abs(hi)) > FLOAT_LIMIT:      # many decades: 1e-30 .. 1e30
        widget = QLineEdit()
        validator = QDoubleValidator(lo, hi, MAX_DECIMALS + 6)
        validator.setNotation(QDoubleValidator.Notation.ScientificNotation)
        widget.setValidator(validator)
    elif spec.type is float:
        widget = QDoubleSpinBox()
        reference = abs(spec.default or 0.0) or max(abs(lo), abs(hi), 1.0)
        widget.setDecimals(decimals if decimals is not None else
                           max(3, min(MAX_DECIMALS, 3 - math.floor(math.log10(reference)))))
        widget.setRange(max(lo, -FLOAT_LIMIT), min(hi, FLOAT_LIMIT))
        widget.setSingleStep(step or 10.0 ** (math.floor(math.log10(reference)) - 1))
    elif spec.type is str:
        widget = QLineEdit()
    else:
        raise TypeError(f"no form control for {spec.path} of type {spec.type}")
    widget.setToolTip(tooltip(spec))
    return widget


def set_value(widget: QWidget, value: Any) -> None:
    """Show ``value`` in a widget made by :func:`make_widget`."""
    if isinstance(widget, QCheckBox):
        widget.setChecked(bool(value))
    elif isinstance(widget, QComboBox):
        index = widget.findData(value)
        widget.setCurrentIndex(index if index >= 0 else widget.findText(str(value)))
    elif isinstance(widget, QDoubleSpinBox):
        widget.setDecimals(decimals_for(float(value), widget.decimals()))   # never round a loaded value
        widget.setValue(float(value))
    elif isinstance(widget, QSpinBox):
        widget.setValue(int(value))
    elif isinstance(widget, QLineEdit):
        widget.setText("" if value is None else str(value))
    else:
        raise TypeError(f"not a form control: {widget!r}")


def get_value(spec: FieldSpec, widget: QWidget) -> Any:
    """The value a widget holds, of the field's type; a blank or malformed entry is a ConfigError."""
    if isinstance(widget, QCheckBox):
        return widget.isChecked()
    if isinstance(widget, QComboBox):
        return widget.currentData()
    if isinstance(widget, (QSpinBox, QDoubleSpinBox)):
        return widget.value()
    text = widget.text().strip()
    if spec.type in (int, float):
        try:
            value = spec.type(text)
        except ValueError:
            kind = "a whole number" if spec.type is int else "a number"
            raise ConfigError(f"{spec.path}: enter {kind}, got {text!r}") from None
        if spec.range is not None and not spec.range[0] <= value <= spec.range[1]:
            raise ConfigError(f"{spec.path}: {value} is out of range; valid range is "
                              f"[{spec.range[0]:g}, {spec.range[1]:g}]")
        return value
    return text if text or spec.default is not None else None


def get_path(obj: Any, path: str) -> Any:
    for name in path.split("."):
        obj = getattr(obj, name)
    return obj


def replace_paths(obj: Any, values: Mapping[str, Any]) -> Any:
    """A copy of the dataclass ``obj`` with the dotted paths of ``values`` replaced."""
    leaves: dict[str, Any] = {}
    nested: dict[str, dict[str, Any]] = {}
    for path, value in values.items():
        head, _, rest = path.partition(".")
        if rest:
            nested.setdefault(head, {})[rest] = value
        else:
            leaves[head] = value
    for head, inner in nested.items():
        leaves[head] = replace_paths(getattr(obj, head), inner)
    return dataclasses.replace(obj, **leaves)


class ConfigForm:
    """The controls of some fields of one config dataclass, keyed by dotted path.

    ``hints`` maps a path to ``decimals``/``step`` for its spin box where the automatic
    choice does not suit.
    """

    def __init__(self, root: type, hints: Mapping[str, Mapping[str, Any]] | None = None):
        self.root = root
        self.hints = dict(hints or {})
        self.specs: dict[str, FieldSpec] = {}
        self.widgets: dict[str, QWidget] = {}

    def __getitem__(self, path: str) -> QWidget:
        return self.widgets[path]

    def __contains__(self, path: str) -> bool:
        return path in self.widgets

    def add(self, path: str) -> QWidget:
        """The control of ``path`` (made on first use)."""
        if path not in self.widgets:
            spec = field_spec(self.root, path)
            self.specs[path] = spec
            self.widgets[path] = make_widget(spec, **self.hints.get(path, {}))
        return self.widgets[path]

    def rows(self, layout: QFormLayout, items: Iterable[Item]) -> QFormLayout:
        """Add a labelled row per item (a path, or ``(path, label)``) to ``layout``."""
        for item in items:
            path, label = item if isinstance(item, tuple) else (item, None)
            widget = self.add(path)
            if label is None:
                name = path.rsplit(".", 1)[-1].replace("_", " ")
                unit = self.specs[path].unit
                label = name[:1].upper() + name[1:] + (f" ({unit})" if unit else "")
            if isinstance(widget, QCheckBox):
                widget.setText(label)
                layout.addRow(widget)
            else:
                layout.addRow(label, widget)
                name_label = layout.labelForField(widget)
                if name_label is not None:          # the label explains itself too
                    name_label.setToolTip(widget.toolTip())
        return layout

    def group(self, title: str, items: Iterable[Item]) -> QGroupBox:
        """A group box with a form row per item."""
        box = QGroupBox(title)
        self.rows(QFormLayout(box), items)
        return box

    def expose(self, owner: object, names: Mapping[str, str] | None = None) -> None:
        """Set each control as an attribute of ``owner``: its field name, or ``names[path]``."""
        names = {path: (names or {}).get(path, path.rsplit(".", 1)[-1]) for path in self.widgets}
        taken = [n for n in names.values() if list(names.values()).count(n) > 1]
        if taken:
            raise ValueError(f"two fields would both be exposed as {taken[0]!r}: name one of them")
        for path, widget in self.widgets.items():
            setattr(owner, names[path], widget)

    def show(self, cfg: Any) -> None:
        """Show the form's fields of ``cfg``."""
        for path, widget in self.widgets.items():
            set_value(widget, get_path(cfg, path))

    def values(self) -> dict[str, Any]:
        """The edited values by path; raises ConfigError for a malformed entry."""
        return {path: get_value(self.specs[path], w) for path, w in self.widgets.items()}

    def read(self, cfg: Any) -> Any:
        """A copy of ``cfg`` with the form's fields replaced by the edited values."""
        return replace_paths(cfg, self.values())
