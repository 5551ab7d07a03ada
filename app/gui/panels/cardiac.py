"""The cardiac tissue panel: any CellML cell model on a geodesic sphere, a sheet or a single cell.

Controls: preset or YAML file, the cell model (shipped or a CellML file), its parameters and a
region with other values, mesh and size, solver and its settings, protocol (run length,
stimulus period and count), probes, backend. Views: the tissue (vispy sphere, rotate and
zoom, click a cell to add a probe; or the sheet as an image) coloured by V and, when a run
ends, by activation time; the probe traces; the step-size history of adaptive solvers; the
status bar shows simulated ms per wall second. Exports: traces (CSV), maps (NPZ), the mesh
with values (VTK or PLY, for ParaView), PNG.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QComboBox, QDoubleSpinBox, QFormLayout, QGridLayout, QGroupBox,
                               QLabel, QLineEdit, QPushButton, QSpinBox, QSplitter)

from app.gui.panels.base import DeviceProvider, Panel, cpu_device
from app.gui.panels.cardiac_export import write_ply, write_traces_csv, write_vtk
from app.gui.panels.cardiac_model import ModelGroup
from app.gui.views.cardiac import ProbeTraceView, RestitutionView, StepSizeView, TissueView
from app.sims.cardiac.config import MESH_KINDS, CardiacConfig, Region
from app.sims.cardiac.engine import build_mesh
from app.sims.cardiac.solvers import ADAPTIVE, METHODS
from app.sims.common.config import ConfigError
from app.sims.common.output import save_npz
from app.sims.common.simulation import Domain, presets

log = logging.getLogger(__name__)


def _double(lo: float, hi: float, decimals: int, step: float) -> QDoubleSpinBox:
    box = QDoubleSpinBox()
    box.setRange(lo, hi)
    box.setDecimals(decimals)
    box.setSingleStep(step)
    return box


def region_for(kind: str, region: Region, dx: float) -> Region:
    """A preset's stimulus region carried over to another mesh kind: a sphere cap becomes
    the sheet's left edge (two columns), a sheet rectangle becomes a 10° cap at the pole."""
    if kind == "sheet" and region.kind == "cap":
        return Region(kind="rect", x0=-1e9, x1=1.5 * dx, y0=-1e9, y1=1e9)
    if kind == "sphere" and region.kind == "rect":
        return Region(kind="cap", center=[0.0, 0.0, 1.0], angle_deg=10.0)
    if kind == "single" and region.kind != "all":
        return Region(kind="all")
    return region


class CardiacPanel(Panel):
    """Controls and live views of a cardiac tissue run."""

    def __init__(self, domain: Domain, device: DeviceProvider = cpu_device, parent=None):
        super().__init__(domain, device, parent)
        self.base_cfg: CardiacConfig | None = None
        self.running_cfg: CardiacConfig | None = None
        self.arrays: dict | None = None
        self.mesh = None
        self.extra_probes: list[int] = []
        self._build_preset_group()
        self.model_group = ModelGroup()
        self.model_group.open_button.clicked.connect(
            lambda: self.ask_file("Open CellML model", "CellML (*.cellml *.xml)", self.model_group.add_file))
        self.controls_layout.addWidget(self.model_group)
        self._build_mesh_group()
        self._build_solver_group()
        self._build_protocol_group()
        self._build_export_group()
        self.controls_layout.addStretch(1)
        self._build_views()
        self.open_default_preset()

    # ---- construction -------------------------------------------------------------------
    def _build_preset_group(self) -> None:
        box, self.preset_combo, self.description = self.preset_picker("Preset", presets("cardiac"))
        self.controls_layout.addWidget(box)

    def _build_mesh_group(self) -> None:
        box = QGroupBox("Mesh")
        self.mesh_kind = QComboBox()
        self.mesh_kind.addItems(MESH_KINDS)
        self.level = QSpinBox()
        self.level.setRange(0, 9)
        self.level.setToolTip("sphere subdivisions: 10·4^level + 2 cells (7 = 163,842)")
        self.nx, self.ny = QSpinBox(), QSpinBox()
        for b in (self.nx, self.ny):
            b.setRange(1, 8192)
        self.dx = _double(1e-4, 100.0, 4, 0.05)
        self.D = _double(0.0, 100.0, 4, 0.01)
        self.cells_label = QLabel()
        form = QFormLayout(box)
        for label, widget in (("Kind", self.mesh_kind), ("Sphere level", self.level), ("Sheet nx", self.nx),
                              ("Sheet ny", self.ny), ("Sheet dx (mm)", self.dx), ("D (mm²/ms)", self.D),
                              ("", self.cells_label)):
            form.addRow(label, widget)
        for w in (self.level, self.nx, self.ny):
            w.valueChanged.connect(self._update_cells)
        self.mesh_kind.currentTextChanged.connect(self._update_cells)
        self.controls_layout.addWidget(box)

    def _build_solver_group(self) -> None:
        box = QGroupBox("Solver")
        self.method = QComboBox()
        self.method.addItems(list(METHODS))
        self.dt = _double(1e-6, 10.0, 5, 0.01)
        self.at = _double(0.0, 1e6, 6, 0.01)
        self.rt = _double(0.0, 1.0, 7, 1e-4)
        self.dt_max = _double(1e-6, 100.0, 4, 0.1)
        self.precision = QComboBox()
        self.precision.addItems(["float32", "float64"])
        self.backend_combo()
        form = QFormLayout(box)
        for label, widget in (("Method", self.method), ("Δt / first step (ms)", self.dt),
                              ("at (abs. tol.)", self.at), ("rt (rel. tol.)", self.rt),
                              ("Max step (ms)", self.dt_max), ("Precision", self.precision),
                              ("Backend", self.backend)):
            form.addRow(label, widget)
        self.method.currentTextChanged.connect(self._update_solver)
        self.controls_layout.addWidget(box)

    def _build_protocol_group(self) -> None:
        box = QGroupBox("Protocol")
        self.t_end = _double(1e-3, 1e8, 2, 10.0)
        self.period = _double(1e-3, 1e8, 2, 50.0)
        self.count = QSpinBox()
        self.count.setRange(1, 100000)
        self.random_probes = QSpinBox()
        self.random_probes.setRange(0, 100000)
        self.probe_cells = QLineEdit()
        self.probe_cells.setPlaceholderText("cell indices, e.g. 0, 12 (or click the tissue)")
        self.stimuli_label = QLabel()
        self.stimuli_label.setWordWrap(True)
        self.rest_kind = QComboBox()
        self.rest_kind.addItems(["none", "s1s2", "dynamic"])
        self.rest_kind.setToolTip("restitution protocol: replaces the stimuli and the run length")
        self.rest_intervals = QLineEdit()
        self.rest_intervals.setPlaceholderText("S2 coupling intervals or pacing periods (ms), e.g. 600, 400, 330")
        self.rest_apd = QComboBox()
        self.rest_apd.addItem("S1-referenced (towards the S1 rest)", "s1")
        self.rest_apd.addItem("per beat (own rest and peak)", "per_beat")
        form = QFormLayout(box)
        for label, widget in (("Run length (ms)", self.t_end), ("S1 period (ms)", self.period),
                              ("S1 count", self.count),
                              ("Random probes", self.random_probes), ("Probe cells", self.probe_cells),
                              ("Stimuli", self.stimuli_label), ("Restitution", self.rest_kind),
                              ("Intervals (ms)", self.rest_intervals), ("APD90 shown", self.rest_apd)):
            form.addRow(label, widget)
        self.controls_layout.addWidget(box)

    def _build_export_group(self) -> None:
        box = QGroupBox("Export")
        grid = QGridLayout(box)
        for k, (text, kind, pattern) in enumerate((
                ("Traces (CSV)…", "traces", "CSV (*.csv)"), ("Maps (NPZ)…", "maps", "NPZ (*.npz)"),
                ("Mesh (VTK)…", "vtk", "VTK (*.vtk)"), ("Mesh (PLY)…", "ply", "PLY (*.ply)"),
                ("Screenshot (PNG)…", "png", "PNG (*.png)"))):
            button = QPushButton(text)
            button.clicked.connect(lambda _=False, kind=kind, pattern=pattern: self.ask_export(kind, pattern))
            grid.addWidget(button, k // 2, k % 2)
        self.controls_layout.addWidget(box)

    def _build_views(self) -> None:
        self.tissue = TissueView()
        self.traces = ProbeTraceView()
        self.steps = StepSizeView()
        self.restitution_view = RestitutionView()
        self.tissue.cell_clicked.connect(self.add_probe)
        bottom = QSplitter(Qt.Orientation.Horizontal)
        bottom.addWidget(self.traces)
        bottom.addWidget(self.steps)
        bottom.addWidget(self.restitution_view)
        bottom.setSizes([550, 250, 250])
        self.views.addWidget(self.tissue)
        self.views.addWidget(bottom)
        self.views.setSizes([480, 300])

    def _update_cells(self, *_: Any) -> None:
        kind = self.mesh_kind.currentText()
        for w in (self.level,):
            w.setEnabled(kind == "sphere")
        for w in (self.nx, self.ny, self.dx):
            w.setEnabled(kind == "sheet")
        n = {"sphere": 10 * 4 ** self.level.value() + 2, "sheet": self.nx.value() * self.ny.value(),
             "single": 1}[kind]
        self.cells_label.setText(f"{n:,} cells")

    def _update_solver(self, *_: Any) -> None:
        adaptive = self.method.currentText() in ADAPTIVE
        for w in (self.at, self.rt, self.dt_max):
            w.setEnabled(adaptive)

    # ---- configs ------------------------------------------------------------------------
    def apply_config(self, cfg: CardiacConfig) -> None:
        self.base_cfg = cfg
        self.description.setText(f"<b>{cfg.name}</b><br>{cfg.description.strip()}")
        m, s, p, o = cfg.mesh, cfg.solver, cfg.protocol, cfg.output
        self.mesh_kind.setCurrentText(m.kind)
        self.level.setValue(m.level)
        self.nx.setValue(m.nx)
        self.ny.setValue(m.ny)
        self.dx.setValue(m.dx_mm)
        self.D.setValue(cfg.D)
        self.method.setCurrentText(s.method)
        self.dt.setValue(s.dt)
        self.at.setValue(s.at)
        self.rt.setValue(s.rt)
        self.dt_max.setValue(s.dt_max)
        self.precision.setCurrentText(s.precision)
        self.t_end.setValue(p.t_end)
        if p.stimuli:
            self.period.setValue(p.stimuli[0].period)
            self.count.setValue(p.stimuli[0].count)
        self.stimuli_label.setText("; ".join(
            f"{st.name}: {st.amplitude:g} pA/pF × {st.duration:g} ms at {st.start:g} ms"
            f"{f', every {st.period:g} ms × {st.count}' if st.count > 1 else ''} ({st.region.kind})"
            for st in p.stimuli))
        self.attempt("Cell model", self.model_group.set_settings, cfg.model)
        r = cfg.restitution
        self.rest_kind.setCurrentText(r.kind)
        self.rest_intervals.setText(", ".join(f"{x:g}" for x in (r.periods if r.kind == "dynamic" else r.s2_intervals)))
        self.rest_apd.setCurrentIndex(self.rest_apd.findData(r.apd))
        self.random_probes.setValue(o.random_probes)
        self.probe_cells.setText(", ".join(str(c) for c in o.probe_cells))
        self._update_cells()
        self._update_solver()

    def probe_list(self) -> list[int]:
        text = self.probe_cells.text().replace(";", ",")
        try:
            return [int(x) for x in text.split(",") if x.strip()]
        except ValueError:
            raise ConfigError(f"probe cells: '{text}' is not a list of cell indices") from None

    def current_config(self) -> CardiacConfig:
        if self.base_cfg is None:
            raise ConfigError("no cardiac config loaded")
        b = self.base_cfg
        kind = self.mesh_kind.currentText()
        mesh = replace(b.mesh, kind=kind, level=self.level.value(), nx=self.nx.value(), ny=self.ny.value(),
                       dx_mm=self.dx.value())
        stimuli = [replace(st, region=region_for(kind, st.region, self.dx.value())) for st in b.protocol.stimuli]
        if stimuli:
            stimuli[0] = replace(stimuli[0], period=self.period.value(), count=self.count.value())
        protocol = replace(b.protocol, t_end=self.t_end.value(), stimuli=stimuli)
        solver = replace(b.solver, method=self.method.currentText(), dt=self.dt.value(), at=self.at.value(),
                         rt=self.rt.value(), dt_max=self.dt_max.value(),
                         precision=self.precision.currentText())
        output = replace(b.output, random_probes=self.random_probes.value(), probe_cells=self.probe_list())
        try:
            model = self.model_group.settings(b.model)
        except ConfigError:
            raise
        except Exception as exc:          # an import error of a picked file
            raise ConfigError(str(exc)) from None
        return self.validate(replace(b, mesh=mesh, D=self.D.value(), protocol=protocol, solver=solver,
                                     output=output, model=model, restitution=self._restitution(b)))

    def _restitution(self, b: CardiacConfig):
        kind = self.rest_kind.currentText()
        r = replace(b.restitution, kind=kind, apd=self.rest_apd.currentData())
        if kind == "none":
            return r
        text = self.rest_intervals.text().replace(";", ",")
        try:
            values = [float(x) for x in text.split(",") if x.strip()]
        except ValueError:
            raise ConfigError(f"restitution intervals: '{text}' is not a list of numbers (ms)") from None
        if self.mesh_kind.currentText() == "single":
            r = replace(r, region=Region(kind="all"))
        elif b.protocol.stimuli:
            r = replace(r, region=b.protocol.stimuli[0].region)
        return replace(r, **({"periods": values} if kind == "dynamic" else {"s2_intervals": values}))

    # ---- probes -------------------------------------------------------------------------
    def add_probe(self, cell: int) -> None:
        """A clicked cell: traced live from now on, and a probe of the next run."""
        cells = self.probe_list() if self.probe_cells.text().strip() else []
        if cell not in cells:
            cells.append(int(cell))
            self.probe_cells.setText(", ".join(str(c) for c in cells))
        self.traces.add_live_probe(int(cell))
        log.info("cardiac: probe at cell %d", cell)

    # ---- running ------------------------------------------------------------------------
    def start_run(self) -> bool:
        try:
            cfg = self.current_config()
            mesh = build_mesh(cfg)
        except Exception:
            return super().start_run()          # reports the error
        self.arrays = None
        self.mesh = mesh
        self.running_cfg = cfg
        self.restitution_view.clear()
        self.tissue.set_mesh(mesh)
        self.traces.live = {}
        return super().start_run()

    def status_text(self, frame) -> str:
        return f"{frame.throughput:.3g} sim ms/s, {frame.status}"

    def on_frame(self, frame) -> None:
        self.tissue.set_frame(frame)
        self.traces.set_frame(frame)
        self.steps.set_frame(frame)
        self._show_restitution(frame)

    def _show_restitution(self, frame) -> None:
        """The restitution curve from the first probe's trace so far (live)."""
        cfg = self.running_cfg
        if cfg is None or cfg.restitution.kind == "none" or frame.probe_t is None or len(frame.probe_t) < 4:
            return
        from app.sims.cardiac.config import restitution_pulses
        from app.sims.cardiac.restitution import curve
        rows = curve(np.asarray(frame.probe_t), np.asarray(frame.probe_V)[:, 0], restitution_pulses(cfg),
                     t_end=cfg.protocol.t_end)
        self.restitution_view.set_rows(rows, cfg.restitution.apd)

    def on_finished(self, arrays: dict, summary: dict) -> None:
        self.arrays = arrays or None
        if arrays and "activation_time" in arrays and self.mesh is not None and self.mesh.kind != "single":
            self.tissue.show_activation(arrays["activation_time"])
        if summary:
            log.info("cardiac: %.1f ms simulated in %.2f s on %s, %d steps (%s)",
                     summary.get("sim_ms", 0.0), summary.get("wall_seconds", 0.0), summary.get("device", "?"),
                     summary.get("steps_accepted", 0), "finished" if summary.get("finished") else "stopped")

    def clear_views(self) -> None:
        for view in (self.tissue, self.traces, self.steps, self.restitution_view):
            view.clear()

    # ---- exports ------------------------------------------------------------------------
    def maps(self) -> dict[str, np.ndarray]:
        """Per-cell maps of the last run: V now, and activation / APD90 when it ended."""
        f = self.last_frame
        if f is None:
            raise RuntimeError("nothing to export yet: run the simulation first")
        out = {"V": np.asarray(f.V)}
        a = self.arrays or {}
        for key in ("activation_time", "activation_last", "apd90"):
            if key in a:
                out[key] = np.asarray(a[key])
        return out

    def export_data(self, path: str | Path) -> Path:
        """CSV: probe traces; NPZ: the maps, probe traces and step history."""
        if self.last_frame is None:
            raise RuntimeError("nothing to export yet: run the simulation first")
        path = Path(path)
        if path.suffix.lower() == ".csv":
            out = write_traces_csv(path, self.last_frame)
        else:
            f = self.last_frame
            arrays = {**self.maps(), "probe_index": f.probe_index, "probe_t": f.probe_t, "probe_V": f.probe_V}
            if self.mesh is not None:
                arrays["positions"] = self.mesh.positions
            if f.h_t is not None:
                arrays.update(h_t=f.h_t, h=f.h)
            out = save_npz(path, arrays)
        log.info("exported %s", out)
        return out

    def export(self, kind: str, path: str | Path) -> Path:
        if kind == "png":
            return self.save_screenshot(path)
        if kind in ("traces", "maps"):
            return self.export_data(path)
        if self.mesh is None or self.mesh.kind == "single":
            raise RuntimeError("no tissue to export: run a sphere or a sheet first")
        values = self.maps()
        out = (write_vtk if kind == "vtk" else write_ply)(path, self.mesh, values)
        log.info("exported %s", out)
        return out

    def shutdown(self) -> None:
        super().shutdown()
        if self.tissue.sphere is not None:
            self.tissue.sphere.close_canvas()
