"""The channel-fitting panel: a Markov channel model fitted to voltage-clamp traces.

Controls (tabs in the left column): *Model* — preset picker, the model YAML editor validated as
you type, and the parameter table (name, min, max, true value) that writes back into the
YAML; *Fit* — protocol file, target data (surrogate / CSV / ABF / recordings per family),
the search (GA or CMA-ES), the refinement (Levenberg–Marquardt or Nelder–Mead), intervals and
MCMC, backend, and the exports (results and the fitted model as YAML, Myokit, NMODL). Views:
convergence (best and median chi^2 against step or wall time, log scale, a line where the
optimiser changes), the best point's normalised parameters, and tabs with the best fit over
the data for every sweep and the uncertainty (intervals table, warnings, corner plot).

GA settings (crossover, mutation, creep, creep fraction, chi^2 threshold, generations) changed
while the fit runs are steering events: the GA takes them before its next generation, and the
run's config.yaml replays them. Population and seed are fixed for a run.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QComboBox, QFileDialog, QFormLayout, QGroupBox, QHBoxLayout,
                               QHeaderView, QLabel, QLineEdit, QPushButton, QSplitter, QTableWidget,
                               QTableWidgetItem, QTabWidget, QVBoxLayout, QWidget)

from app.gui import errors
from app.gui.forms import ConfigForm
from app.gui.panels.base import DeviceProvider, Panel, cpu_device
from app.gui.panels.channel_data import (export_best_parameters, export_history, export_npz,
                                         export_traces)
from app.gui.panels.channel_model import ModelEditor, ParameterTable
from app.gui.runner import RunState, SimulationWorker
from app.gui.views.convergence import ConvergenceView
from app.gui.views.intervals import IntervalsView
from app.gui.views.parameter_history import ParameterHistoryView
from app.gui.views.sweep_fit import SweepFitView
from app.gui.steering import EventMarks
from app.sims.channel.config import ChannelConfig, DataSpec, FitSettings, GASettings, resolve
from app.sims.channel.recordings import FamilyData
from app.sims.channel.model import ChannelSpec
from app.sims.channel.protocol import ProtocolSpec, compile_protocols
from app.sims.common.config import ConfigError, build, convert, dump_yaml, load_yaml, parse_yaml
from app.sims.common.simulation import RESOURCES, Domain, default_preset, presets

log = logging.getLogger(__name__)

PROTOCOLS = RESOURCES / "protocols" / "channel"
DATA_SOURCES = (("Surrogate (model's true values)", "surrogate"), ("CSV file", "csv"),
                ("ABF file", "abf"), ("Recordings per family", "recordings"))
FAMILY_COLUMNS = ("family", "file", "protocol", "mask ms", "weight")
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
        layout.addWidget(self.steering_box("Steer the running fit"))
        layout.addWidget(self._build_fit_group())
        self._optimizer_changed()
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
        self.families = QTableWidget(0, len(FAMILY_COLUMNS))
        self.families.setHorizontalHeaderLabels(FAMILY_COLUMNS)
        # paths run long: every column as wide as its text, the table scrolls sideways
        self.families.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.families.horizontalHeader().setStretchLastSection(True)
        self.families.setToolTip("one recording per protocol family (CSV, ABF or NWB); protocol "
                                 "'file' reads the family's sweeps from the ABF command waveform. "
                                 "Sweep maps, leak subtraction and windows come from the run config.")
        self.families.setMinimumHeight(110)
        self.family_browse = QPushButton("File for the selected family…")
        self.family_browse.clicked.connect(self._ask_family_file)
        self.data_form = QFormLayout(box)
        self.data_form.addRow("Source", self.data_source)
        self.data_fields.rows(self.data_form, [("noise_sd", "Noise SD (pA)"), ("seed", "Noise seed")])
        self.data_form.addRow("File", path_row)
        self.data_fields.rows(self.data_form, [("channel", "ABF channel")])
        self.data_fields.expose(self, {"seed": "data_seed", "channel": "abf_channel"})
        self.data_form.addRow("Families", self.families)
        self.data_form.addRow(self.family_browse)
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
        self.steer_form(self.ga_form, "ga")
        self.chi2_threshold.setToolTip("stop when the best chi² reaches this value (0: never)")
        box.layout().addRow("Backend", self.backend_combo())
        self.ga_note = QLabel("Change a setting while the fit runs: the GA takes it from its next "
                              "generation (population and seed are fixed for a run).")
        self.ga_note.setWordWrap(True)
        self.ga_note.setStyleSheet("color: #555")
        box.layout().addRow(self.ga_note)
        self.ga_box = box
        return box

    GA_ONLY = ("crossover", "mutation", "creep", "creep_fraction")
    CMA_ONLY = ("sigma", "stall")

    def _optimizer_changed(self, *_: Any) -> None:
        """Show the settings of the chosen search only: with CMA-ES the GA's crossover, mutation
        and creep rows are hidden and the group says it holds the search settings both share."""
        cma = self.fit_form["optimizer"].currentText().lower().startswith("cma")
        self.ga_box.setTitle("Search (CMA-ES): population, generations, stop, seed" if cma
                             else "Genetic algorithm")
        for form, names, shown in ((self.ga_form, self.GA_ONLY, not cma),
                                   (self.fit_form, self.CMA_ONLY, cma)):
            layout = (self.ga_box if form is self.ga_form else self.fit_box).layout()
            for name in names:
                widget = form[name]
                widget.setVisible(shown)
                label = layout.labelForField(widget)
                if label is not None:
                    label.setVisible(shown)
        self.ga_note.setVisible(not cma)

    def _build_fit_group(self) -> QGroupBox:
        self.fit_form = ConfigForm(FitSettings)
        box = self.fit_form.group("Optimiser, refinement, uncertainty", [
            ("optimizer", "Search"), ("sigma", "CMA-ES σ"), ("stall", "CMA-ES stall generations"),
            ("refine", "Refinement"), "refine_iterations",
            ("uncertainty", "Gauss–Newton intervals and correlations at the end"),
            ("mcmc_chains", "MCMC chains"), ("mcmc_steps", "MCMC steps")])
        self.fit_form.expose(self, {"uncertainty": "intervals_on"})
        self.steer_form(self.fit_form, "fit")
        note = QLabel("CMA-ES uses the population, generations, χ² threshold and seed above; "
                      "the refinement and intervals run in float64 on the CPU.")
        note.setWordWrap(True)
        note.setStyleSheet("color: #555")
        box.layout().addRow(note)
        self.fit_box = box
        self.fit_form["optimizer"].currentTextChanged.connect(self._optimizer_changed)
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
        grid = QHBoxLayout()
        for key, text in (("model", "Model (YAML)…"), ("myokit", "Myokit .mmt…"), ("nmodl", "NEURON .mod…")):
            button = QPushButton(text)
            button.clicked.connect(lambda _=False, k=key: self._ask_export(k))
            self.export_buttons[key] = button
            grid.addWidget(button)
        layout.addLayout(grid)
        grid = QHBoxLayout()
        for key, text in (("neuroml", "NeuroML2 channel…"), ("nwb", "Fit as NWB…")):
            button = QPushButton(text)
            button.clicked.connect(lambda _=False, k=key: self._ask_export(k))
            self.export_buttons[key] = button
            grid.addWidget(button)
        layout.addLayout(grid)
        return box

    def _build_views(self) -> None:
        self.convergence = ConvergenceView()
        self.event_marks.append(EventMarks(self.convergence.plot, self.event_generation))
        self.parameters = ParameterHistoryView()
        self.fit = SweepFitView()
        self.uncertainty = IntervalsView()
        top = QSplitter(Qt.Orientation.Horizontal)
        top.addWidget(self.convergence)
        top.addWidget(self.parameters)
        top.setChildrenCollapsible(False)
        self.views.addWidget(top)
        self.bottom_tabs = QTabWidget()
        self.bottom_tabs.addTab(self.fit, "Fit to the data")
        self.bottom_tabs.addTab(self.uncertainty, "Uncertainty")
        self.views.addWidget(self.bottom_tabs)
        self.views.setSizes([380, 420])

    # ---- configs ------------------------------------------------------------------------
    def apply_config(self, cfg: ChannelConfig) -> None:
        self.base_cfg = cfg
        self.show_description(cfg.name, cfg.description)
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
        self.fit_form.show(cfg.fit)
        self._set_families(d.families, cfg.base_dir)
        self.refresh_steering(cfg)

    def _set_families(self, families: list[FamilyData], base_dir: str) -> None:
        self.families.setRowCount(len(families))
        for r, f in enumerate(families):
            path = str(resolve(f.path, base_dir)) if _exists(f.path, base_dir) else f.path
            for c, text in enumerate((f.family, path, f.protocol, f"{f.mask:g}", f"{f.weight:g}")):
                self.families.setItem(r, c, QTableWidgetItem(text))

    def family_specs(self) -> list[FamilyData]:
        """The family table merged with the run config's settings of the same family (sweep
        maps, leak, windows); raises ConfigError."""
        known = {f.family: f for f in (self.base_cfg.data.families if self.base_cfg else [])}
        out = []
        for r in range(self.families.rowCount()):
            cells = [(self.families.item(r, c).text().strip() if self.families.item(r, c) else "")
                     for c in range(len(FAMILY_COLUMNS))]
            name, path, protocol, mask, weight = cells
            if not name or not path:
                raise ConfigError(f"data.families row {r + 1}: give the family and its file")
            values = {"family": name, "path": path, "protocol": protocol or "config",
                      "mask": float(mask or 0), "weight": float(weight or 1)}
            base = known.get(name)
            merged = replace(base, **values) if base else values
            doc = parse_yaml(dump_yaml(merged), f"<family {name}>")
            out.append(build(FamilyData, doc.data, doc))
        return out

    def fit_settings(self) -> FitSettings:
        """The optimiser, refinement and uncertainty settings the widgets show; validated."""
        fit = self.fit_form.read(self.base_cfg.fit if self.base_cfg is not None else FitSettings())
        doc = parse_yaml(dump_yaml(fit), "<fit settings>")
        return build(FitSettings, doc.data, doc)

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
        if not specs:
            self.protocol_info.setText("every family's protocol comes from its recording's command waveform")
            return
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
        if source == "recordings":
            return replace(self.data_fields.read(DataSpec()), source=source, families=self.family_specs())
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
                      data=self.data_spec(), ga=self.ga_settings(), fit=self.fit_settings())
        return self.validate(cfg)

    # ---- running ------------------------------------------------------------------------
    def make_worker(self, cfg: ChannelConfig, backend: str, index: int) -> SimulationWorker:
        worker = super().make_worker(cfg, backend, index)
        self.run_cfg = cfg
        self.run_protocol = cfg.fit_data(cfg.model_()).protocol if cfg.data.source == "recordings" else cfg.protocol()
        for box in (self.population, self.ga_seed):
            box.setEnabled(False)
        worker.finished.connect(self._run_ended)
        return worker

    def _run_ended(self) -> None:
        for box in (self.population, self.ga_seed):
            box.setEnabled(True)

    def event_generation(self, event) -> float | None:
        """A steering event on the convergence plot: at its generation, or at that generation's
        wall time when the plot is against wall time."""
        if not self.convergence.against_wall:
            return event.t
        frame = self.last_frame
        wall = None if frame is None else np.asarray(frame.history_wall, float)
        return float(wall[event.at - 1]) if wall is not None and 0 < event.at <= len(wall) else None

    def status_text(self, frame) -> str:
        gens = frame.generation / frame.wall_seconds if frame.wall_seconds > 0 else 0.0
        phase = "" if frame.phase == "search" else f"{frame.status.split(',')[0]}, "
        return (f"{phase}{gens:.3g} generations/s, {short_number(frame.evaluations_per_second)} evaluations/s, "
                f"generation {frame.generation}, best χ² {frame.best_chi2:.4g}")

    def on_frame(self, frame) -> None:
        self.convergence.set_frame(frame)
        self.parameters.set_frame(frame)
        self.fit.set_frame(frame)
        self.uncertainty.set_frame(frame)

    def on_finished(self, arrays: dict, summary: dict) -> None:
        if summary:
            log.info("channel fit: best chi2 %.6g after %d generations, %.3g evaluations/s on %s",
                     summary.get("best_chi2", float("nan")), summary.get("generations", 0),
                     summary.get("evaluations_per_second", 0.0), summary.get("backend", "?"))

    def clear_views(self) -> None:
        self.convergence.clear()
        self.parameters.clear()
        self.fit.clear()
        self.uncertainty.clear()

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

    def export_model(self, path: str | Path, kind: str) -> Path:
        """The fitted model as our YAML (``model``), Myokit (``myokit``) or NMODL (``nmodl``)."""
        from app.sims.channel import export
        from app.sims.common.output import save_text
        frame = self._frame()
        spec = self.run_cfg.model if self.run_cfg is not None else self.model_spec()
        model = self.run_cfg.model_() if self.run_cfg is not None else self.current_config().model_()
        values = np.asarray(frame.best_params, float)
        name = Path(path).stem
        if kind == "neuroml":
            from app.sims.channel.export_neuroml import to_neuroml, validate
            out = save_text(path, to_neuroml(model, values, export._safe_name(name, "fitted_channel")))
            validate(str(out))
            return out
        text = {"model": lambda: export.to_yaml(spec, values, frame.best_chi2),
                "myokit": lambda: export.to_myokit(model, values, name),
                "nmodl": lambda: export.to_nmodl(model, values, name)}[kind]()
        return save_text(path, text)

    def export_nwb(self, path: str | Path) -> Path:
        """The fit as NWB: data, protocol, best parameters, fitted traces, intervals."""
        from app.sims.channel.export_nwb import write_fit
        frame = self._frame()
        cfg = self.run_cfg if self.run_cfg is not None else self.current_config()
        iv = frame.intervals
        ci = (iv.lower, iv.upper) if iv is not None else None
        return write_fit(cfg, frame.best_params, frame.target, frame.best_traces, path, ci)

    def export_data(self, path: str | Path) -> Path:
        """By suffix: .yaml best parameters, .npz all arrays, .csv the fitted traces (or the
        convergence history when the file name contains 'history' or 'convergence')."""
        path = Path(path)
        suffix, stem = path.suffix.lower(), path.stem.lower()
        if suffix in (".mod", ".mmt"):
            out = self.export_model(path, "nmodl" if suffix == ".mod" else "myokit")
        elif suffix in (".yaml", ".yml") and "model" in stem:
            out = self.export_model(path, "model")
        elif suffix in (".yaml", ".yml"):
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
                                (self.data_path.parentWidget(), source in ("csv", "abf")),
                                (self.abf_channel, source == "abf"), (self.families, source == "recordings"),
                                (self.family_browse, source == "recordings")):
            widget.setVisible(visible)
            label = self.data_form.labelForField(widget)
            if label is not None:
                label.setVisible(visible)

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

    def open_recording(self, path: str | Path) -> None:
        """Fit to a recording (an ABF file): the Fit tab's target data becomes this file."""
        self.data_source.setCurrentIndex(self.data_source.findData("abf"))
        self.data_path.setText(str(path))
        self.mark_loaded(f"{self.loaded.split(' + ')[0]} + {Path(path).name}" if self.loaded
                         else Path(path).name)

    def _ask_family_file(self) -> None:
        row = self.families.currentRow()
        if row < 0:
            self.families.insertRow(self.families.rowCount())
            row = self.families.rowCount() - 1
        path, _ = QFileDialog.getOpenFileName(self, "Recording of the family", "",
                                              "Recordings (*.csv *.txt *.abf *.nwb)")
        if path:
            self.families.setItem(row, 1, QTableWidgetItem(path))

    def _ask_export(self, kind: str) -> None:
        names = {"params": ("best-parameters.yaml", "YAML (*.yaml)", self.export_best_parameters),
                 "traces": ("fitted-traces.csv", "CSV (*.csv)", self.export_traces),
                 "history": ("convergence.csv", "CSV (*.csv)", self.export_history),
                 "npz": ("results.npz", "NumPy archive (*.npz)", lambda p: export_npz(p, self._frame())),
                 "model": ("fitted-model.yaml", "YAML (*.yaml)", lambda p: self.export_model(p, "model")),
                 "myokit": ("fitted_channel.mmt", "Myokit (*.mmt)", lambda p: self.export_model(p, "myokit")),
                 "nmodl": ("fitted_channel.mod", "NMODL (*.mod)", lambda p: self.export_model(p, "nmodl")),
                 "neuroml": ("fitted_channel.nml", "NeuroML2 (*.nml)", lambda p: self.export_model(p, "neuroml")),
                 "nwb": ("channel-fit.nwb", "NWB (*.nwb)", self.export_nwb)}
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
