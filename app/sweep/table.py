"""The sweep's tidy table: one row per point and replicate, as CSV and (with pyarrow) Parquet."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any, Mapping, Sequence

from app.sims.common.output import atomic_write_bytes

LEADING = ("point", "replicate", "name")


def columns(rows: Sequence[Mapping[str, Any]], keys: Sequence[str]) -> list[str]:
    """Point id, swept keys, then every other column in first-seen order."""
    order = [*LEADING, *keys]
    for row in rows:
        order += [c for c in row if c not in order]
    return order


def write_table(out_dir: str | Path, rows: Sequence[Mapping[str, Any]],
                keys: Sequence[str]) -> list[Path]:
    """``sweep.csv`` and, where pyarrow is installed, ``sweep.parquet``, each written atomically."""
    out = Path(out_dir)
    cols = columns(rows, keys)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=cols, restval="", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    files = [atomic_write_bytes(out / "sweep.csv", buf.getvalue().encode())]
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        return files
    table = pa.Table.from_pylist([{c: row.get(c) for c in cols} for row in rows])
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    files.append(atomic_write_bytes(out / "sweep.parquet", sink.getvalue().to_pybytes()))
    return files


def read_table(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a ``sweep.csv`` with numbers parsed (for the sweep view and tests)."""
    rows = []
    with open(path, newline="") as fh:
        for raw in csv.DictReader(fh):
            rows.append({k: _number(v) for k, v in raw.items()})
    return rows


def _number(text: str) -> Any:
    try:
        value = float(text)
    except ValueError:
        return text
    return int(value) if value.is_integer() and "." not in text and "e" not in text.lower() else value
