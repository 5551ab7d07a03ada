"""The SSA histograms panel: ensembles of Gillespie runs with live statistics.

Controls: model picker (presets and any YAML file), the editable initial-count / parameter
table, ensemble settings, backend and seed, and the comparison ensemble. Views: mean ± SD
trajectories, the histogram of a chosen species at a chosen time with the comparison
overlaid, and for the spatial model the heat map of mean A per grid cell.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QGroupBox, QHBoxLayout, QLabel, QPushButton, QSplitter, QVBoxLayout

from app.gui import errors
from app.gui.forms import ConfigForm
from app.gui.labels import short_path
from app.gui.panels.base import DeviceProvider, Panel, cpu_device
from app.gui.panels.ssa_data import EnsembleHistograms, export_csv, export_npz
from app.gui.panels.ssa_params import ParameterTable
from app.gui.runner import SimulationWorker
from app.gui.steering import EventMarks
from app.gui.views.heatmap import HeatMapView
from app.gui.views.histogram import HistogramView
from app.gui.views.trajectories import TrajectoryView
from app.sims.common.config import ConfigError
from app.sims.common.simulation import Domain
from app.sims.ssa.config import SSAConfig

log = logging.getLogger(__name__)

REFERENCE_MAX_REALIZATIONS = 256
REFERENCE_SEED_OFFSET = 7919   # a different seed, hence independent Philox streams
MAX_SLIDERS = 24               # rate and count sliders of a network at most (more: edit the table)


def short_number(x: float) -> str:
    """3.2e6 style (no '+' or leading zeros in the exponent)."""
    if x == 0:
        return "0"
    mantissa, exponent = f"{x:.1e}".split("e")
    return f"{mantissa}e{int(exponent)}"


class SSAPanel(Panel):
    """Controls and live views of an SSA ensemble run."""

    open_label = "Open YAML, SBML or OMEX…"
    open_filter = ("Run configs, SBML and COMBINE archives (*.yaml *.yml *.xml *.sbml *.omex);;YAML (*.yaml *.yml);;"
                   "SBML (*.xml *.sbml);;COMBINE/OMEX archives with SED-ML (*.omex)")

    def __init__(self, domain: Domain, device: DeviceProvider = cpu_device, parent=None):
        super().__init__(domain, device, parent)
        self.base_cfg: SSAConfig | None = None
        self.last_run: tuple[SSAConfig, dict, dict] | None = None    # for Export OMEX
        self.reference_worker: SimulationWorker | None = None
        model_box = self.preset_picker("Model")[0]
        self._add_sbml_export(model_box)
        self.controls_layout.addWidget(model_box)
        self._build_table_group()
        self._build_steering_group()
        self._build_ensemble_group()
        self._build_compare_group()
        self.controls_layout.addStretch(1)
        self._build_views()

    # ---- construction -------------------------------------------------------------------
    def _add_sbml_export(self, box: QGroupBox) -> None:
        self.export_sbml_button = QPushButton("Export SBML…")
        self.export_sbml_button.setToolTip("The network as an SBML Level 3 file (mass-action networks)")
        box.layout().addWidget(self.export_sbml_button)
        self.export_sbml_button.clicked.connect(
            lambda: self.ask_file("Export SBML", "SBML (*.xml)", self.export_sbml, save=True,
                                  default_suffix=".xml"))
        self.export_omex_button = QPushButton("Export OMEX…")
        self.export_omex_button.setToolTip("The last finished run as a COMBINE/OMEX archive: the SBML model, "
                                           "SED-ML saying what ran (the ensemble, its seed) and the results")
        box.layout().addWidget(self.export_omex_button)
        self.export_omex_button.clicked.connect(
            lambda: self.ask_file("Export OMEX", "COMBINE/OMEX archive (*.omex)", self.export_omex, save=True,
                                  default_suffix=".omex"))

    def load_config(self, path: str | Path) -> None:
        """A run config, or an SBML file: its imported and refused elements go to the table
        (a model with refusals is shown, then reported as an error)."""
        from app.sims.ssa.sbml import is_sbml_path, read_sbml
        if Path(path).suffix.lower() == ".omex":
            self.load_archive(path)
            return
        if is_sbml_path(path):
            model = read_sbml(path)
            if model.network is None:
                self.table.set_sbml(model)
                self.show_description(model.name, f"{len(model.refused)} SBML element(s) refused "
                                      "(red rows); the model cannot run")
                model.require_network()
        super().load_config(path)

    def load_archive(self, path: str | Path) -> None:
        """The first single run (task or ensemble) of a COMBINE/OMEX archive's SED-ML; its model,
        with the SED-ML changes applied, is kept in a folder of this session."""
        import tempfile

        from app.omex import archive_config
        from app.sims.common.config import Document

        folder = Path(tempfile.mkdtemp(prefix="biogpu-omex-"))
        data, notes = archive_config(path, folder)
        cfg = self.domain.load().load_config(Document(data, {}, str(path)))
        self.apply_config(cfg)
        self.config_path = None
        for note in notes:
            log.info("%s: %s", Path(path).name, note)
        self.show_description(cfg.name, f"from {Path(path).name}: {cfg.description}")
        self.mark_loaded(Path(path).name, f"archive: {Path(path).name}", str(Path(path).resolve()))
        log.info("opened %s (model in %s)", path, folder)

    def export_omex(self, path: str | Path) -> Path:
        """The last finished run as an OMEX archive (its run folder is written beside, as the CLI's)."""
        import tempfile

        from app.sims.common.session import write_run_outputs
        from app.sims.ssa.sedml_export import export_folder
        if self.last_run is None:
            raise ConfigError("no finished run to export yet: run the ensemble to its end first")
        cfg, arrays, summary = self.last_run
        with tempfile.TemporaryDirectory(prefix="biogpu-run-") as tmp:
            out = export_folder(write_run_outputs(Path(tmp) / "run", cfg, arrays, summary), path)
        log.info("exported the run as %s", out)
        return out

    def export_sbml(self, path: str | Path) -> Path:
        from app.sims.ssa.sbml_export import export_sbml
        cfg = self.current_config()
        out = export_sbml(cfg.model if cfg.model is not None else cfg.network(), path, cfg.name or "network")
        log.info("exported SBML to %s", out)
        return out

    def _build_table_group(self) -> None:
        box = QGroupBox("Initial counts and parameters")
        self.table = ParameterTable()
        self.table.setMinimumHeight(180)
        self.table_problem = QLabel()
        self.table_problem.setWordWrap(True)
        self.table_problem.setStyleSheet("color: #b00020")
        layout = QVBoxLayout(box)
        layout.addWidget(self.table)
        layout.addWidget(self.table_problem)
        self.controls_layout.addWidget(box)
        self.table.problem.connect(self._table_problem)

    def _build_steering_group(self) -> None:
        box = self.steering_box("Steer rates and counts")
        box.steered.connect(self._steered)
        self.controls_layout.addWidget(box)

    def _steered(self, key: str, value: Any) -> None:
        """Explore mode: sliders act while dragged, and a change with no run going starts one
        (an explore run ends with its whole ensemble; the next move re-runs it)."""
        if key == "mode":
            self.steering.set_live_drag(value == "explore")
        elif self.exploring and not self.running:
            self.start_run()

    @property
    def exploring(self) -> bool:
        mode = self.steering.choices.get("mode") if self.steering is not None else None
        return mode is not None and mode.currentText() == "explore"

    def steer_values(self, cfg: SSAConfig) -> dict[str, float]:
        """Rate constants and initial counts of a small network (a grid or a large model: none)."""
        if cfg.grid is not None:
            return {"mode": "continue"}
        net = cfg.network()
        if len(net.reaction_names) + len(net.species) > MAX_SLIDERS:
            return {"mode": "continue"}
        return {"mode": "continue",
                **{f"rates.{name}": float(rate) for name, rate in zip(net.reaction_names, net.rates)},
                **{f"initial.{name}": float(count) for name, count in zip(net.species, net.x0)}}

    def _build_ensemble_group(self) -> None:
        self.form = ConfigForm(SSAConfig, hints={"ensemble.t_end": {"decimals": 4}})
        box = self.form.group("Ensemble", ["ensemble.realizations", ("ensemble.t_end", "t end"), "ensemble.samples",
                                           "ensemble.algorithm", "ensemble.seed",
                                           ("ensemble.epsilon", "tau-leap ε")])
        box.layout().insertRow(4, "Backend", self.backend_combo())
        self.form.expose(self)
        self.steer_form(self.form)
        self.controls_layout.addWidget(box)

    def _build_compare_group(self) -> None:
        box = QGroupBox("Comparison ensemble")
        self.compare_button = QPushButton("Compare with…")
        self.compare_button.setToolTip("A results.npz of a saved run (python -m app run, or Export NPZ)")
        self.reference_button = QPushButton("Run CPU reference")
        self.reference_button.setToolTip(f"A second ensemble on the CPU engine with another seed and "
                                         f"at most {REFERENCE_MAX_REALIZATIONS} realizations")
        self.clear_compare_button = QPushButton("Clear")
        self.compare_status = QLabel("none")
        self.compare_status.setWordWrap(True)
        row = QHBoxLayout()
        row.addWidget(self.compare_button)
        row.addWidget(self.reference_button)
        layout = QVBoxLayout(box)
        layout.addLayout(row)
        layout.addWidget(self.clear_compare_button)
        layout.addWidget(self.compare_status)
        self.controls_layout.addWidget(box)
        self.compare_button.clicked.connect(self._ask_compare)
        self.reference_button.clicked.connect(self._toggle_reference)
        self.clear_compare_button.clicked.connect(self.clear_comparison)

    def _build_views(self) -> None:
        self.trajectories = TrajectoryView()
        self.histogram = HistogramView()
        self.heatmap = HeatMapView()
        bottom = QSplitter(Qt.Orientation.Horizontal)
        bottom.addWidget(self.histogram)
        bottom.addWidget(self.heatmap)
        bottom.setChildrenCollapsible(False)
        self.views.addWidget(self.trajectories)
        self.views.addWidget(bottom)
        self.views.setSizes([400, 400])
        self.heatmap.hide()
        self.histogram.index_changed.connect(self.heatmap.show_index)
        self.event_marks.append(EventMarks(self.trajectories.plot))


    # ---- configs ------------------------------------------------------------------------
    def apply_config(self, cfg: SSAConfig) -> None:
        self.base_cfg = cfg
        self.show_description(cfg.name, cfg.description)
        self.description.setToolTip("")
        if cfg.grid is not None:
            self.table.set_grid(cfg.grid)
        elif cfg.sbml is not None:
            from app.sims.ssa.sbml import read_sbml
            model = read_sbml(cfg.sbml)
            self.table.set_sbml(model)
            self.show_description(cfg.name, f"SBML: {short_path(cfg.sbml)}",
                                  f"{len(model.imported)} elements imported")
            self.description.setToolTip(str(cfg.sbml))      # the whole path: never wider controls
        else:
            self.table.set_model(cfg.model)
        self.form.show(cfg)
        self.heatmap.setVisible(cfg.grid is not None)
        self.refresh_steering(cfg)

    def current_config(self) -> SSAConfig:
        if self.base_cfg is None:
            raise ConfigError("no model loaded")
        model, grid = self.table.edited()
        return self.validate(self.form.read(replace(self.base_cfg, model=model, grid=grid)))

    # ---- running ------------------------------------------------------------------------
    def status_text(self, frame) -> str:
        return (f"{short_number(frame.throughput)} reactions/s, {frame.realizations} realizations, "
                f"{frame.status.split(',')[0]}")

    def on_frame(self, frame) -> None:
        self.trajectories.set_frame(frame)
        self.histogram.set_frame(frame)
        if frame.grid_index is not None:
            self.heatmap.set_frame(frame)

    def on_finished(self, arrays: dict, summary: dict) -> None:
        if summary and summary.get("finished") and self.worker is not None:
            self.last_run = (self.worker.session.steered_config(), dict(arrays), dict(summary))
        if summary:
            log.info("SSA: %d reactions in %.2f s on %s (%s)", summary.get("reactions_fired", 0),
                     summary.get("wall_seconds", 0.0), summary.get("device", "?"),
                     "finished" if summary.get("finished") else "stopped")

    def clear_views(self) -> None:
        self.trajectories.clear()
        self.trajectories.set_time_span(self.t_end.value())
        self.histogram.clear()
        self.heatmap.clear()

    def export_data(self, path: str | Path) -> Path:
        self.require_frame()
        path = Path(path)
        out = export_csv(path, self.last_frame) if path.suffix.lower() == ".csv" else export_npz(path, self.last_frame)
        log.info("exported %s", out)
        return out

    # ---- comparison ---------------------------------------------------------------------
    def compare_with(self, path: str | Path) -> None:
        """Overlay the histograms of a saved run; raises ValueError/OSError on a bad file."""
        self.stop_reference()
        reference = EnsembleHistograms.from_npz(path)
        self.histogram.set_reference(reference)
        self.compare_status.setText(f"saved run {Path(path).name}: {len(reference.times)} samples")

    def start_reference(self) -> bool:
        """Run the CPU reference ensemble (another seed, fewer realizations) beside this panel."""
        self.stop_reference()
        try:
            cfg = self.current_config()
        except Exception as exc:
            errors.report_exception(self, "Cannot start the CPU reference", exc)
            return False
        ens = cfg.ensemble
        n = min(ens.realizations, REFERENCE_MAX_REALIZATIONS)
        cfg = replace(cfg, ensemble=replace(ens, realizations=n,
                                            seed=(ens.seed + REFERENCE_SEED_OFFSET) % 2**64))
        label = f"CPU reference ({n} realizations)"
        worker = SimulationWorker(self.domain, cfg, "cpu-reference", 0, parent=self)
        worker.frame_ready.connect(lambda f: self._reference_frame(f, label))
        worker.run_finished.connect(self._reference_done)
        worker.failed.connect(lambda m, d: (self._reference_done(),
                                            errors.report_error(self, "CPU reference failed", m, d)))
        self.reference_worker = worker
        self.reference_button.setText("Stop CPU reference")
        self.compare_status.setText(f"{label}: starting")
        worker.start()
        return True

    def stop_reference(self) -> None:
        if self.reference_worker is not None and self.reference_worker.isRunning():
            self.reference_worker.stop()

    def clear_comparison(self) -> None:
        self.stop_reference()
        self.histogram.set_reference(None)
        self.compare_status.setText("none")

    def _reference_frame(self, frame, label: str) -> None:
        self.histogram.set_reference(EnsembleHistograms.from_frame(frame, label))
        self.compare_status.setText(f"{label}: {frame.progress:.0%}")

    def _reference_done(self, *args: Any) -> None:
        self.reference_button.setText("Run CPU reference")
        if self.reference_worker is not None and self.reference_worker.last_frame is not None:
            done = self.reference_worker.last_frame.done
            self.compare_status.setText(self.compare_status.text().split(":")[0] +
                                        (": finished" if done else ": stopped"))

    # ---- GUI actions --------------------------------------------------------------------
    def _ask_compare(self) -> None:
        self.ask_file("Compare with a saved run", "NPZ (*.npz)", self.compare_with)

    def _toggle_reference(self) -> None:
        if self.reference_worker is not None and self.reference_worker.isRunning():
            self.stop_reference()
        else:
            self.start_reference()

    def _table_problem(self, text: str) -> None:
        self.table_problem.setText(text)
        if text:
            log.warning("parameter table: %s", text)

    def shutdown(self) -> None:
        self.stop_reference()
        super().shutdown()
