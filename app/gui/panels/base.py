"""The panel base: controls on the left, live views on the right, one run at a time.

Subclasses fill :attr:`Panel.controls_layout` and :attr:`Panel.views`, and implement
:meth:`apply_config`, :meth:`current_config`, :meth:`on_frame`, :meth:`clear_views` and
:meth:`export_data`. Loading, saving, running and error handling live here.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Callable, Iterable

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QComboBox, QFileDialog, QGridLayout, QGroupBox, QHBoxLayout, QLabel,
                               QPushButton, QScrollArea, QSplitter, QVBoxLayout, QWidget)

from app.compute.device import cuda_status, resolve_backend
from app.gui import errors
from app.gui.runner import RunControls, RunState, SimulationWorker
from app.sims.common.config import ConfigError, Document, dump_yaml, to_plain
from app.sims.common.output import save_text
from app.sims.common.simulation import Domain, Frame, default_preset, load_run_config, presets

log = logging.getLogger(__name__)

# () -> (backend, device_index, reason): supplied by the main window's device selector.
DeviceProvider = Callable[[], tuple[str, int, str]]


def cpu_device() -> tuple[str, int, str]:
    return "cpu", 0, "CPU engine"


class Panel(QWidget):
    """One domain's page: a scrollable controls column, run controls and a views splitter.

    Signals
    -------
    status_changed(str)
        One line for the main window's status bar (throughput of the running simulation).
    """

    status_changed = Signal(str)
    CONTROLS_WIDTH = 330

    def __init__(self, domain: Domain, device: DeviceProvider = cpu_device,
                 parent: QWidget | None = None):
        super().__init__(parent)
        self.domain = domain
        self.device = device
        self.worker: SimulationWorker | None = None
        self.backend: QComboBox | None = None
        self.preset_combo: QComboBox | None = None
        self.last_frame: Frame | None = None
        self.config_path: Path | None = None
        self.run_controls = RunControls()
        self.controls_layout = QVBoxLayout()
        self.views = QSplitter(Qt.Orientation.Vertical)
        self.views.setChildrenCollapsible(False)
        self._build_frame()
        rc = self.run_controls
        rc.run_clicked.connect(self.start_run)
        rc.pause_clicked.connect(self.pause_run)
        rc.resume_clicked.connect(self.resume_run)
        rc.stop_clicked.connect(self.stop_run)
        rc.reset_clicked.connect(self.reset)

    def _build_frame(self) -> None:
        inner = QWidget()
        inner.setLayout(self.controls_layout)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(inner)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        left = QWidget()
        left_layout = QVBoxLayout(left)
        left_layout.setContentsMargins(0, 0, 0, 0)
        left_layout.addWidget(self.run_controls)
        left_layout.addWidget(scroll, 1)
        left.setFixedWidth(self.CONTROLS_WIDTH)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(left)
        layout.addWidget(self.views, 1)

    # ---- to implement -------------------------------------------------------------------
    def apply_config(self, cfg: Any) -> None:
        """Show ``cfg`` in the controls."""
        raise NotImplementedError

    def current_config(self) -> Any:
        """The validated config the controls describe; raises ConfigError."""
        raise NotImplementedError

    def export_data(self, path: str | Path) -> Path:
        """Write the current data (CSV or NPZ by suffix)."""
        raise NotImplementedError

    def clear_views(self) -> None:
        raise NotImplementedError

    def require_frame(self) -> Frame:
        """The last frame, for an export; RuntimeError before the first run has drawn one."""
        if self.last_frame is None:
            raise RuntimeError("nothing to export yet: run the simulation first")
        return self.last_frame

    def on_frame(self, frame: Frame) -> None:
        """Draw a new frame (GUI thread, at most ~30 Hz)."""

    def on_finished(self, arrays: dict, summary: dict) -> None:
        """The run ended (finished or stopped)."""

    def run_device(self) -> tuple[str, int, str]:
        """(backend, device index, reason) for the next run: the panel's backend combo when it
        names one, else the toolbar's device."""
        choice = self.backend.currentData() if self.backend is not None else None
        if choice is None:
            return self.device()
        backend, reason = resolve_backend(choice)
        return backend, 0, reason

    def backend_combo(self) -> QComboBox:
        """The panel's backend choice (toolbar device, compiled CPU, NumPy reference, CUDA); CUDA is disabled with the
        reason as its tooltip where it cannot run. Sets :attr:`backend`."""
        self.backend = QComboBox()
        self.backend.addItem("Toolbar device", None)
        self.backend.addItem("CPU (compiled)", "cpu")
        self.backend.addItem("CPU reference (NumPy)", "cpu-reference")
        self.backend.addItem("CUDA", "cuda")
        status = cuda_status()
        if not status.available:
            cuda_row = self.backend.findData("cuda")
            self.backend.model().item(cuda_row).setEnabled(False)
            self.backend.setItemData(cuda_row, status.reason, Qt.ItemDataRole.ToolTipRole)
        return self.backend

    def status_text(self, frame: Frame) -> str:
        return f"{frame.throughput:.3g} {frame.throughput_unit}, {frame.status}"

    # ---- configs ------------------------------------------------------------------------
    def load_config(self, path: str | Path) -> None:
        """Load a run config file of this domain into the controls; raises ConfigError."""
        domain, cfg = load_run_config(path)
        if domain.name != self.domain.name:
            raise ConfigError(f"this is a {domain.label} config, not {self.domain.label}", str(path))
        self.apply_config(cfg)
        self.config_path = Path(path)
        if self.preset_combo is not None:      # show the file among the presets
            resolved = str(Path(path).resolve())
            index = self.preset_combo.findData(resolved)
            if index < 0:
                self.preset_combo.addItem(f"file: {Path(path).name}", resolved)
                index = self.preset_combo.count() - 1
            self.preset_combo.setCurrentIndex(index)
        log.info("loaded %s", path)

    def validate(self, cfg: Any) -> Any:
        """``cfg`` checked by the domain's loader: the same checks as a file (no YAML text)."""
        return self.domain.load().load_config(Document(to_plain(cfg), {}))

    def save_config(self, path: str | Path) -> Path:
        out = save_text(path, dump_yaml(self.current_config()))
        log.info("saved run config to %s", out)
        return out

    def save_screenshot(self, path: str | Path) -> Path:
        """A PNG of the views area, written atomically."""
        from app.gui.export import save_png

        out = save_png(self.views.grab(), path)
        log.info("saved screenshot to %s", out)
        return out

    # ---- running ------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self.worker is not None and self.worker.isRunning()

    def make_worker(self, cfg: Any, backend: str, index: int) -> SimulationWorker:
        worker = SimulationWorker(self.domain, cfg, backend, index, parent=self)
        worker.frame_ready.connect(self._frame_ready)
        worker.run_finished.connect(self._run_finished)
        worker.failed.connect(self._run_failed)
        return worker

    def start_run(self) -> bool:
        """Validate the controls and start a run on the selected device; False on error."""
        if self.running:
            return False
        try:
            cfg = self.current_config()
            backend, index, reason = self.run_device()
        except Exception as exc:
            errors.report_exception(self, "Cannot start the run", exc)
            return False
        self.clear_views()
        self.last_frame = None
        log.info("%s run on %s (%s)", self.domain.name, backend, reason)
        if self.worker is not None:
            self.worker.deleteLater()
        self.worker = self.make_worker(cfg, backend, index)
        self.run_controls.set_state(RunState.RUNNING)
        self.worker.start()
        return True

    def pause_run(self) -> None:
        if self.running:
            self.worker.pause()
            self.run_controls.set_state(RunState.PAUSED)
            self.status_changed.emit("paused")

    def live_changes(self) -> dict[str, Any]:
        """Settings edited while paused that the running simulation takes (none here); raises
        ConfigError for a bad or a fixed setting."""
        return {}

    def changes_sent(self, changes: dict[str, Any]) -> None:
        """``changes`` went to the paused run (a panel that tracks the run's settings updates them)."""

    def resume_run(self) -> None:
        """Send the settings changed while paused (:meth:`live_changes`) to the run, then resume it."""
        if not self.running:
            return
        if self.worker.paused:
            try:
                changes = self.live_changes()
            except Exception as exc:
                errors.report_exception(self, "Cannot resume with these settings", exc)
                return
            if changes:
                self.worker.session.request_update(changes)
                self.changes_sent(changes)
                log.info("%s: for the rest of the run: %s", self.domain.name,
                         ", ".join(f"{k} = {v:g}" if isinstance(v, float) else f"{k} = {v}"
                                   for k, v in changes.items()))
        self.worker.resume()
        self.run_controls.set_state(RunState.RUNNING)

    def stop_run(self) -> None:
        if self.worker is not None:
            self.worker.stop()

    def reset(self) -> None:
        """Forget the last run and clear the views."""
        if self.running:
            return
        self.last_frame = None
        self.clear_views()
        self.run_controls.set_state(RunState.IDLE)
        self.status_changed.emit("")

    # ---- shared GUI actions (errors reported, never raised) ----------------------------
    def attempt(self, title: str, action: Callable[..., Any], *args: Any) -> Any:
        """Call ``action(*args)``; an exception is shown under ``title`` and None returned."""
        try:
            return action(*args)
        except Exception as exc:
            errors.report_exception(self, title, exc)
            return None

    def ask_file(self, title: str, pattern: str, action: Callable[[str], Any], *, save: bool = False,
                 directory: str = "", default_suffix: str = "") -> Any:
        """Ask for a file (to open, or to save) and hand it to ``action`` through :meth:`attempt`."""
        dialog = QFileDialog.getSaveFileName if save else QFileDialog.getOpenFileName
        path, _ = dialog(self, title, directory, pattern)
        if not path:
            return None
        if save and default_suffix and not Path(path).suffix:
            path += default_suffix
        return self.attempt(title, action, path)

    def ask_export(self, kind: str, pattern: str) -> None:
        """Ask where to write export ``kind`` (a Qt filter like 'PLY (*.ply)'), then call
        the panel's ``export(kind, path)``."""
        suffix = "." + pattern.split("*.")[1].rstrip(")")
        self.ask_file(f"Export {kind}", pattern, lambda path: self.export(kind, path), save=True,
                      default_suffix=suffix)

    def export_group(self, exports: Iterable[tuple[str, str, str, str]]) -> QGroupBox:
        """An Export group with a button per ``(text, kind, Qt file filter, tooltip)``, two to a
        row, each asking for a file and calling the panel's ``export(kind, path)``. Sets
        :attr:`export_buttons` (kind -> button)."""
        box = QGroupBox("Export")
        grid = QGridLayout(box)
        self.export_buttons: dict[str, QPushButton] = {}
        for k, (text, kind, pattern, tip) in enumerate(exports):
            button = QPushButton(text)
            button.setToolTip(tip)
            button.clicked.connect(lambda _=False, kind=kind, pattern=pattern: self.ask_export(kind, pattern))
            grid.addWidget(button, k // 2, k % 2)
            self.export_buttons[kind] = button
        return box

    def preset_picker(self, title: str = "Preset", files: list[Path] | None = None
                      ) -> tuple[QGroupBox, QComboBox, QLabel]:
        """A group with the domain's presets (or ``files``), an Open YAML button and a description
        line; picking either loads that run config. Sets :attr:`preset_combo` and
        :attr:`description`."""
        box = QGroupBox(title)
        combo = QComboBox()
        for path in presets(self.domain.name) if files is None else files:
            combo.addItem(path.stem, str(path.resolve()))
        button = QPushButton("Open YAML…")
        description = QLabel()
        description.setWordWrap(True)
        row = QHBoxLayout()
        row.addWidget(combo, 1)
        row.addWidget(button)
        layout = QVBoxLayout(box)
        layout.addLayout(row)
        layout.addWidget(description)
        combo.activated.connect(
            lambda index: self.attempt("Cannot open the run config", self.load_config, combo.itemData(index)))
        button.clicked.connect(
            lambda: self.ask_file("Open run config", "YAML (*.yaml *.yml)", self.load_config))
        self.preset_combo, self.description = combo, description
        return box, combo, description

    def open_default_preset(self) -> None:
        """Open the domain's default preset; a broken one is logged and never breaks the window."""
        try:
            self.load_config(default_preset(self.domain.name))
        except Exception as exc:
            log.warning("%s panel: default preset not loaded: %s", self.domain.name, exc)

    def shutdown(self) -> None:
        """Stop any running worker and wait for it (the window is closing)."""
        for worker in self.findChildren(SimulationWorker):
            if worker.isRunning():
                worker.stop_and_wait()

    def _frame_ready(self, frame: Frame) -> None:
        self.last_frame = frame
        self.run_controls.set_progress(frame.progress)
        self.status_changed.emit(self.status_text(frame))
        self.on_frame(frame)

    def _run_finished(self, arrays: dict, summary: dict) -> None:
        self.run_controls.set_state(RunState.FINISHED)
        if self.last_frame is not None:
            self.run_controls.set_progress(self.last_frame.progress)
        self.on_finished(arrays, summary)

    def _run_failed(self, message: str, detail: str) -> None:
        self.run_controls.set_state(RunState.FINISHED)
        errors.report_error(self, f"{self.domain.label}: the run failed", message, detail)
