"""The cultured-network panel: a developing culture with live activity and growth.

Controls: preset or YAML file, culture size and layout, growth parameters, epochs and their
length, backend, checkpoint file, pause at epoch ends, resume from a checkpoint. Views: the
culture (an image of recent rates with inhibitory and starter marks, connectivity circles,
strongest synapses), the spike raster, the population rate with detected bursts, and
per-epoch plots of mean radius, mean rate, synapse count and bursts per minute. Exports:
spikes (NPZ), history (CSV), connectivity (NPZ), PNG.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QCheckBox, QLabel, QPushButton, QSpinBox, QSplitter

from app.gui.forms import ConfigForm

from app.gui.panels.base import DeviceProvider, Panel, cpu_device
from app.gui.runner import RunState, SimulationWorker
from app.gui.steering import EventMarks, PlotBrush
from app.gui.views.network import CultureView, EpochHistoryView, PopulationRateView, RasterView
from app.sims.common.config import ConfigError
from app.sims.common.output import save_csv, save_npz
from app.sims.common.session import load_checkpoint
from app.sims.common.simulation import Domain
from app.sims.network.config import NetworkConfig, load_config

log = logging.getLogger(__name__)

EXPORTS = (("Spikes (NPZ)…", "spikes", "NPZ (*.npz)", "every recorded spike (or the raster window shown)"),
           ("History (CSV)…", "history", "CSV (*.csv)", "per-epoch radius, rate, synapses and bursts"),
           ("Connectivity (NPZ)…", "connectivity", "NPZ (*.npz)", "the final synapses and radii"),
           ("Views (PNG)…", "png", "PNG (*.png)", "the views"),
           ("Spikes and bursts (NWB)…", "nwb", "NWB (*.nwb)",
            "a finished run: spike times, positions, population rate and bursts"),
           ("Culture (NeuroML2)…", "neuroml", "NeuroML2 (*.nml)",
            "a finished run: cells, positions, Tsodyks-Markram synapses, final connections, "
            "and beside it a LEMS file that simulates one epoch"))
HISTORY_KEYS = ("epoch_mean_radius", "epoch_mean_rate", "epoch_synapses", "epoch_bursts_per_minute")


def export_history_csv(path: str | Path, frame) -> Path:
    columns = [np.asarray(frame.history[k], float) for k in HISTORY_KEYS]
    return save_csv(path, ["epoch", *HISTORY_KEYS], [np.arange(1, columns[0].size + 1), *columns])


def export_spikes_npz(path: str | Path, arrays: dict | None, frame) -> Path:
    """All recorded spikes of the last finished/stopped run, else the raster window shown."""
    if arrays and "spike_times" in arrays:
        return save_npz(path, {"spike_times": arrays["spike_times"], "spike_neurons": arrays["spike_neurons"]})
    order = np.lexsort((frame.raster_neurons, frame.raster_times))
    return save_npz(path, {"spike_times": frame.raster_times[order], "spike_neurons": frame.raster_neurons[order]})


def export_connectivity_npz(path: str | Path, arrays: dict | None) -> Path:
    if not arrays or "final_W" not in arrays:
        raise RuntimeError("the connectivity is written when a run finishes or is stopped")
    keys = ("final_W_pre", "final_W_post", "final_W", "final_radius", "grid_shape", "inhibitory", "starter")
    return save_npz(path, {k: arrays[k] for k in keys})


def epoch_end(frame) -> bool:
    """The frame right after an epoch's growth update (where a run may pause)."""
    return bool(frame.epoch_boundary)


class NetworkPanel(Panel):
    """Controls and live views of a developing culture."""

    MOVIE_VIEW = "views"
    REST_PREVIEW = True

    def __init__(self, domain: Domain, device: DeviceProvider = cpu_device, parent=None):
        super().__init__(domain, device, parent)
        self.base_cfg: NetworkConfig | None = None
        self.arrays: dict | None = None
        self.resume_path: Path | None = None
        self.controls_layout.addWidget(self.preset_picker("Preset")[0])
        self._build_form()
        self.controls_layout.addWidget(self.brush_tool("grid units"))
        self.controls_layout.addWidget(self.steering_box("Steer while running"))
        self.controls_layout.addWidget(self.export_group(EXPORTS))
        self.controls_layout.addStretch(1)
        self._build_views()
        self.open_default_preset()

    # ---- construction -------------------------------------------------------------------
    def _build_form(self) -> None:
        self.form = ConfigForm(NetworkConfig)
        for title, items in (
                ("Culture", ["culture.width", "culture.height", "culture.layout", "culture.inhibitory_fraction",
                             "culture.starter_fraction", ("culture.seed", "Layout seed")]),
                ("Growth", ["growth.start_radius", ("growth.rho", "rho (units/s)"), "growth.epsilon",
                            "growth.beta", ("growth.target_rate", "Target rate (Hz)")])):
            self.controls_layout.addWidget(self.form.group(title, items))
        box = self.form.group("Run", ["run.epochs", ("run.epoch_seconds", "Epoch (s)"),
                                      ("run.slice_seconds", "Slice (s)"), ("run.seed", "Noise seed"),
                                      "run.checkpoint"])
        box.layout().insertRow(4, "Backend", self.backend_combo())
        self.form.expose(self, {"culture.width": "width_box", "culture.height": "height_box",
                                "culture.layout": "layout_combo", "culture.seed": "culture_seed",
                                "run.seed": "noise_seed"})
        self.steer_form(self.form)
        self.checkpoint.setPlaceholderText("none (no checkpoints)")
        self.pause_at_epoch = QCheckBox("Pause at the end of each epoch")
        self.resume_button = QPushButton("Resume from checkpoint…")
        self.resume_label = QLabel("")
        self.resume_label.setWordWrap(True)
        for widget in (self.pause_at_epoch, self.resume_button, self.resume_label):
            box.layout().addRow(widget)
        self.neuroml_epoch = QSpinBox()           # the NeuroML2 export's connectivity: 0 = the start
        self.neuroml_epoch.setRange(-1, 1_000_000)
        self.neuroml_epoch.setSpecialValueText("end of the run")
        self.neuroml_epoch.setValue(-1)
        self.neuroml_epoch.setToolTip("Which epoch's connections File › Export › Culture (NeuroML2) "
                                      "writes: 0 is the start, the last epoch the end of the run")
        box.layout().addRow("NeuroML2 at epoch", self.neuroml_epoch)
        self.controls_layout.addWidget(box)
        self.resume_button.clicked.connect(self._ask_resume)
        self.pause_at_epoch.toggled.connect(self._pause_at_epoch_toggled)

    def _build_views(self) -> None:
        self.culture = CultureView()
        self.raster = RasterView()
        self.pop_rate = PopulationRateView()
        self.pop_rate.follow(self.raster.plot)        # one time window for spikes and rate
        self.history = EpochHistoryView()
        right = QSplitter(Qt.Orientation.Vertical)
        right.addWidget(self.raster)
        right.addWidget(self.pop_rate)
        top = QSplitter(Qt.Orientation.Horizontal)
        top.addWidget(self.culture)
        top.addWidget(right)
        top.setSizes([450, 550])
        self.views.addWidget(top)
        self.views.addWidget(self.history)
        self.views.setSizes([560, 240])
        self.culture_brush = PlotBrush(self.culture.plot, self.paint, lambda: self.brush.key is not None)
        for plot in (self.raster.plot, self.pop_rate.plot):
            self.event_marks.append(EventMarks(plot))

    def steer_values(self, cfg: NetworkConfig) -> dict[str, Any]:
        """The growth's target rate and a factor of 1 on each synapse type's weights."""
        from app.sims.network.config import SYNAPSE_TYPES

        return {**super().steer_values(cfg), **{f"scale.{t}": 1.0 for t in SYNAPSE_TYPES}}


    # ---- configs ------------------------------------------------------------------------
    def apply_config(self, cfg: NetworkConfig) -> None:
        self.base_cfg = cfg
        self.resume_path = None
        self.resume_label.setText("")
        self.show_description(cfg.name, cfg.description)
        self.form.show(cfg)
        self.refresh_steering(cfg)
        self.raster.window = cfg.analysis.raster_seconds

    def current_config(self) -> NetworkConfig:
        if self.base_cfg is None:
            raise ConfigError("no culture loaded")
        cfg = self.form.read(self.base_cfg)
        checkpoint = str(self.resume_path) if self.resume_path is not None else cfg.run.checkpoint
        return self.validate(replace(cfg, run=replace(cfg.run, checkpoint=checkpoint, resume=True)))

    def resume_from(self, path: str | Path) -> None:
        """Load the culture and settings of a checkpoint; the next Run continues it."""
        from app.sims.common.checkpoint_schema import check_arrays, checked_config
        from app.sims.network.simulation import checkpoint_schema

        state = load_checkpoint(path)
        cfg = checked_config(state, load_config, path)       # errors name the checkpoint
        check_arrays(state, checkpoint_schema(cfg, state), path)
        self.apply_config(cfg)
        self.resume_path = Path(path)
        self.checkpoint.setText(str(path))
        self.resume_label.setText(f"Run continues {Path(path).name} from epoch {int(state['epoch'])}")

    # ---- running ------------------------------------------------------------------------
    def make_worker(self, cfg: Any, backend: str, index: int) -> SimulationWorker:
        worker = super().make_worker(cfg, backend, index)
        self.raster.window = cfg.analysis.raster_seconds
        self._pause_at_epoch_toggled(self.pause_at_epoch.isChecked(), worker)
        if self.record_next_movie:               # the movie shows every epoch, not the few drawn
            worker.keep_frames = epoch_end
        return worker

    def _pause_at_epoch_toggled(self, on: bool, worker: SimulationWorker | None = None) -> None:
        worker = worker or self.worker
        if worker is not None:
            worker.session.pause_when(epoch_end if on else None)

    def start_run(self) -> bool:
        self.arrays = None
        return super().start_run()

    def status_text(self, frame) -> str:
        return f"{frame.throughput:.3g}x realtime, {frame.status}"

    def on_frame(self, frame) -> None:
        self.culture.set_frame(frame)
        self.raster.set_frame(frame)
        self.pop_rate.set_frame(frame)
        self.history.set_frame(frame)
        if self.worker is not None and self.worker.paused and self.run_controls.state is RunState.RUNNING:
            self.run_controls.set_state(RunState.PAUSED)
            self.status_changed.emit(f"paused after epoch {frame.epoch}")

    def draw_rest(self, frame) -> None:
        """The culture before its first epoch (positions, starting radii), before Run."""
        self.culture.set_frame(frame)

    def on_finished(self, arrays: dict, summary: dict) -> None:
        self.arrays = arrays or None
        self.resume_path = None
        self.resume_label.setText("")
        if summary:
            log.info("network: %d epochs, %.0f s simulated in %.2f s on %s (%s)",
                     summary.get("epochs", 0), summary.get("sim_seconds", 0.0),
                     summary.get("wall_seconds", 0.0), summary.get("device", "?"),
                     "finished" if summary.get("finished") else "stopped")

    def clear_views(self) -> None:
        for view in (self.culture, self.raster, self.pop_rate, self.history):
            view.clear()

    def export_data(self, path: str | Path) -> Path:
        """CSV: the per-epoch history; NPZ: spikes, connectivity and history together."""
        self.require_frame()
        path = Path(path)
        if path.suffix.lower() == ".csv":
            out = export_history_csv(path, self.last_frame)
        else:
            arrays = dict(self.arrays or {})
            if not arrays:
                f = self.last_frame
                arrays = {"spike_times": f.raster_times, "spike_neurons": f.raster_neurons,
                          "final_radius": f.radius}
            arrays.update({k: np.asarray(v) for k, v in self.last_frame.history.items()})
            out = save_npz(path, arrays)
        log.info("exported %s", out)
        return out

    def export(self, kind: str, path: str | Path) -> Path:
        if kind == "png":
            return self.save_screenshot(path)
        self.require_frame()
        if kind == "spikes":
            out = export_spikes_npz(path, self.arrays, self.last_frame)
        elif kind == "history":
            out = export_history_csv(path, self.last_frame)
        elif kind == "nwb":
            from app.sims.network.export_nwb import write_run
            out = write_run(self.current_config(), self.arrays or {}, path)
        elif kind == "neuroml":
            from app.sims.network import export_neuroml
            epoch = self.neuroml_epoch.value()
            out = export_neuroml.write_run(self.current_config(), self.arrays or {}, path,
                                           None if epoch < 0 else epoch)
        else:
            out = export_connectivity_npz(path, self.arrays)
        log.info("exported %s", out)
        return out

    # ---- GUI actions --------------------------------------------------------------------
    def _ask_resume(self) -> None:
        self.ask_file("Resume from a checkpoint", "NPZ (*.npz)", self.resume_from)
