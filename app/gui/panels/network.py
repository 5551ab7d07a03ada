"""The cultured-network panel: a developing culture with live activity and growth.

Controls: preset or YAML file, culture size and layout, growth parameters, epochs and their
length, backend, checkpoint file, pause at epoch ends, resume from a checkpoint. Views: the
culture (dots coloured by recent rate, connectivity circles, strongest synapses), the spike
raster, the population rate with detected bursts, and per-epoch plots of mean radius, mean
rate, synapse count and bursts per minute. Exports: spikes (NPZ), history (CSV),
connectivity (NPZ), PNG.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QCheckBox, QComboBox, QDoubleSpinBox, QFormLayout,
                               QGridLayout, QGroupBox, QLabel, QLineEdit, QPushButton,
                               QSpinBox, QSplitter, QVBoxLayout)

from app.gui.panels.base import DeviceProvider, Panel, cpu_device
from app.gui.runner import RunState, SimulationWorker
from app.gui.views.network import CultureView, EpochHistoryView, PopulationRateView, RasterView
from app.sims.common.config import ConfigError, parse_yaml
from app.sims.common.output import save_csv, save_npz
from app.sims.common.session import load_checkpoint
from app.sims.common.simulation import Domain, presets
from app.sims.network.config import LAYOUTS, NetworkConfig, load_config

log = logging.getLogger(__name__)

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


class NetworkWorker(SimulationWorker):
    """Pauses itself right after an epoch's growth update when asked (in the worker thread,
    so no further slice runs before the pause takes effect)."""

    def __init__(self, *args, pause_at_epoch: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.pause_at_epoch = pause_at_epoch

    def _store(self, frame) -> None:
        if self.pause_at_epoch and frame.epoch_boundary and not frame.done:
            self.session.pause()
        super()._store(frame)


class NetworkPanel(Panel):
    """Controls and live views of a developing culture."""

    MOVIE_VIEW = "views"

    def __init__(self, domain: Domain, device: DeviceProvider = cpu_device, parent=None):
        super().__init__(domain, device, parent)
        self.base_cfg: NetworkConfig | None = None
        self.arrays: dict | None = None
        self.resume_path: Path | None = None
        self._build_model_group()
        self._build_culture_group()
        self._build_growth_group()
        self._build_run_group()
        self._build_export_group()
        self.controls_layout.addStretch(1)
        self._build_views()
        self.open_default_preset()

    # ---- construction -------------------------------------------------------------------
    def _build_model_group(self) -> None:
        box, self.preset_combo, self.description = self.preset_picker("Preset", presets("network"))
        self.controls_layout.addWidget(box)

    @staticmethod
    def _double(lo: float, hi: float, decimals: int, step: float) -> QDoubleSpinBox:
        box = QDoubleSpinBox()
        box.setRange(lo, hi)
        box.setDecimals(decimals)
        box.setSingleStep(step)
        return box

    def _build_culture_group(self) -> None:
        box = QGroupBox("Culture")
        self.width_box, self.height_box = QSpinBox(), QSpinBox()
        for b in (self.width_box, self.height_box):
            b.setRange(1, 4096)
        self.layout_combo = QComboBox()
        self.layout_combo.addItems(LAYOUTS)
        self.inh_fraction = self._double(0.0, 1.0, 3, 0.01)
        self.starter_fraction = self._double(0.0, 1.0, 3, 0.01)
        self.culture_seed = QSpinBox()
        self.culture_seed.setRange(0, 2**31 - 1)
        form = QFormLayout(box)
        for label, widget in (("Width", self.width_box), ("Height", self.height_box),
                              ("Layout", self.layout_combo), ("Inhibitory fraction", self.inh_fraction),
                              ("Starter fraction", self.starter_fraction), ("Layout seed", self.culture_seed)):
            form.addRow(label, widget)
        self.controls_layout.addWidget(box)

    def _build_growth_group(self) -> None:
        box = QGroupBox("Growth")
        self.start_radius = self._double(0.0, 30.0, 3, 0.1)
        self.rho = self._double(0.0, 10.0, 6, 1e-4)
        self.epsilon = self._double(1e-6, 1.0, 3, 0.05)
        self.beta = self._double(1e-6, 10.0, 3, 0.01)
        self.target_rate = self._double(1e-6, 1000.0, 3, 0.1)
        form = QFormLayout(box)
        for label, widget in (("Start radius", self.start_radius), ("rho (units/s)", self.rho),
                              ("epsilon", self.epsilon), ("beta", self.beta),
                              ("Target rate (Hz)", self.target_rate)):
            form.addRow(label, widget)
        self.controls_layout.addWidget(box)

    def _build_run_group(self) -> None:
        box = QGroupBox("Run")
        self.epochs = QSpinBox()
        self.epochs.setRange(1, 1_000_000)
        self.epoch_seconds = self._double(1e-3, 1e5, 3, 1.0)
        self.slice_seconds = self._double(1e-3, 1e5, 3, 0.5)
        self.noise_seed = QSpinBox()
        self.noise_seed.setRange(0, 2**31 - 1)
        self.backend_combo()
        self.checkpoint = QLineEdit()
        self.checkpoint.setPlaceholderText("none (no checkpoints)")
        self.checkpoint.setToolTip("Written atomically after every epoch; a run resumes from it if it exists")
        self.pause_at_epoch = QCheckBox("Pause at the end of each epoch")
        self.resume_button = QPushButton("Resume from checkpoint…")
        self.resume_label = QLabel("")
        self.resume_label.setWordWrap(True)
        form = QFormLayout()
        for label, widget in (("Epochs", self.epochs), ("Epoch (s)", self.epoch_seconds),
                              ("Slice (s)", self.slice_seconds), ("Noise seed", self.noise_seed),
                              ("Backend", self.backend), ("Checkpoint", self.checkpoint)):
            form.addRow(label, widget)
        layout = QVBoxLayout(box)
        layout.addLayout(form)
        layout.addWidget(self.pause_at_epoch)
        layout.addWidget(self.resume_button)
        layout.addWidget(self.resume_label)
        self.controls_layout.addWidget(box)
        self.resume_button.clicked.connect(self._ask_resume)

    def _build_export_group(self) -> None:
        box = QGroupBox("Export")
        self.export_spikes_button = QPushButton("Spikes (NPZ)…")
        self.export_history_button = QPushButton("History (CSV)…")
        self.export_conn_button = QPushButton("Connectivity (NPZ)…")
        self.export_png_button = QPushButton("Views (PNG)…")
        grid = QGridLayout(box)
        for k, b in enumerate((self.export_spikes_button, self.export_history_button,
                               self.export_conn_button, self.export_png_button)):
            grid.addWidget(b, k // 2, k % 2)
        self.controls_layout.addWidget(box)
        self.export_spikes_button.clicked.connect(lambda: self.ask_export("spikes", "NPZ (*.npz)"))
        self.export_history_button.clicked.connect(lambda: self.ask_export("history", "CSV (*.csv)"))
        self.export_conn_button.clicked.connect(lambda: self.ask_export("connectivity", "NPZ (*.npz)"))
        self.export_png_button.clicked.connect(lambda: self.ask_export("png", "PNG (*.png)"))

    def _build_views(self) -> None:
        self.culture = CultureView()
        self.raster = RasterView()
        self.pop_rate = PopulationRateView()
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

    # ---- configs ------------------------------------------------------------------------
    def apply_config(self, cfg: NetworkConfig) -> None:
        self.base_cfg = cfg
        self.resume_path = None
        self.resume_label.setText("")
        self.description.setText(f"<b>{cfg.name}</b><br>{cfg.description.strip()}")
        c, g, r = cfg.culture, cfg.growth, cfg.run
        self.width_box.setValue(c.width)
        self.height_box.setValue(c.height)
        self.layout_combo.setCurrentText(c.layout)
        self.inh_fraction.setValue(c.inhibitory_fraction)
        self.starter_fraction.setValue(c.starter_fraction)
        self.culture_seed.setValue(min(c.seed, 2**31 - 1))
        self.start_radius.setValue(g.start_radius)
        self.rho.setValue(g.rho)
        self.epsilon.setValue(g.epsilon)
        self.beta.setValue(g.beta)
        self.target_rate.setValue(g.target_rate)
        self.epochs.setValue(r.epochs)
        self.epoch_seconds.setValue(r.epoch_seconds)
        self.slice_seconds.setValue(r.slice_seconds)
        self.noise_seed.setValue(min(r.seed, 2**31 - 1))
        self.checkpoint.setText(r.checkpoint)

    def current_config(self) -> NetworkConfig:
        if self.base_cfg is None:
            raise ConfigError("no culture loaded")
        b = self.base_cfg
        culture = replace(b.culture, width=self.width_box.value(), height=self.height_box.value(),
                          layout=self.layout_combo.currentText(),
                          inhibitory_fraction=self.inh_fraction.value(),
                          starter_fraction=self.starter_fraction.value(), seed=self.culture_seed.value())
        growth = replace(b.growth, start_radius=self.start_radius.value(), rho=self.rho.value(),
                         epsilon=self.epsilon.value(), beta=self.beta.value(),
                         target_rate=self.target_rate.value())
        checkpoint = self.checkpoint.text().strip()
        if self.resume_path is not None:
            checkpoint = str(self.resume_path)
        run = replace(b.run, epochs=self.epochs.value(), epoch_seconds=self.epoch_seconds.value(),
                      slice_seconds=self.slice_seconds.value(), seed=self.noise_seed.value(),
                      checkpoint=checkpoint, resume=True)
        return self.validate(replace(b, culture=culture, growth=growth, run=run))

    def resume_from(self, path: str | Path) -> None:
        """Load the culture and settings of a checkpoint; the next Run continues it."""
        state = load_checkpoint(path)
        cfg = load_config(parse_yaml(str(state["config_yaml"]), str(path)))
        self.apply_config(cfg)
        self.resume_path = Path(path)
        self.checkpoint.setText(str(path))
        self.resume_label.setText(f"Run continues {Path(path).name} from epoch {int(state['epoch'])}")

    # ---- running ------------------------------------------------------------------------
    def make_worker(self, cfg: Any, backend: str, index: int) -> SimulationWorker:
        worker = NetworkWorker(self.domain, cfg, backend, index, parent=self,
                               pause_at_epoch=self.pause_at_epoch.isChecked())
        worker.frame_ready.connect(self._frame_ready)
        worker.run_finished.connect(self._run_finished)
        worker.failed.connect(self._run_failed)
        self.pause_at_epoch.toggled.connect(lambda on: setattr(worker, "pause_at_epoch", on))
        return worker

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
        if self.last_frame is None:
            raise RuntimeError("nothing to export yet: run the simulation first")
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
        if self.last_frame is None:
            raise RuntimeError("nothing to export yet: run the simulation first")
        if kind == "spikes":
            out = export_spikes_npz(path, self.arrays, self.last_frame)
        elif kind == "history":
            out = export_history_csv(path, self.last_frame)
        else:
            out = export_connectivity_npz(path, self.arrays)
        log.info("exported %s", out)
        return out

    # ---- GUI actions --------------------------------------------------------------------
    def _ask_resume(self) -> None:
        self.ask_file("Resume from a checkpoint", "NPZ (*.npz)", self.resume_from)
