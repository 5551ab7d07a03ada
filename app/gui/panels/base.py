"""The panel base: controls on the left, live views on the right, one run at a time.

Subclasses fill :attr:`Panel.controls_layout` and :attr:`Panel.views`, and implement
:meth:`apply_config`, :meth:`current_config`, :meth:`on_frame`, :meth:`clear_views` and
:meth:`export_data`. Loading, saving, running and error handling live here.
"""

from __future__ import annotations

import html
import logging
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterable

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QComboBox, QFileDialog, QFrame, QGridLayout, QGroupBox, QHBoxLayout,
                               QLabel, QPushButton, QScrollArea, QSizePolicy, QSplitter, QVBoxLayout,
                               QWidget)

from app.compute.device import cuda_status, resolve_backend
from app.gui import errors
from app.gui.presets import (default_for_engine, estimate_range, format_range, preset_config, preset_for,
                             work)
from app.gui.runner import RunControls, RunState, SimulationWorker, flush_paints
from app.gui.steering import BrushTool, EventMarks, SteeringBox, config_values
from app.sims.common.config import ConfigError, Document, dump_yaml, to_plain
from app.sims.common.estimate import rate_key
from app.sims.common.output import save_text
from app.sims.common.session import steerables_of
from app.sims.common.simulation import Domain, Frame, load_run_config, presets
from app.sims.common.warmup import has_compiled_engine, key_of, service

log = logging.getLogger(__name__)

# () -> (backend, device_index, reason): supplied by the main window's device selector.
DeviceProvider = Callable[..., tuple[str, int, str]]   # (prefer_cpu=None) -> (backend, index, reason)


def with_values(cfg: Any, events: Any) -> Any:
    """``cfg`` with the values of the events whose key is a path of the config (what forms that
    steer show after the run); other events (rates, regions) leave it as it is."""
    from app.gui.forms import replace_paths

    for event in events:
        try:
            cfg = replace_paths(cfg, {event.key: event.value})
        except (AttributeError, TypeError, ValueError):
            continue
    return cfg


def cpu_device(prefer_cpu: str | None = None) -> tuple[str, int, str]:
    return "cpu", 0, "CPU engine"


class Panel(QWidget):
    """One domain's page: run controls over a scrollable controls column, beside the views, in a
    resizable splitter (the column never clips: it scrolls, and its splitter handle moves).

    Signals
    -------
    status_changed(str)
        One line for the main window's status bar (throughput of the running simulation).
    """

    status_changed = Signal(str)
    loaded_changed = Signal(str)  # what the controls now hold (file, preset, session), for the title
    REST_PREVIEW = False          # draw a loaded config's initial state before Run (app.gui.preview)
    CONTROLS_WIDTH = 330          # the controls column's least starting width (it grows to fit)
    MOVIE_VIEW = ""               # attribute naming the widget an MP4 of the run shows ("": none)
    MOVIE_FPS = 10.0

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
        self.role_buttons: dict[str, QPushButton] = {}
        self.record_next_movie = False
        self.live_movie = None        # a MovieRecorder while (and after) a recorded run
        self.estimate_label: QLabel | None = None
        self.loaded = ""              # what the controls hold, in words (the window title shows it)
        self._previews: list = []     # RestPreview threads still running
        self._newest_preview = None   # the only one whose picture is drawn (an older one may end later)
        self.last_estimate = ""       # 'last run: 12 s (expected 8-20 s)'
        self._expected: tuple[float, float] | None = None
        # gestures made before Run, applied by the next runs at their step 0 (key, value, region)
        self.pending_steering: list[tuple[str, Any, Any]] = []
        self.event_marks: list[EventMarks] = []     # the plots' time axes that mark steering events
        self.steering: SteeringBox | None = None      # controls of the declared steerables
        self.brush: BrushTool | None = None           # the declared region gestures
        self.steered_forms: list[tuple[Any, str]] = []  # (ConfigForm, config prefix) that steer runs
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
        self.controls_scroll = scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(inner)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        left = QWidget()
        left.setObjectName("controlsColumn")
        left_layout = QVBoxLayout(left)
        left_layout.setContentsMargins(0, 0, 0, 0)
        left_layout.addWidget(self.run_controls)
        left_layout.addWidget(scroll, 1)
        left.setMinimumWidth(self.run_controls.minimumSizeHint().width())
        left.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Expanding)
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.setObjectName("panelSplitter")
        self.splitter.setChildrenCollapsible(False)
        self.stale_label = QLabel()
        self.stale_label.setObjectName("staleLabel")
        self.stale_label.setWordWrap(True)
        self.stale_label.setStyleSheet("background: #fff3cd; color: #664d03; padding: 3px;")
        self.stale_label.hide()
        right = QWidget()
        right_layout = QVBoxLayout(right)
        right_layout.setContentsMargins(0, 0, 0, 0)
        right_layout.addWidget(self.stale_label)
        right_layout.addWidget(self.views, 1)
        self.splitter.addWidget(left)
        self.splitter.addWidget(right)
        self.splitter.setStretchFactor(0, 0)
        self.splitter.setStretchFactor(1, 1)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.splitter)

    def controls_width(self) -> int:
        """The width the controls column needs to show every control at its size hint."""
        inner = self.controls_scroll.widget()
        needed = max(inner.sizeHint().width(), inner.minimumSizeHint().width())
        bar = self.controls_scroll.verticalScrollBar().sizeHint().width()
        return max(self.CONTROLS_WIDTH, needed + bar + 2, self.run_controls.sizeHint().width())

    def fit_controls(self) -> None:
        """Give the controls column the width it needs, as far as the views' least width allows."""
        total = max(sum(self.splitter.sizes()), self.width())
        views = self.splitter.widget(1).minimumSizeHint().width()
        left = min(self.controls_width(), total - views) if total > 0 else self.controls_width()
        self.splitter.setSizes([left, max(total - left, 1)])

    def showEvent(self, event) -> None:
        if not getattr(self, "_fitted", False):
            self._fitted = True
            self.fit_controls()
        super().showEvent(event)
        if getattr(self, "_rest_pending", False) and not self.running:
            self.show_rest()

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

    def run_device(self, cfg: Any = None) -> tuple[str, int, str]:
        """(backend, device index, reason) for the next run (of ``cfg``, where given): the
        panel's backend combo when it names one, else the toolbar's device; the toolbar's
        'auto' takes the CPU for a config the domain runs faster there (a single cell)."""
        choice = self.backend.currentData() if self.backend is not None else None
        if choice is None:
            return self.device(prefer_cpu=self.domain.cpu_preference(cfg))
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
        self.mark_loaded(Path(path).name, f"file: {Path(path).name}", str(Path(path).resolve()))
        if not self.running:                   # the last run's numbers belong to another config
            self.run_controls.set_state(RunState.IDLE)
            self.status_changed.emit("")
        self.refresh_estimates()
        log.info("loaded %s", path)

    def mark_loaded(self, text: str, item: str = "", data: str | None = None) -> None:
        """Say what the controls now hold: ``text`` for the window title, ``item`` shown in the
        preset box (a preset's own entry when ``data`` names its file); the last run's views
        are marked as belonging to the previous model, and the model at rest is drawn."""
        self.loaded = text
        self.pending_steering.clear()           # gestures belonged to the previous model
        if self.preset_combo is not None and item:
            key = data if data is not None else item
            index = self.preset_combo.findData(key)
            if index < 0:
                item = self.preset_combo.fontMetrics().elidedText(
                    item, Qt.TextElideMode.ElideMiddle, getattr(self, "_combo_text_px", 200))
                self.preset_combo.addItem(item, key)
                index = self.preset_combo.count() - 1
                self.preset_combo.setItemData(index, key, Qt.ItemDataRole.ToolTipRole)
            self.preset_combo.setCurrentIndex(index)
        if not self.running:
            if self.last_frame is None:        # only a picture at rest of the previous config
                self.clear_views()
            self.set_stale(self.last_frame is not None)
            self.show_rest()
        self.loaded_changed.emit(text)

    def method_note(self) -> str:
        """What the Help method page says is loaded now (plain text; "" for nothing)."""
        return self.loaded

    def set_stale(self, on: bool) -> None:
        """Mark (or unmark) the views as results of a previous model."""
        self.stale_label.setText("Stale: these results belong to the previous model; "
                                 "Run to replace them (Reset clears them).")
        self.stale_label.setVisible(on)

    def show_rest(self) -> None:
        """Draw the model's initial state (panels with :attr:`REST_PREVIEW`), off the GUI thread."""
        if not self.REST_PREVIEW:
            return
        if not self.isVisible():               # built when the panel is first shown
            self._rest_pending = True
            return
        self._rest_pending = False
        self._newest_preview = None            # a preview still running is for an older config
        try:
            cfg = self.current_config()
        except Exception as exc:  # noqa: BLE001  (an invalid form has no picture; Run says why)
            log.debug("no picture at rest: %s", exc)
            return
        if not self.rest_preview_wanted(cfg):
            return
        from app.gui.preview import RestPreview

        preview = RestPreview(self.domain, cfg, self)
        preview.ready.connect(lambda frame, p=preview: self._rest_ready(p, frame))
        preview.finished.connect(lambda p=preview: self._previews.remove(p) if p in self._previews else None)
        self._previews.append(preview)
        self._newest_preview = preview
        preview.start()

    def rest_preview_wanted(self, cfg: Any) -> bool:
        """Whether ``cfg`` is small enough to build a second time just for its picture."""
        return True

    def _rest_ready(self, preview, frame: Frame) -> None:
        if self.running or preview is not self._newest_preview:
            return                             # a run, or a newer config, came first
        self.last_frame = None
        self.clear_views()
        self.set_stale(False)
        self.draw_rest(frame)

    def draw_rest(self, frame: Frame) -> None:
        """Draw the initial frame of a loaded config (not a result: exports still refuse)."""
        self.on_frame(frame)

    def validate(self, cfg: Any) -> Any:
        """``cfg`` checked by the domain's loader: the same checks as a file (no YAML text)."""
        return self.domain.load().load_config(Document(to_plain(cfg), {}))

    def save_config(self, path: str | Path) -> Path:
        """The controls' config; after a steered run whose config the controls still hold (as it
        started, or with the values steered through the forms), that run's starting config with
        its ``steering:`` list (the file replays the run)."""
        cfg = self.current_config()
        steered = self.steered_run_config()
        if steered is not None and hasattr(cfg, "steering"):
            shown = replace(cfg, steering=())
            start = replace(steered, steering=())
            if shown in (start, with_values(start, steered.steering)):
                cfg = steered
        out = save_text(path, dump_yaml(cfg))
        log.info("saved run config to %s%s", out,
                 f" with {len(cfg.steering)} steering events" if getattr(cfg, "steering", ()) else "")
        return out

    def steered_run_config(self) -> Any:
        """The last run's config with the events applied in it (None: no steered run)."""
        if self.worker is None or not self.worker.session.events:
            return None
        return self.worker.session.steered_config()

    def save_screenshot(self, path: str | Path) -> Path:
        """The views area as PNG, or as a vector figure (SVG, PDF), by suffix; atomic."""
        from app.gui.export import save_figure

        out = save_figure(self.views, path)
        log.info("saved screenshot to %s", out)
        return out

    # ---- running ------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self.worker is not None and self.worker.isRunning()

    def make_worker(self, cfg: Any, backend: str, index: int) -> SimulationWorker:
        worker = SimulationWorker(self.domain, cfg, backend, index, parent=self)
        worker.frame_ready.connect(self._frame_ready)
        worker.progress_ready.connect(self.run_controls.set_progress)
        worker.preparing.connect(self._preparing)
        worker.run_finished.connect(self._run_finished)
        worker.failed.connect(self._run_failed)
        return worker

    def start_run(self) -> bool:
        """Validate the controls and start a run on the selected device; False on error."""
        if self.running:
            return False
        try:
            cfg = self.current_config()
            backend, index, reason = self.run_device(cfg)
        except Exception as exc:
            errors.report_exception(self, "Cannot start the run", exc)
            return False
        self.clear_views()
        self.set_stale(False)
        self.last_frame = None
        log.info("%s run on %s (%s)", self.domain.name, backend, reason)
        if self.worker is not None:
            self.worker.deleteLater()
        self.worker = self.make_worker(cfg, backend, index)
        try:
            for key, value, region in self.pending_steering:     # the gestures made before Run
                self.worker.session.steer(key, value, region)
        except Exception as exc:
            errors.report_exception(self, "Cannot start the run with these changes", exc)
            self.pending_steering.clear()
            return False
        try:
            self._expected = self.estimate(cfg)
        except Exception:                 # noqa: BLE001  (an estimate never stops a run)
            self._expected = None
        self._start_movie()
        self.run_controls.set_state(RunState.RUNNING)
        flush_paints()
        self.worker.start()
        return True

    def _preparing(self, text: str) -> None:
        """The run waits for its compiled engine (on the reference engine meanwhile)."""
        self.run_controls.set_preparing(text)
        if text:
            self.status_changed.emit(text)

    def pause_run(self) -> None:
        if self.running:
            self.worker.pause()
            self.run_controls.set_state(RunState.PAUSED)
            self.status_changed.emit("paused")

    def resume_run(self) -> None:
        """Resume a paused run (changes made meanwhile were steered as they were made)."""
        if not self.running:
            return
        self.worker.resume()
        self.run_controls.set_state(RunState.RUNNING)

    def steering_box(self, title: str = "Steer while running") -> SteeringBox:
        """The controls of the loaded config's declared steerables (numbers as sliders from
        :meth:`steer_values`), each use a :meth:`steer`. Sets :attr:`steering`; filled by
        :meth:`refresh_steering`."""
        self.steering = SteeringBox(title)
        self.steering.setObjectName("steeringBox")
        self.steering.steered.connect(lambda key, value: self.steer(key, value))
        return self.steering

    def brush_tool(self, unit: str = "mm") -> BrushTool:
        """The region gestures a click or drag on the panel's view paints. Sets :attr:`brush`."""
        self.brush = BrushTool("Brush (click or drag on the view)", unit)
        self.brush.setObjectName("brushTool")
        return self.brush

    def steer_form(self, form: Any, prefix: str = "") -> None:
        """Make the fields of ``form`` (a :class:`~app.gui.forms.ConfigForm` of the config part
        at ``prefix``) steer the running simulation: during a run (paused or not), a changed
        field whose key the domain declares live is a :meth:`steer` at once (refused: the field
        shows the run's value again); one that needs a restart applies to the next run (the status
        bar says so). Spin boxes report a value once it is entered
        (Enter, focus out, arrows), not per keystroke. The steering box leaves these keys out."""
        from PySide6.QtWidgets import QAbstractSpinBox, QCheckBox, QComboBox, QLineEdit

        self.steered_forms.append((form, prefix))
        for path, widget in form.widgets.items():
            changed = lambda *_, path=path: self._form_changed(form, prefix, path)   # noqa: E731
            if isinstance(widget, QAbstractSpinBox):
                widget.setKeyboardTracking(False)
                widget.valueChanged.connect(changed)
            elif isinstance(widget, QCheckBox):
                widget.toggled.connect(changed)
            elif isinstance(widget, QComboBox):
                widget.activated.connect(changed)
            elif isinstance(widget, QLineEdit):
                widget.editingFinished.connect(changed)

    def _form_changed(self, form: Any, prefix: str, path: str) -> None:
        from app.gui.forms import get_path, get_value, set_value

        if not self.running:
            return
        key = f"{prefix}.{path}" if prefix else path
        session = self.worker.session
        if key not in session.steerables:
            return                                  # not the running model's: the next run's
        if not session.steerables[key].live:
            note = f"{key} needs a restart: it applies to the next run"
            log.info("%s: %s", self.domain.name, note)
            self.status_changed.emit(note)
            return
        widget = form[path]
        try:
            value = get_value(form.specs[path], widget)
            now = next((e.value for e in reversed(session.events) if e.key == key),
                       get_path(self.worker.cfg, key))
        except Exception as exc:  # noqa: BLE001  (a malformed entry: Run will say so)
            log.debug("%s: not steered: %s", key, exc)
            return
        if value == now or self.steer(key, value):
            return
        widget.blockSignals(True)                   # refused: the field shows the run's value
        set_value(widget, now)
        widget.blockSignals(False)

    def steer_values(self, cfg: Any) -> dict[str, Any]:
        """The current value of each steerable (key -> value): those whose key is a config path."""
        return config_values(cfg, steerables_of(cfg))

    def refresh_steering(self, cfg: Any) -> None:
        """Controls and brush gestures for ``cfg`` (a newly loaded model)."""
        try:
            declared = steerables_of(cfg)
            values = self.steer_values(cfg)
        except Exception as exc:  # noqa: BLE001  (a model without live controls still runs)
            log.warning("%s: no steering controls: %s", self.domain.name, exc)
            declared, values = (), {}
        if self.steering is not None:
            in_forms = {f"{prefix}.{path}" if prefix else path
                        for form, prefix in self.steered_forms for path in form.widgets}
            self.steering.set_steerables([s for s in declared if s.key not in in_forms], values)
        if self.brush is not None:
            self.brush.set_steerables(declared, values)

    def paint(self, centre: Any) -> bool:
        """A dab of the brush's gesture at ``centre`` (view coordinates: mm, model units)."""
        stroke = self.brush.stroke(centre) if self.brush is not None else None
        return stroke is not None and self.steer(*stroke)

    def steer(self, key: str, value: Any, region: Any = None) -> bool:
        """Change ``key`` to ``value`` (in ``region``, for a painted gesture): in the running
        simulation at its next step boundary, recorded as an event; before Run, at the next runs'
        step 0. A refused change is reported (False), never raised."""
        try:
            if self.running:
                self.worker.session.steer(key, value, region)
            else:
                self.pending_steering.append((key, value, region))
        except Exception as exc:
            errors.report_exception(self, f"Cannot change {key}", exc)
            return False
        log.info("%s: %s = %s%s%s", self.domain.name, key, value, f" in {region}" if region else "",
                 "" if self.running else " (from the start of the next run)")
        return True

    def stop_run(self) -> None:
        if self.worker is not None:
            self.worker.stop()

    def reset(self) -> None:
        """Forget the last run and clear the views."""
        if self.running:
            return
        self.last_frame = None
        self.pending_steering.clear()
        self.clear_views()
        self.set_stale(False)
        self.run_controls.set_state(RunState.IDLE)
        self.status_changed.emit("")
        self.show_rest()

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

    open_label = "Open YAML…"              # a domain that opens other model files says so here
    open_filter = "YAML (*.yaml *.yml)"

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
        """A group with the domain's presets (or ``files``), an Open button, the Paper scale and
        Lesson buttons (with the expected run time) and a description line; each loads a run
        config. Sets :attr:`preset_combo` and :attr:`description`."""
        box = QGroupBox(title)
        combo = QComboBox()
        for path in presets(self.domain.name) if files is None else files:
            combo.addItem(path.stem, str(path.resolve()))
        combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        # an opened file's entry is elided to the presets' width: a long name never widens the column
        self._combo_text_px = max([combo.fontMetrics().horizontalAdvance(combo.itemText(i))
                                   for i in range(combo.count())] + [140])
        button = QPushButton(self.open_label)
        description = QLabel()
        description.setWordWrap(True)
        row = QHBoxLayout()
        row.addWidget(combo, 1)
        row.addWidget(button)
        layout = QVBoxLayout(box)
        layout.addLayout(row)
        roles = QHBoxLayout()
        for role, text, tip in (
                ("paper", "Paper scale", "Load the paper-scale run (its expected time is shown below)"),
                ("lesson", "Lesson", "Load a teaching run; its description says what to look for")):
            path = preset_for(self.domain.name, role)
            if path is None:
                continue
            role_button = QPushButton(text)
            role_button.setObjectName(f"{role}PresetButton")
            role_button.setToolTip(f"{tip}\n{path.name}")
            role_button.clicked.connect(
                lambda _=False, p=path: self.attempt("Cannot open the run config", self.load_config, p))
            roles.addWidget(role_button)
            self.role_buttons[role] = role_button
        roles.addStretch(1)
        layout.addLayout(roles)
        self.estimate_label = QLabel()
        self.estimate_label.setObjectName("estimateLabel")
        self.estimate_label.setWordWrap(True)
        layout.addWidget(self.estimate_label)
        layout.addWidget(description)
        combo.activated.connect(
            lambda index: self.attempt("Cannot open the run config", self.load_config, combo.itemData(index)))
        button.clicked.connect(
            lambda: self.ask_file("Open run config", self.open_filter, self.load_config))
        self.preset_combo, self.description = combo, description
        return box, combo, description

    def show_description(self, title: str, *lines: str) -> None:
        """``title`` in bold over ``lines`` in the description label, as text: a config's
        "y <= 10 mm" must not open an HTML tag that swallows the rest."""
        parts = [f"<b>{html.escape(title)}</b>"] + [html.escape(line.strip()) for line in lines]
        self.description.setText("<br>".join(parts))

    # ---- run-time estimates -------------------------------------------------------------
    def estimate(self, cfg: Any) -> tuple[float, float] | None:
        """(low, high) expected wall seconds of ``cfg`` on the panel's engine: this machine's
        measured rate for the same model class, plus the compile while the engine is cold;
        None where no run of that class was measured."""
        from app.gui.settings import measured_rates

        backend = self.run_device(cfg)[0]
        name = self.domain.name
        cold = backend == "cpu" and has_compiled_engine(name) and not service().status(key_of(name, cfg)).ready
        return estimate_range(name, cfg, backend, measured_rates(), cold)

    def refresh_estimates(self) -> None:
        """Show the expected run time of this config and of the paper-scale preset on the
        engine the next run would use (and the last run's estimate against its actual time)."""
        if self.estimate_label is None:
            return
        try:
            cfg = self.current_config()
            backend = self.run_device(cfg)[0]
            engine = "CUDA" if backend == "cuda" else "the CPU"
            parts = []
            current = self.estimate(cfg)
            parts.append(f"this run: {format_range(*current)}" if current is not None
                         else "this run: not measured yet for this model here")
            paper = preset_for(self.domain.name, "paper")
            if paper is not None:
                seconds = self.estimate(preset_config(paper))
                if seconds is not None:
                    parts.append(f"paper scale: {format_range(*seconds)}")
                    if "paper" in self.role_buttons:
                        self.role_buttons["paper"].setText(f"Paper scale ({format_range(*seconds)})")
            text = f"Expected on {engine}: " + "; ".join(parts)
            if self.last_estimate:
                text += f"\n{self.last_estimate}"
            self.estimate_label.setText(text)
        except Exception as exc:      # an estimate never stops a panel from working
            log.debug("no estimate: %s", exc)
            self.estimate_label.setText("")

    def open_default_preset(self) -> None:
        """Open the preset sized for the panel's engine (roles.yaml); a broken one is logged
        and never breaks the window."""
        try:
            self.load_config(default_for_engine(self.domain.name, self.run_device()[0]))
        except Exception as exc:
            log.warning("%s panel: default preset not loaded: %s", self.domain.name, exc)

    def shutdown(self) -> None:
        """Stop any running worker and wait for it (the window is closing)."""
        for preview in list(self._previews):
            preview.wait()
        for worker in self.findChildren(SimulationWorker):
            if worker.isRunning() and not worker.stop_and_wait():
                # still inside a compile, which cannot be interrupted: a QThread destroyed
                # while running aborts the process, so wait for it to come out
                log.warning("%s: waiting for the engine to finish compiling before closing",
                            self.domain.name)
                worker.wait()

    # ---- movies of the live view ----------------------------------------------------------
    def supports_movie(self) -> bool:
        """Whether runs of this panel can be recorded as MP4 (a moving picture to record)."""
        return bool(self.MOVIE_VIEW) or hasattr(self, "record_movie")

    def set_movie_recording(self, on: bool) -> None:
        """Record the next runs' live view as a movie (the epidermis panel: its own checkbox)."""
        own = getattr(self, "record_movie", None)
        if own is not None:
            own.setChecked(on)
        self.record_next_movie = bool(on)

    def movie_image(self):
        """The live view now, as an (H, W, 4) uint8 array."""
        import numpy as np

        from PySide6.QtGui import QImage

        image = getattr(self, self.MOVIE_VIEW).grab().toImage().convertToFormat(
            QImage.Format.Format_RGBA8888)
        data = np.frombuffer(image.constBits(), np.uint8, image.sizeInBytes())
        return data.reshape(image.height(), image.bytesPerLine() // 4, 4)[:, :image.width()].copy()

    def save_movie(self, path: str | Path) -> Path:
        """Write the movie of the last recorded run (MP4)."""
        if hasattr(self, "record_movie"):
            return self.export("mp4", path)
        if self.live_movie is None:
            raise RuntimeError("no movie recorded: turn on Run › Record movie, then run")
        return self.live_movie.save(path)

    def _start_movie(self) -> None:
        if self.live_movie is not None:
            self.live_movie.discard()
            self.live_movie = None
        if self.record_next_movie and self.MOVIE_VIEW:
            from app.gui.movie import MovieRecorder, movie_support

            why = movie_support()
            if why:
                log.warning("no movie: %s", why)
            else:
                self.live_movie = MovieRecorder(self.MOVIE_FPS)

    def show_frame(self, frame: Frame) -> None:
        """Draw a saved frame (a reopened session) as the result of a finished run."""
        self.clear_views()
        self._frame_ready(frame)
        self.run_controls.set_state(RunState.FINISHED)
        self.run_controls.set_progress(frame.progress)

    def _frame_ready(self, frame: Frame) -> None:
        self.last_frame = frame
        self.set_stale(False)
        self.run_controls.set_progress(frame.progress)
        self.status_changed.emit(self.status_text(frame))
        self.on_frame(frame)
        for marks in self.event_marks:
            marks.set_events(getattr(frame, "events", ()))
        if self.live_movie is not None:             # a finished movie takes no more frames
            try:
                self.live_movie.add(self.movie_image())
            except Exception as exc:  # noqa: BLE001  (a movie never stops a run)
                log.warning("movie recording stopped: %s", exc)
                self.live_movie.discard()
                self.live_movie = None

    def _run_finished(self, arrays: dict, summary: dict) -> None:
        self.run_controls.set_state(RunState.FINISHED)
        self._record_rate(summary)
        if self.live_movie is not None:
            self.live_movie.finish()
        if self.last_frame is not None:
            self.run_controls.set_progress(self.last_frame.progress)
        self.on_finished(arrays, summary)

    def _record_rate(self, summary: dict) -> None:
        """A finished run's work per wall second, for the next estimates of its model class on
        this engine (not a run that ran partly on the reference engine), and its time against
        the estimate it started with."""
        wall = summary.get("wall_seconds") if summary else None
        if (not summary or not wall or self.worker is None or self.worker.session.stopped
                or summary.get("finished") is False):     # a stopped run did not do the work
            return
        actual = self.worker.run_seconds or float(wall)
        expected = f"expected {format_range(*self._expected)}" if self._expected else "no estimate"
        self.last_estimate = f"last run: {actual:.1f} s ({expected})"
        log.info("%s run took %.1f s (%s)", self.domain.name, actual, expected)
        amount = work(self.domain.name, self.worker.cfg)
        if amount > 0 and "engines" not in summary:
            from app.gui.settings import record_rate

            record_rate(rate_key(self.domain.name, self.worker.cfg, self.worker.backend),
                        amount / float(wall))
        self.refresh_estimates()

    def _run_failed(self, message: str, detail: str) -> None:
        self.run_controls.set_state(RunState.FINISHED)
        errors.report_error(self, f"{self.domain.label}: the run failed", message, detail)
