"""The Epidermis-3D panel: subcellular-element cells with a gene network, growth, division
and stratification.

Controls: preset or YAML file; mode (movement / genes / full), initial cells, boundary,
neighbour search; time step, steps, growth interval, Delta threshold and division axis;
the Morse parameters of the mechanics; speed (steps per slice, history interval, 3D
updates per second) and engine; recording of frames and of a movie. The rest of the model
(gene network, tissue geometry) comes from the YAML. Views: the tissue in 3D (vispy) with a
cut to see inside, and the history of cells, layers and state fractions against simulated
time. Exports: frames and history (NPZ), history (CSV), the current frame as a point cloud
(PLY or VTK), the 3D view (PNG), a movie (MP4), the views (PNG).

The mechanics, the growth settings, Δt, the steps and the search changed while the tissue
grows are steering events (applied before its next slice, replayed by the run's config.yaml),
as are the gene parameters, pausing growth and the wound brush (a click on the 3D view). The
tissue's size, boundary, seed and mode are fixed for a run.
"""

from __future__ import annotations

import logging
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

from PySide6.QtWidgets import (
    QCheckBox,
    QFormLayout,
    QGroupBox,
    QLabel,
    QSpinBox,
    QVBoxLayout,
)

from app.gui.export import save_rgba_png
from app.gui.forms import ConfigForm
from app.gui.panels.base import DeviceProvider, Panel, cpu_device
from app.gui.steering import EventMarks
from app.gui.panels.epidermis_export import (
    FrameRecorder,
    MovieRecorder,
    movie_support,
    write_frames_npz,
    write_history_csv,
    write_point_cloud,
)
from app.gui.views.epidermis_history import EpidermisHistoryView
from app.gui.views.epidermis_tissue import TissueView3D
from app.sims.common.config import ConfigError
from app.sims.common.simulation import Domain
from app.sims.epidermis.config import EpidermisConfig, Morse
from app.sims.epidermis.model import morse_minimum

log = logging.getLogger(__name__)

EXPORTS = (("Frames (NPZ)…", "npz", "NPZ (*.npz)", "recorded frames (or the current one) and the history"),
           ("History (CSV)…", "csv", "CSV (*.csv)", "cells, layers and state fractions against time"),
           ("Cloud (PLY)…", "ply", "PLY (*.ply)", "the current frame's elements as a point cloud"),
           ("Cloud (VTK)…", "vtk", "VTK (*.vtk)", "the current frame's elements as a point cloud"),
           ("3D view (PNG)…", "png3d", "PNG (*.png)", "the 3D view as rendered"),
           ("Movie (MP4)…", "mp4", "MP4 (*.mp4)", "the movie recorded during the run"),
           ("Views (PNG)…", "png", "PNG (*.png)", "the 3D view and the plots"))


class EpidermisPanel(Panel):
    """Controls and live views of an epidermis run."""

    REST_PREVIEW = True

    def __init__(self, domain: Domain, device: DeviceProvider = cpu_device, parent=None):
        super().__init__(domain, device, parent)
        self.base_cfg: EpidermisConfig | None = None
        self.run_cfg: EpidermisConfig | None = None
        self.arrays: dict | None = None
        self.recorder = FrameRecorder()
        self.movie: MovieRecorder | None = None
        self.form = ConfigForm(EpidermisConfig, hints={"tissue.cells": {"step": 10}, "run.steps": {"step": 1000}})
        self.controls_layout.addWidget(self.preset_picker("Preset")[0])
        self._build_tissue_group()
        self._build_time_group()
        self._build_mechanics_group()
        self._build_speed_group()
        self.form.expose(self, {"run.relax_steps": "relax", "growth.interval": "interval",
                                "growth.division_axis": "axis", "mechanics.intra.U0": "U0", "mechanics.intra.V0": "V0",
                                "mechanics.intra.xi1": "xi1", "mechanics.intra.xi2": "xi2",
                                "mechanics.inter.U0": "inter_U0", "mechanics.inter_cutoff": "cutoff",
                                "mechanics.membrane.U0": "membrane_U0"})
        self.steer_form(self.form)
        self._build_record_group()
        self.controls_layout.addWidget(self.brush_tool("µm"))
        self.controls_layout.addWidget(self.steering_box("Steer while running"))
        self.controls_layout.addWidget(self.export_group(EXPORTS))
        self.controls_layout.addStretch(1)
        self._build_views()
        self.open_default_preset()

    # ---- construction -------------------------------------------------------------------
    def _add_group(self, title: str, items: list) -> QGroupBox:
        box = self.form.group(title, items)
        self.controls_layout.addWidget(box)
        return box

    def _build_tissue_group(self) -> None:
        box = self._add_group("Tissue", ["run.mode", ("tissue.cells", "Initial cells"), "tissue.boundary", "run.search",
                                         "tissue.seed"])
        self.tissue_label = QLabel(wordWrap=True)
        box.layout().addRow("", self.tissue_label)
        self.form["tissue.cells"].valueChanged.connect(self._update_tissue)

    def _build_time_group(self) -> None:
        self._add_group("Time, growth and division", [
            ("run.dt", "Δt"), "run.steps", "run.relax_steps", ("growth.interval", "Grow every (steps)"),
            "growth.delta_low", "growth.division_axis"])
        self.form["run.dt"].valueChanged.connect(self._update_tissue)
        self.form["run.steps"].valueChanged.connect(self._update_tissue)

    def _build_mechanics_group(self) -> None:
        box = self._add_group("Mechanics (Morse)", [
            ("mechanics.intra.U0", "Intra U0"), ("mechanics.intra.V0", "Intra V0"),
            ("mechanics.intra.xi1", "Intra ξ1 (µm)"), ("mechanics.intra.xi2", "Intra ξ2 (µm)"),
            ("mechanics.inter.U0", "Inter U0"), ("mechanics.inter_cutoff", "Inter cutoff (µm)"),
            ("mechanics.membrane.U0", "Membrane U0")])
        self.mechanics_label = QLabel(wordWrap=True)
        box.layout().addRow("", self.mechanics_label)
        box.setToolTip("V(r) = U0·exp(-r/ξ1) - V0·exp(-r/ξ2); intercellular: repulsion only, below the cutoff; "
                       "other settings (membrane, gene network, tissue) come from the YAML")
        for name in ("U0", "V0", "xi1", "xi2"):
            self.form[f"mechanics.intra.{name}"].valueChanged.connect(self._update_mechanics)

    def _build_speed_group(self) -> None:
        box = self._add_group("Speed and engine", ["run.slice_steps", "run.history_every"])
        self.fps = QSpinBox(minimum=1, maximum=30, value=10)
        self.fps.setToolTip("at most this many 3D updates a second (large tissues: fewer keep the window fluid)")
        self.max_markers = QSpinBox(minimum=1000, maximum=5_000_000, singleStep=50_000, value=300_000)
        self.max_markers.setGroupSeparatorShown(True)
        self.max_markers.setToolTip("above this many visible elements every k-th is drawn")
        for label, widget in (("3D updates / s", self.fps), ("Max markers", self.max_markers),
                              ("Engine", self.backend_combo())):
            box.layout().addRow(label, widget)
        self.fps.valueChanged.connect(self._update_view_limits)
        self.max_markers.valueChanged.connect(self._update_view_limits)

    def _build_record_group(self) -> None:
        box = QGroupBox("Record")
        self.record_frames = QCheckBox("Record frames (NPZ)")
        self.record_frames.setToolTip("every displayed frame is kept (up to 1 GB) and exported with "
                                      "'Frames + history (NPZ)'")
        self.record_movie = QCheckBox("Record movie (MP4)")
        self.record_movie.setToolTip("the 3D view rendered after each update, written when the run ends; "
                                     "save it with Movie (MP4)")
        self.movie_fps = QSpinBox(minimum=1, maximum=60, value=15)
        why = movie_support()
        if why:
            self.record_movie.setEnabled(False)
            self.record_movie.setToolTip(why)
        self.record_label = QLabel("")
        self.record_label.setWordWrap(True)
        form = QFormLayout()
        form.addRow("Movie frames / s", self.movie_fps)
        layout = QVBoxLayout(box)
        layout.addWidget(self.record_frames)
        layout.addWidget(self.record_movie)
        layout.addLayout(form)
        layout.addWidget(self.record_label)
        self.controls_layout.addWidget(box)

    def _build_views(self) -> None:
        self.tissue = TissueView3D()
        self.history = EpidermisHistoryView()
        self.tissue.drawn.connect(self._record_movie_frame)
        self.tissue.point_picked.connect(self.paint)
        for plot in self.history.plots.values():
            self.event_marks.append(EventMarks(plot))
        self.views.addWidget(self.tissue)
        self.views.addWidget(self.history)
        self.views.setSizes([560, 240])
        self._update_view_limits()


    # ---- derived labels -----------------------------------------------------------------
    def _update_tissue(self, *_: Any) -> None:
        if self.base_cfg is None:
            return
        n = self.cells.value()
        cfg = replace(self.base_cfg, tissue=replace(self.base_cfg.tissue, cells=n))
        side, t_end = cfg.grid_side, self.steps.value() * self.dt.value()
        self.tissue_label.setText(f"{side}×{side} lattice, box {cfg.box:.1f} µm, "
                                  f"{n * cfg.tissue.elements:,} elements; run to t = {t_end:,.6g}")

    def _update_mechanics(self, *_: Any) -> None:
        r = morse_minimum(Morse(self.U0.value(), self.xi1.value(), self.V0.value(), self.xi2.value()))
        held = 0.0 < r < math.inf
        self.mechanics_label.setText(f"pair minimum r* = {r:.2f} µm (relaxed cells pack closer)" if held else
                                     "no intracellular minimum (cells will not hold together)")
        if held:
            self.tissue.set_element_size(r)

    def _update_view_limits(self, *_: Any) -> None:
        self.tissue.min_interval = 1.0 / max(self.fps.value(), 1)
        self.tissue.max_markers = self.max_markers.value()
        if self.tissue.frame is not None:
            self.tissue.redraw()

    # ---- configs ------------------------------------------------------------------------
    def apply_config(self, cfg: EpidermisConfig) -> None:
        self.base_cfg = cfg
        self.show_description(cfg.name, cfg.description)
        self.form.show(cfg)
        self._update_tissue()
        self._update_mechanics()
        self.refresh_steering(cfg)

    def current_config(self) -> EpidermisConfig:
        if self.base_cfg is None:
            raise ConfigError("no epidermis config loaded")
        return self.validate(self.form.read(self.base_cfg))

    # ---- running ------------------------------------------------------------------------
    def start_run(self) -> bool:
        if self.running:
            return False
        self.arrays = None
        self.recorder.clear()
        if self.movie is not None:
            self.movie.discard()
        self.movie = MovieRecorder(self.movie_fps.value()) if self.record_movie.isChecked() else None
        self._update_mechanics()
        started = super().start_run()
        if not started and self.movie is not None:
            self.movie.discard()
            self.movie = None
        self._update_record_label()
        return started

    def make_worker(self, cfg: EpidermisConfig, backend: str, index: int):
        self.run_cfg = cfg
        return super().make_worker(cfg, backend, index)

    def on_frame(self, frame) -> None:
        if self.record_frames.isChecked():
            self.recorder.add(frame)
        self.tissue.readout.setText(self.readout_text(frame))
        self.tissue.set_frame(frame)
        self.history.set_frame(frame)
        self._update_record_label()

    def draw_rest(self, frame) -> None:
        """The initial tissue (its cells on the membrane), before Run."""
        self.tissue.readout.setText(self.readout_text(frame))
        self.tissue.set_frame(frame)

    @staticmethod
    def readout_text(frame) -> str:
        return (f"step {frame.step:,} / {frame.steps:,} · t = {frame.t:,.5g} · "
                f"{frame.cells:,} cell{'' if frame.cells == 1 else 's'} · "
                f"{frame.elements:,} elements · {frame.layers} layer{'s' if frame.layers != 1 else ''} · "
                f"{frame.throughput:,.4g} {frame.throughput_unit}")

    def _record_movie_frame(self) -> None:
        """After each 3D draw of a run that records a movie: render the view into it."""
        movie = self.movie
        if movie is None or movie.finished or not self.tissue.isVisible():
            return
        try:
            movie.add(self.tissue.render())
        except Exception as exc:      # never let a movie problem stop the run or the window
            log.warning("epidermis: movie recording stopped: %s", exc)
            movie.finish()

    def on_finished(self, arrays: dict, summary: dict) -> None:
        self.arrays = arrays or None
        self.tissue.flush()                      # the last frame is drawn (and filmed)
        if self.movie is not None and not self.movie.finished:
            self.attempt("Cannot finish the movie", self.movie.finish)
        self._update_record_label()
        if summary:
            log.info("epidermis: %s steps, %s cells in %.2f s on %s (%s)", summary.get("steps", "?"),
                     summary.get("cells", "?"), summary.get("wall_seconds", 0.0), summary.get("device", "?"),
                     "finished" if summary.get("finished", True) else "stopped")

    def _update_record_label(self) -> None:
        parts = []
        if len(self.recorder):
            parts.append(f"{len(self.recorder)} frames recorded ({self.recorder.nbytes / 1e6:.1f} MB"
                         f"{', full' if self.recorder.full else ''})")
        if self.movie is not None and self.movie.frames:
            parts.append(f"movie: {self.movie.frames} frames{' (finished)' if self.movie.finished else ''}")
        self.record_label.setText("; ".join(parts))

    def clear_views(self) -> None:
        self.tissue.clear()
        self.history.clear()

    def reset(self) -> None:
        if self.running:
            return
        self.recorder.clear()
        if self.movie is not None:
            self.movie.discard()
            self.movie = None
        self._update_record_label()
        super().reset()

    # ---- exports ------------------------------------------------------------------------
    def export_data(self, path: str | Path) -> Path:
        """CSV: the history; NPZ: recorded frames (or the current one), the current frame
        under the headless keys and the history."""
        self.require_frame()
        path = Path(path)
        if path.suffix.lower() == ".csv":
            out = write_history_csv(path, self.last_frame)
        else:
            out = write_frames_npz(path, self.recorder, self.last_frame)
        log.info("exported %s", out)
        return out

    def save_view_png(self, path: str | Path) -> Path:
        """A PNG of the 3D view as rendered (not a screen grab), written atomically."""
        return save_rgba_png(self.tissue.render(), path)

    def export(self, kind: str, path: str | Path) -> Path:
        if kind == "png":
            return self.save_screenshot(path)
        if kind == "png3d":
            out = self.save_view_png(path)
        elif kind == "mp4":
            if self.movie is None:
                raise RuntimeError("no movie recorded: tick 'Record movie (MP4)' before running")
            if not self.movie.finished:
                log.info("epidermis: movie recording ends at this export")
            out = self.movie.save(path)
            self._update_record_label()
        elif kind in ("npz", "csv"):
            return self.export_data(path)
        elif kind in ("ply", "vtk"):
            out = write_point_cloud(path, self.last_frame)
        else:
            raise ValueError(f"unknown export {kind!r}")
        log.info("exported %s", out)
        return out

    # ---- closing ------------------------------------------------------------------------
    def shutdown(self) -> None:
        """Join the worker, finish the movie and release the GL canvas."""
        super().shutdown()
        if self.movie is not None:
            self.movie.finish()
        self.tissue.close_canvas()

    def closeEvent(self, event) -> None:
        self.shutdown()
        super().closeEvent(event)


__all__ = ["EpidermisPanel"]
