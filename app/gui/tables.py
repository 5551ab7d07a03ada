"""Tables whose columns never elide: each column as wide as its header and widest cell."""

from __future__ import annotations

from PySide6.QtWidgets import QHeaderView, QTableView


def column_needs(table: QTableView, column: int) -> tuple[int, int]:
    """(header, cells): the widths ``column`` needs for its header text and its widest cell."""
    cells = table.sizeHintForColumn(column) if table.model().rowCount() else 0
    return table.horizontalHeader().sectionSizeHint(column), cells


def needed_width(table: QTableView) -> int:
    """The width ``table`` needs to show every column at its header's and cells' size hint,
    with its row header, frame and vertical scroll bar."""
    columns = 0
    for column in range(table.model().columnCount()):
        if not table.isColumnHidden(column):
            columns += max(column_needs(table, column))
    rows = table.verticalHeader()
    row_header = rows.sizeHint().width() if not rows.isHidden() else 0
    bar = table.verticalScrollBar().sizeHint().width()
    return columns + row_header + bar + 2 * table.frameWidth()


def fit_columns(table: QTableView, stretch: int | None = None) -> None:
    """Size every column to its contents (``stretch``, if given, also takes the room left) and
    let the table ask for the width they need; call again after the cells change."""
    header = table.horizontalHeader()
    for column in range(table.model().columnCount()):
        mode = QHeaderView.ResizeMode.Stretch if column == stretch else \
            QHeaderView.ResizeMode.ResizeToContents
        header.setSectionResizeMode(column, mode)
    table.setMinimumWidth(needed_width(table))
