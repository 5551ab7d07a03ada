"""The Sweep dialog: sweep a panel's current config over some of its numeric keys on Dask.

The keys are the numeric leaves of the panel's config (what ``--set`` takes), each with start,
stop, number of values and scale; replicates, the domain's metrics, and where to run (a local
cluster of N workers, or an existing scheduler's address). The sweep runs in a ``QThread``
through the same ``app.sweep.runner`` as ``python -m app sweep``; rows stream into the sweep
view, and clicking a point opens that run's config in the panel.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

import yaml
from PySide6.QtCore import QThread, Qt, Signal
from PySide6.QtWidgets import (QAbstractItemView, QComboBox, QDialog, QFileDialog, QFormLayout,
                               QGroupBox, QHeaderView, QHBoxLayout, QLineEdit, QListWidget, QListWidgetItem,
                               QProgressBar, QPushButton, QSpinBox, QSplitter, QTableWidget,
                               QVBoxLayout, QWidget)

from app.gui import errors
from app.gui.views.sweep import SweepView
from app.sims.common.config import dotted_items, to_plain
from app.sims.common.output import save_text
from app.sweep import metrics as sweep_metrics

log = logging.getLogger(__name__)
COLUMNS = ("key", "start", "stop", "values", "scale")


def numeric_keys(cfg: Any) -> list[tuple[str, float]]:
    """(dotted key, value) of every numeric leaf of a config: what a sweep may vary."""
    return [(k, float(v)) for k, v in dotted_items(to_plain(cfg))
            if isinstance(v, (int, float)) and not isinstance(v, bool) and k.split(".")[0] != "domain"]


def sweep_block(axes: list[dict[str, Any]], combine: str, replicates: int,
                metrics: list[str]) -> dict[str, Any]:
    """The ``sweep:`` mapping for the chosen axes (start/stop/num/scale each)."""
    params = [{"key": a["key"], "range": {"start": a["start"], "stop": a["stop"], "num": a["num"],
                                          "scale": a["scale"]}} for a in axes]
    return {"parameters": params, "combine": combine, "replicates": replicates, "metrics": metrics}


class SweepThread(QThread):
    """Plans, starts the cluster and runs the sweep; rows come back through ``row``."""

    row = Signal(dict, int, int)
    done = Signal(dict)
    failed = Signal(str, str)

    def __init__(self, config_path: Path, out: Path, backend: str, workers: int | None,
                 scheduler: str | None):
        super().__init__()
        self.args = (config_path, out, backend, workers, scheduler)
        self.run_handle = None

    def run(self) -> None:
        from app.sweep.runner import SweepRun, plan_sweep, start_cluster

        config_path, out, backend, workers, scheduler = self.args
        try:
            plan = plan_sweep(config_path, out, backend)
            log.info("sweep of %d points: %s", len(plan.tasks), plan.estimate)   # the log dock shows it
            cluster = start_cluster(backend, workers, scheduler)
            try:
                self.run_handle = SweepRun(plan, cluster, lambda r, d, t: self.row.emit(dict(r), d, t))
                result = self.run_handle.run()
            finally:
                cluster.close()
            self.done.emit(result.summary)
        except Exception as exc:          # reported in the dialog, never raised into Qt
            self.failed.emit(*errors.describe(exc))

    def stop(self) -> None:
        if self.run_handle is not None:
            self.run_handle.stop()


class SweepDialog(QDialog):
    """Sweep the current config of ``panel``; non-modal, one sweep at a time."""

    def __init__(self, panel, parent: QWidget | None = None):
        super().__init__(parent)
        self.panel = panel
        self.setWindowTitle(f"Sweep — {panel.domain.label}")
        self.resize(1100, 700)
        self.thread: SweepThread | None = None
        self.out: Path | None = None
        self.rows: list[dict] = []
        cfg = panel.current_config()
        self.keys = numeric_keys(cfg)
        module = sweep_metrics.domain_metrics(panel.domain.module)
        self.axes = QTableWidget(0, len(COLUMNS))
        self.axes.setHorizontalHeaderLabels(["key", "start", "stop", "values", "scale"])
        header = self.axes.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)   # the key takes what is left
        header.setStretchLastSection(False)
        self.axes.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        add, remove = QPushButton("Add key"), QPushButton("Remove key")
        add.clicked.connect(lambda: self.add_axis())
        remove.clicked.connect(self.remove_axis)
        self.combine = QComboBox()
        self.combine.addItems(["grid", "zip"])
        self.combine.setToolTip("grid: every combination of the keys' values; zip: element by element")
        self.replicates = QSpinBox()
        self.replicates.setRange(1, 10_000)
        self.replicates.setToolTip("runs per point, with seeds seed, seed+1, ...")
        self.metrics = QListWidget()
        for name, fn in module.METRICS.items():
            item = QListWidgetItem(name)
            item.setToolTip((fn.__doc__ or "").strip())
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(Qt.CheckState.Checked if name in module.DEFAULT_METRICS
                               else Qt.CheckState.Unchecked)
            self.metrics.addItem(item)
        self.workers = QSpinBox()
        self.workers.setRange(1, 4096)
        self.workers.setValue(os.cpu_count() or 1)
        self.workers.setToolTip("local Dask workers (one per GPU when CUDA runs)")
        self.scheduler = QLineEdit()
        self.scheduler.setPlaceholderText("empty: a local cluster; or tcp://host:8786")
        self.out_edit = QLineEdit(str(Path("runs") / f"{panel.domain.name}-sweep-{time.strftime('%Y%m%d-%H%M%S')}"))
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._browse)
        self.run_button, self.stop_button = QPushButton("Run sweep"), QPushButton("Stop")
        self.stop_button.setEnabled(False)
        self.run_button.clicked.connect(self.start)
        self.stop_button.clicked.connect(self.stop)
        self.progress = QProgressBar()
        self.view = SweepView()
        self.view.point_clicked.connect(self.open_point)

        form = QFormLayout()
        form.addRow("Combine", self.combine)
        form.addRow("Replicates", self.replicates)
        form.addRow("Local workers", self.workers)
        form.addRow("Scheduler", self.scheduler)
        out_row = QHBoxLayout()
        out_row.addWidget(self.out_edit, 1)
        out_row.addWidget(browse)
        form.addRow("Output folder", out_row)
        buttons = QHBoxLayout()
        buttons.addWidget(add)
        buttons.addWidget(remove)
        keys_box = QGroupBox("Swept keys")
        keys_layout = QVBoxLayout(keys_box)
        keys_layout.addWidget(self.axes)
        keys_layout.addLayout(buttons)
        metrics_box = QGroupBox("Metrics kept per point")
        QVBoxLayout(metrics_box).addWidget(self.metrics)
        left = QWidget()
        left_layout = QVBoxLayout(left)
        left_layout.addWidget(keys_box, 2)
        left_layout.addLayout(form)
        left_layout.addWidget(metrics_box, 1)
        run_row = QHBoxLayout()
        run_row.addWidget(self.run_button)
        run_row.addWidget(self.stop_button)
        left_layout.addLayout(run_row)
        left_layout.addWidget(self.progress)
        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.addWidget(left)
        splitter.addWidget(self.view)
        splitter.setStretchFactor(1, 1)
        splitter.setSizes([560, 540])
        QVBoxLayout(self).addWidget(splitter)
        if self.keys:
            self.add_axis()

    # ---- the keys ---------------------------------------------------------------------------
    def add_axis(self, key: str | None = None) -> None:
        """A row for ``key`` (default: the first key not swept yet), spanning value/2 .. value*2."""
        taken = {self.axes.cellWidget(r, 0).currentText() for r in range(self.axes.rowCount())}
        names = [k for k, _ in self.keys]
        key = key or next((k for k in names if k not in taken), names[0])
        row = self.axes.rowCount()
        self.axes.insertRow(row)
        combo = QComboBox()
        combo.addItems(names)
        combo.setCurrentText(key)
        start, stop = QLineEdit(), QLineEdit()
        num = QSpinBox()
        num.setRange(1, 100_000)
        num.setValue(5)
        scale = QComboBox()
        scale.addItems(["linear", "log"])

        def fill(name: str) -> None:
            v = dict(self.keys)[name]
            lo, hi = (v / 2, v * 2) if v > 0 else (v - 1, v + 1) if v == 0 else (v * 2, v / 2)
            start.setText(f"{lo:g}")
            stop.setText(f"{hi:g}")
            scale.setCurrentText("log" if v > 0 else "linear")

        combo.currentTextChanged.connect(fill)
        fill(key)
        for col, widget in enumerate((combo, start, stop, num, scale)):
            self.axes.setCellWidget(row, col, widget)
        self._fit_axis_columns()

    def _fit_axis_columns(self) -> None:
        """Each column as wide as its header and its widgets ask (ResizeToContents sees no cell
        widgets: the "scale" column and the spin boxes were cut); the table asks for the sum."""
        header = self.axes.horizontalHeader()
        total = 0
        for col in range(self.axes.columnCount()):
            need = header.sectionSizeHint(col)
            for r in range(self.axes.rowCount()):
                widget = self.axes.cellWidget(r, col)
                if widget is not None:
                    need = max(need, widget.sizeHint().width() + 4)
            if col > 0:
                header.resizeSection(col, need)
            total += need
        bar = self.axes.verticalScrollBar().sizeHint().width()
        self.axes.setMinimumWidth(total + self.axes.verticalHeader().sizeHint().width() + bar
                                  + 2 * self.axes.frameWidth())

    def remove_axis(self) -> None:
        rows = sorted({i.row() for i in self.axes.selectedIndexes()} or {self.axes.rowCount() - 1})
        for r in reversed(rows):
            if r >= 0:
                self.axes.removeRow(r)

    def axes_values(self) -> list[dict[str, Any]]:
        """The rows as ``{key, start, stop, num, scale}``; raises ValueError on a bad number."""
        out = []
        for r in range(self.axes.rowCount()):
            key = self.axes.cellWidget(r, 0).currentText()
            try:
                start = float(self.axes.cellWidget(r, 1).text())
                stop = float(self.axes.cellWidget(r, 2).text())
            except ValueError:
                raise ValueError(f"'{key}': start and stop must be numbers") from None
            out.append({"key": key, "start": start, "stop": stop,
                        "num": self.axes.cellWidget(r, 3).value(),
                        "scale": self.axes.cellWidget(r, 4).currentText()})
        return out

    def chosen_metrics(self) -> list[str]:
        return [self.metrics.item(i).text() for i in range(self.metrics.count())
                if self.metrics.item(i).checkState() == Qt.CheckState.Checked]

    # ---- running ----------------------------------------------------------------------------
    def sweep_config(self) -> dict[str, Any]:
        """The panel's validated config with the dialog's ``sweep:`` block."""
        cfg = self.panel.validate(self.panel.current_config())
        data = to_plain(cfg)
        data["sweep"] = sweep_block(self.axes_values(), self.combine.currentText(),
                                    self.replicates.value(), self.chosen_metrics())
        return data

    def start(self) -> bool:
        """Write ``OUT/sweep.yaml`` and run it; errors are shown, never raised."""
        if self.thread is not None:
            return False
        try:
            if not self.axes.rowCount():
                raise ValueError("add at least one key to sweep")
            data = self.sweep_config()
            self.out = Path(self.out_edit.text()).expanduser()
            path = save_text(self.out / "sweep.yaml", yaml.safe_dump(data, sort_keys=False))
        except Exception as exc:
            errors.report_exception(self, "Cannot start the sweep", exc)
            return False
        backend = self.panel.run_device()[0]
        scheduler = self.scheduler.text().strip() or None
        self.rows = []
        self.progress.setValue(0)
        self.thread = SweepThread(path, self.out, backend, self.workers.value(), scheduler)
        self.thread.row.connect(self._row)
        self.thread.done.connect(self._done)
        self.thread.failed.connect(self._failed)
        self.thread.finished.connect(self._thread_ended)
        self.run_button.setEnabled(False)
        self.stop_button.setEnabled(True)
        self.thread.start()
        return True

    def stop(self) -> None:
        if self.thread is not None:
            self.thread.stop()

    def _row(self, row: dict, done: int, total: int) -> None:
        self.rows.append(row)
        self.progress.setMaximum(total)
        self.progress.setValue(done)
        self.progress.setFormat(f"{done} of {total} runs")
        keys = [a["key"] for a in self.axes_values()] if self.axes.rowCount() else []
        self.view.set_rows(self.rows, keys)

    def _done(self, summary: dict) -> None:
        log.info("sweep: %d of %d points finished (%d reused, %d failed) in %.1f s on %s",
                 summary["finished"], summary["points"], summary["reused"], summary["failed"],
                 summary["wall_seconds"], summary["cluster"])
        self.view.set_rows(self.rows, summary["keys"])

    def _failed(self, message: str, detail: str) -> None:
        errors.report_error(self, "The sweep failed", message, detail)

    def _thread_ended(self) -> None:
        self.thread = None
        self.run_button.setEnabled(True)
        self.stop_button.setEnabled(False)

    def open_point(self, name: str) -> None:
        """Open a point's run config in the panel (its results stay under the sweep folder)."""
        if self.out is None:
            return
        path = self.out / "points" / name / "config.yaml"
        try:
            self.panel.load_config(path)
        except Exception as exc:
            errors.report_exception(self, "Cannot open the sweep point", exc)

    def closeEvent(self, event) -> None:
        if self.thread is not None:
            self.thread.stop()
            self.thread.wait(30_000)
        super().closeEvent(event)

    def _browse(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Sweep output folder")
        if folder:
            self.out_edit.setText(folder)
