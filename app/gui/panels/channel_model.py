"""The channel panel's model editor (YAML, validated as you type) and its parameter table.

The editor is the source of truth for the model. It is validated on a ~300 ms debounce with
the same code the loader uses (``parse_yaml`` + ``build(ChannelSpec)`` + ``compile_model``);
the message under it names the line (``file:line: ...``) and, for a rate expression, shows the
expression with a caret under the offending character. The parameter table shows the
parameters of the last valid model; an edit there is checked and written back into the
editor's ``parameters:`` block, so the text and the table never disagree.
"""

from __future__ import annotations

import html
import math
import re
from dataclasses import replace

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QBrush, QColor, QFontDatabase, QTextCursor, QTextFormat
from PySide6.QtWidgets import (QAbstractItemView, QHeaderView, QLabel, QPlainTextEdit,
                               QTableWidget, QTableWidgetItem, QTextEdit, QVBoxLayout, QWidget)

from app.gui.tables import fit_columns
from app.sims.channel.model import ChannelSpec, ParameterSpec, compile_model
from app.sims.common.config import ConfigError, Document, build, parse_yaml

DEBOUNCE_MS = 300
BAD = QBrush(QColor(255, 200, 200))
ERROR_LINE = QColor(255, 225, 225)
_EXPR_ERROR = re.compile(r"^(.*) at position (\d+): (.*)$")


def model_path(doc: Document) -> tuple:
    """Key path of the model inside a document: a model file, or one wrapped in ``model:``."""
    data = doc.data
    return ("model",) if isinstance(data, dict) and isinstance(data.get("model"), dict) else ()


def check_model_text(text: str, source: str = "<model>") -> tuple[ChannelSpec, Document, tuple]:
    """(spec, document, key path) of model YAML ``text``; raises ConfigError like the loader."""
    doc = parse_yaml(text, source)
    path = model_path(doc)
    data = doc.data
    for key in path:
        data = data[key]
    spec = build(ChannelSpec, data, doc, path)
    compile_model(spec, doc, path)
    return spec, doc, path


def message_html(message: str) -> str:
    """A ConfigError message as HTML; an expression error gets its text and caret on two lines."""
    first, _, rest = message.partition("\n")
    m = _EXPR_ERROR.match(first)
    if m and rest.strip() == "^":
        where, position, expr = m.group(1), int(m.group(2)), m.group(3)
        lines = [f"{where} at position {position}:", "    " + expr, "    " + " " * (position - 1) + "^"]
    else:
        lines = message.splitlines() or [message]
    text = html.escape("\n".join(lines), quote=False).replace("\n", "<br>")
    return f"<div style='white-space: pre-wrap'>{text}</div>"


def format_number(x: float) -> str:
    return f"{x:.10g}"


def parameter_line(p: ParameterSpec) -> str:
    """One parameter as a YAML flow mapping."""
    fields = f"name: {p.name}, min: {format_number(p.min)}, max: {format_number(p.max)}"
    if p.value is not None:
        fields += f", value: {format_number(p.value)}"
    return "{" + fields + "}"


def replace_parameters(text: str, doc: Document, path: tuple, params: list[ParameterSpec]) -> str:
    """``text`` with its ``parameters:`` block rewritten as ``params`` (one flow mapping per line).

    The block runs from the ``parameters`` key to the line before the next key at the same
    depth (or the end), keeping trailing comments and blank lines outside it.
    """
    lines = text.split("\n")
    start = doc.marks[path + ("parameters",)] - 1
    siblings = [line for key, line in doc.marks.items()
                if len(key) == len(path) + 1 and key[:len(path)] == path and line - 1 > start]
    end = min(siblings) - 1 if siblings else len(lines)
    while end > start + 1 and (not lines[end - 1].strip() or lines[end - 1].lstrip().startswith("#")):
        end -= 1
    indent = lines[start][:len(lines[start]) - len(lines[start].lstrip())]
    block = [f"{indent}parameters:"] + [f"{indent}  - {parameter_line(p)}" for p in params]
    return "\n".join(lines[:start] + block + lines[end:])


class ModelEditor(QWidget):
    """A YAML editor for a channel model with live validation.

    Signals
    -------
    validated(object)
        After each check: the valid :class:`ChannelSpec`, or None when the text is invalid.
    """

    validated = Signal(object)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        mono = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
        self.editor = QPlainTextEdit()
        self.editor.setObjectName("modelEditor")
        self.editor.setFont(mono)
        self.editor.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.editor.setTabChangesFocus(True)
        self.message = QLabel()
        self.message.setObjectName("modelMessage")
        self.message.setFont(mono)
        self.message.setWordWrap(True)
        self.message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.editor, 1)
        layout.addWidget(self.message)
        self.source = "<model>"
        self.spec: ChannelSpec | None = None
        self.doc: Document | None = None
        self.path: tuple = ()
        self.error = "no model"
        self.timer = QTimer(self)
        self.timer.setSingleShot(True)
        self.timer.setInterval(DEBOUNCE_MS)
        self.timer.timeout.connect(self.validate_now)
        self.editor.textChanged.connect(self.timer.start)

    # ---- text ---------------------------------------------------------------------------
    def text(self) -> str:
        return self.editor.toPlainText()

    def set_text(self, text: str, source: str = "<model>") -> ChannelSpec | None:
        """Show ``text`` (errors will name ``source``) and validate at once."""
        self.source = source
        self.editor.blockSignals(True)
        self.editor.setPlainText(text)
        self.editor.blockSignals(False)
        return self.validate_now()

    def set_parameters(self, params: list[ParameterSpec]) -> None:
        """Rewrite the parameters block of the (valid) text, keeping the rest as typed."""
        if self.doc is None or self.spec is None:
            raise ConfigError("the model text is not valid; fix it before editing the table")
        text = replace_parameters(self.text(), self.doc, self.path, params)
        cursor = self.editor.textCursor()
        position = cursor.position()
        cursor.beginEditBlock()                    # one undo step
        cursor.select(QTextCursor.SelectionType.Document)
        cursor.insertText(text)
        cursor.endEditBlock()
        cursor.setPosition(min(position, len(text)))
        self.editor.setTextCursor(cursor)
        self.validate_now()

    # ---- validation ---------------------------------------------------------------------
    @property
    def valid(self) -> bool:
        return self.spec is not None

    def validate_now(self) -> ChannelSpec | None:
        """Check the text now (cancels the pending debounce); returns the spec or None."""
        self.timer.stop()
        try:
            spec, doc, path = check_model_text(self.text(), self.source)
        except ConfigError as exc:
            self.spec, self.doc, self.error = None, None, str(exc)
            self.message.setText(message_html(str(exc)))
            self.message.setStyleSheet("color: #b00020")
            self._mark_line(exc.line)
        else:
            self.spec, self.doc, self.path, self.error = spec, doc, path, ""
            self.message.setText(f"valid: {len(spec.states)} states, {len(spec.parameters)} parameters, "
                                 f"{len(spec.rates)} rates")
            self.message.setStyleSheet("color: #1b7a1b")
            self._mark_line(None)
        self.validated.emit(self.spec)
        return self.spec

    def _mark_line(self, line: int | None) -> None:
        if line is None or self.source_mismatch():
            self.editor.setExtraSelections([])
            return
        block = self.editor.document().findBlockByNumber(line - 1)
        if not block.isValid():
            self.editor.setExtraSelections([])
            return
        selection = QTextEdit.ExtraSelection()
        selection.format.setBackground(ERROR_LINE)
        selection.format.setProperty(QTextFormat.Property.FullWidthSelection, True)
        selection.cursor = QTextCursor(block)
        self.editor.setExtraSelections([selection])

    def source_mismatch(self) -> bool:
        """True when the last error points into another file (not this text)."""
        return bool(self.error) and not self.error.startswith(self.source)


class ParameterTable(QTableWidget):
    """Name | Min | Max | True value; each edited row is checked (numbers, min < max, value in
    range or empty) and, when every row is valid, ``edited`` carries the new parameter list."""

    edited = Signal(object)   # list[ParameterSpec]
    problem = Signal(str)     # '' when every row is valid

    COLUMNS = ("Name", "Min", "Max", "True value")

    def __init__(self, parent=None):
        super().__init__(0, len(self.COLUMNS), parent)
        self.setHorizontalHeaderLabels(list(self.COLUMNS))
        self.verticalHeader().setVisible(False)
        header = self.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for col in (1, 2, 3):
            header.setSectionResizeMode(col, QHeaderView.ResizeMode.ResizeToContents)
        self.setEditTriggers(QAbstractItemView.EditTrigger.AllEditTriggers)
        self.params: list[ParameterSpec] = []
        self.errors: dict[int, str] = {}
        self.itemChanged.connect(self._check_item)

    def set_parameters(self, params: list[ParameterSpec]) -> None:
        if list(params) == self.params and not self.errors:
            return
        self.blockSignals(True)
        self.setRowCount(len(params))
        self.params, self.errors = list(params), {}
        for i, p in enumerate(params):
            texts = (p.name, format_number(p.min), format_number(p.max),
                     "" if p.value is None else format_number(p.value))
            for col, text in enumerate(texts):
                item = QTableWidgetItem(text)
                if col == 0:
                    item.setFlags(item.flags() & ~Qt.ItemFlag.ItemIsEditable)
                self.setItem(i, col, item)
        self.blockSignals(False)
        fit_columns(self, stretch=0)
        self.problem.emit("")

    def set_value(self, name: str, column: str, text: str) -> None:
        """Type ``text`` into the ``column`` cell ('Min', 'Max', 'True value') of ``name``."""
        i = [p.name for p in self.params].index(name)
        self.item(i, self.COLUMNS.index(column)).setText(text)

    def _row(self, i: int) -> ParameterSpec:
        name = self.params[i].name

        def number(col: int, optional: bool = False) -> float | None:
            text = self.item(i, col).text().strip()
            if not text and optional:
                return None
            try:
                x = float(text)
            except ValueError:
                raise ValueError(f"{name}: '{text}' is not a number ({self.COLUMNS[col].lower()})") from None
            if not math.isfinite(x):
                raise ValueError(f"{name}: {self.COLUMNS[col].lower()} must be finite")
            return x

        lo, hi, value = number(1), number(2), number(3, optional=True)
        if not lo < hi:
            raise ValueError(f"{name}: need min < max, got [{lo:g}, {hi:g}]")
        if value is not None and not lo <= value <= hi:
            raise ValueError(f"{name}: value {value:g} is outside its range [{lo:g}, {hi:g}]")
        return replace(self.params[i], min=lo, max=hi, value=value)

    def _check_item(self, item: QTableWidgetItem) -> None:
        i = item.row()
        try:
            row = self._row(i)
        except ValueError as exc:
            self.errors[i] = str(exc)
            brush, tip = BAD, str(exc)
        else:
            self.errors.pop(i, None)
            self.params[i] = row
            brush, tip = QBrush(), ""
        self.blockSignals(True)
        for col in (1, 2, 3):
            cell = self.item(i, col)
            cell.setBackground(brush)
            cell.setToolTip(tip)
        self.blockSignals(False)
        self.problem.emit("; ".join(self.errors[k] for k in sorted(self.errors)))
        if not self.errors:
            self.edited.emit(list(self.params))
