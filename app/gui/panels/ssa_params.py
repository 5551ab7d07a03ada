"""The editable table of an SSA model: initial counts and parameter values (or grid fields).

Every cell is checked when edited: a bad value turns the cell red, explains itself in the
tooltip and in :attr:`ParameterTable.problem`, and is refused by :meth:`edited` with a
:class:`ConfigError` instead of reaching the engine.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableWidget, QTableWidgetItem

from app.gui.tables import fit_columns
from app.sims.common.config import ConfigError
from app.sims.ssa.model import GridSpec, NetworkSpec

GRID_FIELDS = (("n", int, "cells per side"), ("diffusion", float, "hop rate"),
               ("decay", float, "A -> 0"), ("division", float, "A + B -> 2A + B"),
               ("a_initial", int, "A at the start cell"), ("b_initial", int, "B per catalyst cell"))
BAD = QBrush(QColor(255, 200, 200))


@dataclass(frozen=True)
class Row:
    kind: str        # 'count', 'parameter', 'rate', 'grid', or 'imported' / 'refused' (SBML)
    name: str
    type: type       # int or float


def parse_value(text: str, kind: type) -> int | float:
    """A non-negative finite number of type ``kind`` from ``text``; ValueError otherwise."""
    try:
        value = float(text.strip())
    except ValueError:
        raise ValueError(f"'{text}' is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{text} must be a finite number >= 0")
    if kind is int:
        if not value.is_integer():
            raise ValueError(f"{text} must be a whole number")
        return int(value)
    return value


class ParameterTable(QTableWidget):
    """Kind | Name | Value table; only the Value column is editable."""

    problem = Signal(str)   # '' when every cell is valid

    def __init__(self, parent=None):
        super().__init__(0, 3, parent)
        self.setHorizontalHeaderLabels(["Kind", "Name", "Value"])
        self.verticalHeader().setVisible(False)
        header = self.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.ResizeToContents)
        self.setEditTriggers(QAbstractItemView.EditTrigger.AllEditTriggers)
        self.rows: list[Row] = []
        self.errors: dict[int, str] = {}
        self.model_spec: NetworkSpec | None = None
        self.grid_spec: GridSpec | None = None
        self.itemChanged.connect(self._check_item)

    # ---- filling ------------------------------------------------------------------------
    def set_model(self, model: NetworkSpec) -> None:
        rows = [(Row("count", s, int), v) for s, v in model.species.items()]
        rows += [(Row("parameter", p, float), v) for p, v in model.parameters.items()]
        rows += [(Row("rate", r.name or f"reaction {i}", float), r.rate)
                 for i, r in enumerate(model.reactions) if not isinstance(r.rate, str)]
        self.model_spec, self.grid_spec = model, None
        self._fill(rows)

    def set_sbml(self, model) -> None:
        """What an SBML file gave (read-only rows), refused elements first and in red."""
        rows = [(Row("refused", f"{item.element} {item.id}", str), item.detail) for item in model.refused]
        rows += [(Row("imported", f"{item.element} {item.id}", str), item.detail) for item in model.imported]
        self.model_spec = self.grid_spec = None
        self._fill(rows)
        self.blockSignals(True)
        for i, (row, _) in enumerate(rows):
            for col in range(3):
                item = self.item(i, col)
                item.setFlags(item.flags() & ~Qt.ItemFlag.ItemIsEditable)
                if row.kind == "refused":
                    item.setBackground(BAD)
                    item.setToolTip(str(rows[i][1]))
        self.blockSignals(False)

    def set_grid(self, grid: GridSpec) -> None:
        rows = [(Row("grid", name, kind), getattr(grid, name)) for name, kind, _ in GRID_FIELDS]
        self.model_spec, self.grid_spec = None, grid
        self._fill(rows)

    def _fill(self, rows: list[tuple[Row, object]]) -> None:
        self.blockSignals(True)
        self.setRowCount(len(rows))
        self.rows = [row for row, _ in rows]
        self.errors = {}
        labels = {"count": "initial count", "parameter": "parameter", "rate": "rate", "grid": "grid",
                  "imported": "imported", "refused": "REFUSED"}
        for i, (row, value) in enumerate(rows):
            shown = f"{value:g}" if row.type is float else str(value)
            for col, text in enumerate((labels[row.kind], row.name, shown)):
                item = QTableWidgetItem(text)
                if col < 2:
                    item.setFlags(item.flags() & ~Qt.ItemFlag.ItemIsEditable)
                self.setItem(i, col, item)
        self.blockSignals(False)
        fit_columns(self, stretch=1)
        self.problem.emit("")

    # ---- checking -----------------------------------------------------------------------
    def _check_item(self, item: QTableWidgetItem) -> None:
        if item.column() != 2:
            return
        i, row = item.row(), self.rows[item.row()]
        try:
            parse_value(item.text(), row.type)
        except ValueError as exc:
            self.errors[i] = f"{row.name}: {exc}"
            item.setBackground(BAD)
            item.setToolTip(self.errors[i])
        else:
            self.errors.pop(i, None)
            item.setBackground(QBrush())
            item.setToolTip("")
        self.problem.emit("; ".join(self.errors[k] for k in sorted(self.errors)))

    def set_value(self, name: str, text: str) -> None:
        """Type ``text`` into the value cell of row ``name`` (as a user would)."""
        for i, row in enumerate(self.rows):
            if row.name == name:
                self.item(i, 2).setText(text)
                return
        raise KeyError(name)

    def values(self) -> dict[tuple[str, str], int | float]:
        """{(kind, name): value}; raises ConfigError naming every bad cell."""
        if self.errors:
            raise ConfigError("parameter table: " + "; ".join(self.errors[k] for k in sorted(self.errors)))
        return {(row.kind, row.name): parse_value(self.item(i, 2).text(), row.type)
                for i, row in enumerate(self.rows)}

    # ---- building specs -----------------------------------------------------------------
    def edited(self) -> tuple[NetworkSpec | None, GridSpec | None]:
        """(model, grid) rebuilt from the table with :func:`dataclasses.replace`."""
        if self.model_spec is None and self.grid_spec is None:
            return None, None                  # an SBML model: its file is the model
        values = self.values()
        if self.grid_spec is not None:
            fields = {name: values[("grid", name)] for name, _, _ in GRID_FIELDS}
            return None, replace(self.grid_spec, **fields)
        model = self.model_spec
        if model is None:
            return None, None
        species = {s: values[("count", s)] for s in model.species}
        parameters = {p: values[("parameter", p)] for p in model.parameters}
        reactions = [r if isinstance(r.rate, str) else
                     replace(r, rate=values[("rate", r.name or f"reaction {i}")])
                     for i, r in enumerate(model.reactions)]
        return replace(model, species=species, parameters=parameters, reactions=reactions), None
