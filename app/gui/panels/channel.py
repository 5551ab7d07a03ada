"""The channel-fitting panel: a Markov channel model fitted to voltage-clamp traces by a GA.

Controls (tabs in the left column): *Model* — preset picker, the model YAML editor validated as
you type, and the parameter table (name, min, max, true value) that writes back into the
YAML; *Fit* — protocol file, target data (surrogate / CSV / ABF), GA settings, backend, and the
exports. Views: convergence (best and median chi^2 against generation or wall time, log
scale), the best individual's normalised parameters against generation, and the best fit
over the data for every sweep. The status bar shows generations/s and evaluations/s.

Pause, change GA settings (crossover, mutation, creep, creep fraction, chi^2 threshold,
generations), Resume: the changes reach the running GA through ``Session.request_update``
before its next generation. Population and seed are fixed for a run.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QComboBox, QFileDialog, QFormLayout, QGroupBox, QHBoxLayout, QLabel,
                               QLineEdit, QPushButton, QSplitter, QTabWidget, QVBoxLayout, QWidget)

from app.gui import errors
from app.gui.forms import ConfigForm
from app.gui.panels.base import DeviceProvider, Panel, cpu_device
from app.gui.panels.channel_data import (export_best_parameters, export_history, export_npz,
                                         export_traces)
from app.gui.panels.channel_model import ModelEditor, ParameterTable
from app.gui.runner import RunState, SimulationWorker
from app.gui.views.convergence import ConvergenceView
from app.gui.views.parameter_history import ParameterHistoryView
from app.gui.views.sweep_fit import SweepFitView
from app.sims.channel.config import ChannelConfig, DataSpec, GASettings, resolve
from app.sims.channel.model import ChannelSpec
from app.sims.channel.protocol import ProtocolSpec, compile_protocols
from app.sims.common.config import ConfigError, build, convert, dump_yaml, load_yaml, parse_yaml
from app.sims.common.simulation import RESOURCES, Domain, default_preset, presets

log = logging.getLogger(__name__)

PROTOCOLS = RESOURCES / "protocols" / "channel"
DATA_SOURCES = (("Surrogate (model's true values)", "surrogate"), ("CSV file", "csv"),
                ("ABF file", "abf"))
# GA settings that may change between generations, and their widgets' attribute names.
LIVE_SETTINGS = ("generations", "crossover", "mutation", "creep", "creep_fraction", "chi2_threshold")
INLINE = "<inline>"


def short_number(x: float) -> str:
    """3.2e6 style for large rates, plain for small ones."""
    if x >= 1e4:
        mantissa, exponent = f"{x:.2e}".split("e")
        return f"{mantissa}e{int(exponent)}"
    return f"{x:.3g}"


def load_protocol_file(path: str | Path) -> list[ProtocolSpec]:
    """The protocol families of a file (a list, or a mapping with ``protocols``); validated."""
    doc = load_yaml(path)
    key = ("protocols",) if isinstance(doc.data, dict) and "protocols" in doc.data else ()
    data = doc.data["protocols"] if key else doc.data
    specs = convert(list[ProtocolSpec], data, doc, key)
    compile_protocols(specs, doc, key)
    return specs


class ChannelPanel(Panel):
    """Controls and live views of a GA channel fit."""

    CONTROLS_WIDTH = 400

    def __init__(self, domain: Domain, device: DeviceProvider = cpu_device, parent=None):
        super().__init__(domain, device, parent)
        self.base_cfg: ChannelConfig | None = None
        self.protocols: list[ProtocolSpec] = []
        self._inline_protocols: list[ProtocolSpec] = []
        self.run_cfg: ChannelConfig | None = None     # the config of the current / last run
        self.run_ga: GASettings | None = None         # GA settings the running GA has now
        self.tabs = QTabWidget()
        self.tabs.addTab(self._build_model_tab(), "Model")
        self.tabs.addTab(self._build_fit_tab(), "Fit")
        self.controls_layout.setContentsMargins(0, 0, 0, 0)
        self.controls_layout.addWidget(self.tabs)
        self._build_views()
        # The Run button also needs a valid model: re-check whenever the run state changes.
        self._set_state = self.run_controls.set_state
        self.run_controls.set_state = self._set_run_state
        self.model_editor.validated.connect(self._model_validated)
        self._update_run_button()
        try:                                   # open on the default preset, like SSA
            self.load_config(default_preset("channel"))
        except Exception as exc:
            errors.report_exception(self, "Cannot open the default channel preset", exc)

    # ---- construction -------------------------------------------------------------------
    def _build_model_tab(self) -> QWidget:
        page = QWidget()
        layout = QVBoxLayout(page)
        box, self.preset_combo, self.description = self.preset_picker("Run config", presets(self.domain.name))
        layout.addWidget(box)
        self.model_editor = ModelEditor()
        self.model_editor.editor.setMinimumHeight(260)
        self.table = ParameterTable()
        self.table.setMinimumHeight(200)
        self.table_problem = QLabel()
        self.table_problem.setWordWrap(True)
        self.table_problem.setStyleSheet("color: #b00020")
        table_box = QWidget()
        table_layout = QVBoxLayout(table_box)
        table_layout.setContentsMargins(0, 0, 0, 0)
        table_layout.addWidget(QLabel("<b>Parameters</b> (search range and true value)"))
        table_layout.addWidget(self.table, 1)
        table_layout.addWidget(self.table_problem)
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.model_editor)
        split.addWidget(table_box)
        split.setChildrenCollapsible(False)
        split.setSizes([420, 260])
        layout.addWidget(split, 1)
        self.table.edited.connect(self._table_edited)
        self.table.problem.connect(self._table_problem)
        return page

    def _build_fit_tab(self) -> QWidget:
        page = QWidget()
        layout = QVBoxLayout(page)
        layout.addWidget(self._build_protocol_group())
        layout.addWidget(self._build_data_group())
        layout.addWidget(self._build_ga_group())
        layout.addWidget(self._build_export_group())
        layout.addStretch(1)
        return page

    def _build_protocol_group(self) -> QGroupBox:
        box = QGroupBox("Protocol")
        self.protocol_combo = QComboBox()
        for path in sorted(PROTOCOLS.glob("*.yaml")):
            self.protocol_combo.addItem(path.stem, str(path.resolve()))
        self.protocol_open = QPushButton("Open…")
        self.protocol_info = QLabel()
        self.protocol_info.setWordWrap(True)
        row = QHBoxLayout()
        row.addWidget(self.protocol_combo, 1)
        row.addWidget(self.protocol_open)
        layout = QVBoxLayout(box)
        layout.addLayout(row)
        layout.addWidget(self.protocol_info)
        self.protocol_combo.activated.connect(self._protocol_chosen)
        self.protocol_open.clicked.connect(self._ask_protocol)
        return box

    def _build_data_group(self) -> QGroupBox:
        box = QGroupBox("Target data")
        self.data_fields = ConfigForm(DataSpec)
        self.data_source = QComboBox()
        for label, key in DATA_SOURCES:
            self.data_source.addItem(label, key)
        self.data_path = QLineEdit()
        self.data_path.setPlaceholderText("file with one column per sweep")
        self.data_browse = QPushButton("Browse…")
        path_row = QWidget()
        row = QHBoxLayout(path_row)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.data_path, 1)
        row.addWidget(self.data_browse)
        self.data_form = QFormLayout(box)
        self.data_form.addRow("Source", self.data_source)
        self.data_fields.rows(self.data_form, [("noise_sd", "Noise SD (pA)"), ("seed", "Noise seed")])
        self.data_form.addRow("File", path_row)
        self.data_fields.rows(self.data_form, [("channel", "ABF channel")])
        self.data_fields.expose(self, {"seed": "data_seed", "channel": "abf_channel"})
        self.data_source.currentIndexChanged.connect(self._source_changed)
        self.data_browse.clicked.connect(self._ask_data)
        self._source_changed()
        return box

    def _build_ga_group(self) -> QGroupBox:
        self.ga_form = ConfigForm(GASettings, hints={"mutation": {"decimals": 5, "step": 0.001}})
        box = self.ga_form.group("Genetic algorithm", ["population", "generations", "crossover", "mutation",
                                                       ("creep", "Creep step"), "creep_fraction",
                                                       ("chi2_threshold", "χ² threshold"), "seed"])
        self.ga_form.expose(self, {"seed": "ga_seed"})
        self.chi2_threshold.setToolTip("stop when the best chi² reaches this value (0: never)")
        box.layout().addRow("Backend", self.backend_combo())
        self.ga_note = QLabel("Pause, change settings, Resume: the GA continues with them "
                              "(population and seed are fixed for a run).")
        self.ga_note.setWordWrap(True)
        self.ga_note.setStyleSheet("color: #555")
        box.layout().addRow(self.ga_note)
        return box

    def _build_export_group(self) -> QGroupBox:
        box = QGroupBox("Export")
        self.export_buttons = {}
        layout = QVBoxLayout(box)
        for key, text in (("params", "Best parameters (YAML)…"), ("traces", "Fitted traces (CSV)…"),
                          ("history", "Convergence history (CSV)…"), ("npz", "All arrays (NPZ)…")):
            button = QPushButton(text)
            button.clicked.connect(lambda _=False, k=key: self._ask_export(k))
            self.export_buttons[key] = button
        grid = QHBoxLayout()
        grid.addWidget(self.export_buttons["params"])
        grid.addWidget(self.export_buttons["traces"])
        layout.addLayout(grid)
        grid = QHBoxLayout()
        grid.addWidget(self.export_buttons["history"])
        grid.addWidget(self.export_buttons["npz"])
        layout.addLayout(grid)
        return box

    def _build_views(self) -> None:
        self.convergence = ConvergenceView()
        self.parameters = ParameterHistoryView()
        self.fit = SweepFitView()
        top = QSplitter(Qt.Orientation.Horizontal)
        top.addWidget(self.convergence)
        top.addWidget(self.parameters)
        top.setChildrenCollapsible(False)
        self.views.addWidget(top)
        self.views.addWidget(self.fit)
        self.views.setSizes([380, 420])

    # ---- configs ------------------------------------------------------------------------
    def apply_config(self, cfg: ChannelConfig) -> None:
        self.base_cfg = cfg
        self.description.setText(f"<b>{cfg.name}</b><br>{cfg.description.strip()}")
        if cfg.model_file:                     # a model file shows as written
            path = Path(cfg.model_file)
            self.model_editor.set_text(path.read_text(encoding="utf-8"), path.name)
        else:
            self.model_editor.set_text(dump_yaml(cfg.model), "<model>")
        self._set_protocols(cfg.protocols, Path(cfg.protocols_file) if cfg.protocols_file else None)
        d = cfg.data
        self.data_source.setCurrentIndex(self.data_source.findData(d.source))
        self.data_fields.show(d)
        self.data_path.setText(str(resolve(d.path, cfg.base_dir)) if d.path and _exists(d.path, cfg.base_dir)
                               else (d.path or ""))
        self.ga_form.show(cfg.ga)

    def set_protocol_file(self, path: str | Path) -> None:
        """Use the protocol families of ``path``; raises ConfigError for a bad file."""
        path = Path(path).resolve()
        self._set_protocols(load_protocol_file(path), path)

    def _set_protocols(self, specs: list[ProtocolSpec], path: Path | None) -> None:
        key = str(path.resolve()) if path is not None else INLINE
        index = self.protocol_combo.findData(key)
        if index < 0:
            label = "inline (from the run config)" if path is None else f"file: {path.name}"
            if path is None and (old := self.protocol_combo.findData(INLINE)) >= 0:
                self.protocol_combo.removeItem(old)
            self.protocol_combo.addItem(label, key)
            index = self.protocol_combo.count() - 1
        self.protocol_combo.setCurrentIndex(index)
        self.protocols = list(specs)
        if path is None:
            self._inline_protocols = list(specs)
        protocol = compile_protocols(self.protocols)
        self.protocol_info.setText(f"{len(specs)} families, {len(protocol.sweeps)} sweeps, "
                                   f"{protocol.n_points:,} fitted points")

    def ga_settings(self) -> GASettings:
        """The GA settings the widgets show; raises ConfigError."""
        ga = self.ga_form.read(self.base_cfg.ga if self.base_cfg is not None else GASettings())
        doc = parse_yaml(dump_yaml(ga), "<GA settings>")
        return build(GASettings, doc.data, doc)

    def data_spec(self) -> DataSpec:
        source = self.data_source.currentData()
        path = self.data_path.text().strip() or None
        if source != "surrogate" and not path:
            raise ConfigError(f"data: choose a {source.upper()} file")
        return replace(self.data_fields.read(DataSpec()), source=source,
                       path=path if source != "surrogate" else None)

    def model_spec(self) -> ChannelSpec:
        """The edited model (the editor, as validated now); raises ConfigError."""
        spec = self.model_editor.validate_now()
        if spec is None:
            raise ConfigError(f"the model is not valid: {self.model_editor.error}")
        if self.table.errors:
            raise ConfigError("parameter table: " + "; ".join(self.table.errors[k] for k in sorted(self.table.errors)))
        return spec

    def current_config(self) -> ChannelConfig:
        if self.base_cfg is None:
            raise ConfigError("no model loaded")
        cfg = replace(self.base_cfg, model=self.model_spec(), protocols=list(self.protocols),
                      data=self.data_spec(), ga=self.ga_settings())
        return self.validate(cfg)

    # ---- running ------------------------------------------------------------------------
    def make_worker(self, cfg: ChannelConfig, backend: str, index: int) -> SimulationWorker:
        worker = super().make_worker(cfg, backend, index)
        self.run_cfg, self.run_ga = cfg, cfg.ga
        self.run_protocol = cfg.protocol()
        for box in (self.population, self.ga_seed):
            box.setEnabled(False)
        worker.finished.connect(self._run_ended)
        return worker

    def _run_ended(self) -> None:
        for box in (self.population, self.ga_seed):
            box.setEnabled(True)

    def live_changes(self) -> dict[str, Any]:
        """The live GA settings changed since the run started (or last resumed); validated."""
        settings = self.ga_settings()
        old = self.run_ga or settings
        return {k: getattr(settings, k) for k in LIVE_SETTINGS if getattr(settings, k) != getattr(old, k)}

    def changes_sent(self, changes: dict[str, Any]) -> None:
        self.run_ga = replace(self.run_ga, **changes)

    def status_text(self, frame) -> str:
        gens = frame.generation / frame.wall_seconds if frame.wall_seconds > 0 else 0.0
        return (f"{gens:.3g} generations/s, {short_number(frame.evaluations_per_second)} evaluations/s, "
                f"generation {frame.generation}, best χ² {frame.best_chi2:.4g}")

    def on_frame(self, frame) -> None:
        self.convergence.set_frame(frame)
        self.parameters.set_frame(frame)
        self.fit.set_frame(frame)

    def on_finished(self, arrays: dict, summary: dict) -> None:
        if summary:
            log.info("channel fit: best chi2 %.6g after %d generations, %.3g evaluations/s on %s",
                     summary.get("best_chi2", float("nan")), summary.get("generations", 0),
                     summary.get("evaluations_per_second", 0.0), summary.get("backend", "?"))

    def clear_views(self) -> None:
        self.convergence.clear()
        self.parameters.clear()
        self.fit.clear()

    # ---- exports ------------------------------------------------------------------------
    def _frame(self):
        if self.last_frame is None:
            raise RuntimeError("nothing to export yet: run the fit first")
        return self.last_frame

    def export_best_parameters(self, path: str | Path) -> Path:
        return export_best_parameters(path, self._frame())

    def export_traces(self, path: str | Path) -> Path:
        return export_traces(path, self._frame(), self.run_protocol)

    def export_history(self, path: str | Path) -> Path:
        return export_history(path, self._frame())

    def export_data(self, path: str | Path) -> Path:
        """By suffix: .yaml best parameters, .npz all arrays, .csv the fitted traces (or the
        convergence history when the file name contains 'history' or 'convergence')."""
        path = Path(path)
        suffix, stem = path.suffix.lower(), path.stem.lower()
        if suffix in (".yaml", ".yml"):
            out = self.export_best_parameters(path)
        elif suffix == ".csv":
            history = "history" in stem or "convergence" in stem
            out = self.export_history(path) if history else self.export_traces(path)
        else:
            out = export_npz(path, self._frame())
        log.info("exported %s", out)
        return out

    # ---- GUI actions --------------------------------------------------------------------
    def _set_run_state(self, state: RunState) -> None:
        self._set_state(state)
        self._update_run_button()

    def _update_run_button(self) -> None:
        rc = self.run_controls
        idle = rc.state not in (RunState.RUNNING, RunState.PAUSED)
        ok = self.model_editor.valid and not self.table.errors
        rc.run_button.setEnabled(idle and ok)
        rc.run_button.setToolTip("" if ok else "fix the model first (see the message under the editor)")

    def _model_validated(self, spec: ChannelSpec | None) -> None:
        if spec is not None:
            self.table.set_parameters(spec.parameters)
            self.table.setEnabled(True)
        else:
            self.table.setEnabled(False)
        self._update_run_button()

    def _table_edited(self, params) -> None:
        try:
            self.model_editor.set_parameters(params)
        except Exception as exc:
            errors.report_exception(self, "Cannot change the parameters", exc)

    def _table_problem(self, text: str) -> None:
        self.table_problem.setText(text)
        self._update_run_button()

    def _source_changed(self) -> None:
        source = self.data_source.currentData()
        for widget, visible in ((self.noise_sd, source == "surrogate"), (self.data_seed, source == "surrogate"),
                                (self.data_path.parentWidget(), source != "surrogate"),
                                (self.abf_channel, source == "abf")):
            widget.setVisible(visible)
            self.data_form.labelForField(widget).setVisible(visible)

    def _protocol_chosen(self, index: int) -> None:
        key = self.protocol_combo.itemData(index)
        try:
            if key == INLINE:
                self._set_protocols(self._inline_protocols, None)
            else:
                self.set_protocol_file(key)
        except Exception as exc:
            errors.report_exception(self, "Cannot use the protocol", exc)

    def _ask_protocol(self) -> None:
        self.ask_file("Open protocol file", "YAML (*.yaml *.yml)", self.set_protocol_file,
                      directory=str(PROTOCOLS))

    def _ask_data(self) -> None:
        source = self.data_source.currentData()
        pattern = "CSV (*.csv *.txt)" if source == "csv" else "Axon binary (*.abf)"
        path, _ = QFileDialog.getOpenFileName(self, "Target data", "", pattern)
        if path:
            self.data_path.setText(path)

    def _ask_export(self, kind: str) -> None:
        names = {"params": ("best-parameters.yaml", "YAML (*.yaml)", self.export_best_parameters),
                 "traces": ("fitted-traces.csv", "CSV (*.csv)", self.export_traces),
                 "history": ("convergence.csv", "CSV (*.csv)", self.export_history),
                 "npz": ("results.npz", "NumPy archive (*.npz)", lambda p: export_npz(p, self._frame()))}
        default, pattern, write = names[kind]
        out = self.ask_file("Export", pattern, write, save=True, directory=default,
                            default_suffix=Path(default).suffix)
        if out is not None:
            log.info("exported %s", out)

def _exists(path: str, base_dir: str) -> bool:
    try:
        resolve(path, base_dir)
        return True
    except ConfigError:
        return False


__all__ = ["ChannelPanel", "load_protocol_file"]
