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
from PySide6.QtWidgets import QComboBox, QDoubleSpinBox, QLabel, QLineEdit, QSpinBox, QSplitter

from app.gui.forms import ConfigForm, set_value

from app.gui.labels import short_path
from app.gui.panels.base import DeviceProvider, Panel, cpu_device
from app.gui.panels.cardiac_export import write_ply, write_traces_csv, write_vtk
from app.gui.panels.cardiac_model import ModelGroup
from app.gui.steering import EventMarks
from app.gui.views.cardiac import ProbeTraceView, RestitutionView, StepSizeView, TissueView
from app.sims.cardiac.config import ROSENBROCK_DEFAULTS, CardiacConfig, Region
from app.sims.cardiac.rosenbrock import ROSENBROCK
from app.sims.cardiac.solvers import ADAPTIVE, FIXED
from app.sims.common.config import ConfigError
from app.sims.common.output import save_npz
from app.sims.common.simulation import Domain

log = logging.getLogger(__name__)

STIMULUS_PA_PF = -40.0      # a click's stimulus (pA/pF for 2 ms, as the presets' S1/S2)
BRUSH_FACTOR = 0.5          # a scale brush's first factor: half the configured conductance

EXPORTS = (("Traces (CSV)…", "traces", "CSV (*.csv)", "probe traces"),
           ("Maps (NPZ)…", "maps", "NPZ (*.npz)", "per-cell maps (V, activation, APD90), probes and steps"),
           ("Mesh (VTK)…", "vtk", "VTK (*.vtk)", "the mesh with its maps, for ParaView"),
           ("Mesh (PLY)…", "ply", "PLY (*.ply)", "the mesh with its maps"),
           ("Screenshot (PNG)…", "png", "PNG (*.png)", "the views"),
           ("Model (CellML 2.0)…", "cellml", "CellML (*.cellml)",
            "the cell model as run, with its parameter changes (one file per parameter region)"))


def region_for(kind: str, region: Region, dx: float) -> Region:
    """A preset's stimulus region carried over to another mesh kind: a sphere cap becomes
    the sheet's left edge (three columns: 2.5 cells of tissue, the edge column holding half a
    cell), a sheet rectangle becomes a 10° cap at the pole."""
    if kind == "sheet" and region.kind == "cap":
        return Region(kind="rect", x0=-1e9, x1=2.5 * dx, y0=-1e9, y1=1e9)
    if kind == "sphere" and region.kind == "rect":
        return Region(kind="cap", center=[0.0, 0.0, 1.0], angle_deg=10.0)
    if kind == "single" and region.kind != "all":
        return Region(kind="all")
    return region


class CardiacPanel(Panel):
    """Controls and live views of a cardiac tissue run."""

    MOVIE_VIEW = "tissue"
    REST_PREVIEW = True

    def __init__(self, domain: Domain, device: DeviceProvider = cpu_device, parent=None):
        super().__init__(domain, device, parent)
        self.base_cfg: CardiacConfig | None = None
        self.running_cfg: CardiacConfig | None = None
        self.arrays: dict | None = None
        self.mesh = None
        self.extra_probes: list[int] = []
        self._method_shown = ""             # the solver method the form showed last (_update_solver)
        self.form = ConfigForm(CardiacConfig)
        self.controls_layout.addWidget(self.preset_picker("Preset")[0])
        self.model_group = ModelGroup()
        self.model_group.open_button.clicked.connect(
            lambda: self.ask_file("Open CellML model", "CellML (*.cellml *.xml)", self.open_cellml))
        self.controls_layout.addWidget(self.model_group)
        self._build_mesh_group()
        self._build_solver_group()
        self._build_protocol_group()
        self.form.expose(self, {"mesh.kind": "mesh_kind", "mesh.dx_mm": "dx"})
        self.steer_form(self.form)
        self.controls_layout.addWidget(self.brush_tool("mm"))
        self.controls_layout.addWidget(self.steering_box("Steer while running"))
        self.controls_layout.addWidget(self.export_group(EXPORTS))
        self.controls_layout.addStretch(1)
        self._build_views()
        self.open_default_preset()

    # ---- construction -------------------------------------------------------------------
    def _build_mesh_group(self) -> None:
        box = self.form.group("Mesh", [("mesh.kind", "Kind"), ("mesh.level", "Sphere level"), ("mesh.nx", "Sheet nx"),
                                       ("mesh.ny", "Sheet ny"), ("mesh.dx_mm", "Sheet dx (mm)"), ("D", "D (mm²/ms)")])
        self.cells_label = QLabel()
        box.layout().addRow("", self.cells_label)
        for path in ("mesh.level", "mesh.nx", "mesh.ny"):
            self.form[path].valueChanged.connect(self._update_cells)
        self.form["mesh.kind"].currentTextChanged.connect(self._update_cells)
        self.controls_layout.addWidget(box)

    def _build_solver_group(self) -> None:
        box = self.form.group("Solver", [("solver.method", "Method"), ("solver.dt", "Δt / first step (ms)"),
                                         ("solver.at", "at (abs. tol.)"), ("solver.rt", "rt (rel. tol.)"),
                                         ("solver.dt_max", "Max step (ms)"), ("solver.precision", "Precision"),
                                         ("solver.lookup_tables", "Voltage lookup tables"),
                                         ("solver.split_dt", "Split step (ms; 0 = off)"),
                                         ("solver.split", "Splitting")])
        box.layout().addRow("Backend", self.backend_combo())
        self.form["solver.method"].currentTextChanged.connect(self._update_solver)
        self.controls_layout.addWidget(box)

    def _build_protocol_group(self) -> None:
        box = self.form.group("Protocol", [("protocol.t_end", "Run length (ms)")])
        self.period = QDoubleSpinBox(decimals=2, minimum=1e-3, maximum=1e8, singleStep=50.0)
        self.count = QSpinBox(minimum=1, maximum=100000)
        self.probe_cells = QLineEdit(placeholderText="cell indices, e.g. 0, 12 (or click the tissue)")
        self.stimuli_label = QLabel(wordWrap=True)
        for label, widget in (("S1 period (ms)", self.period), ("S1 count", self.count)):
            box.layout().addRow(label, widget)
        self.form.rows(box.layout(), ["output.random_probes"])
        box.layout().addRow("Probe cells", self.probe_cells)
        box.layout().addRow("Stimuli", self.stimuli_label)
        self.rest_kind = QComboBox()
        self.rest_kind.addItems(["none", "s1s2", "dynamic"])
        self.rest_kind.setToolTip("restitution protocol: replaces the stimuli and the run length")
        self.rest_intervals = QLineEdit(
            placeholderText="S2 coupling intervals or pacing periods (ms), e.g. 600, 400, 330")
        self.rest_apd = QComboBox()
        self.rest_apd.addItem("S1-referenced (towards the S1 rest)", "s1")
        self.rest_apd.addItem("per beat (own rest and peak)", "per_beat")
        for label, widget in (("Restitution", self.rest_kind), ("Intervals (ms)", self.rest_intervals),
                              ("APD90 shown", self.rest_apd)):
            box.layout().addRow(label, widget)
        self.controls_layout.addWidget(box)

    def _build_views(self) -> None:
        self.tissue = TissueView()
        self.traces = ProbeTraceView()
        self.steps = StepSizeView()
        self.restitution_view = RestitutionView()
        self.tissue.cell_clicked.connect(self.tissue_clicked)
        self.tissue.cell_dragged.connect(self.tissue_dragged)
        bottom = QSplitter(Qt.Orientation.Horizontal)
        bottom.addWidget(self.traces)
        bottom.addWidget(self.steps)
        bottom.addWidget(self.restitution_view)
        bottom.setSizes([550, 250, 250])
        self.views.addWidget(self.tissue)
        self.views.addWidget(bottom)
        self.views.setSizes([480, 300])
        self.rest_kind.currentTextChanged.connect(self._show_applicable_views)
        self._show_applicable_views()
        self.mesh_kind.currentTextChanged.connect(self.tissue.expect)
        self.event_marks.append(EventMarks(self.traces.plot))


    def _update_cells(self, *_: Any) -> None:
        kind = self.mesh_kind.currentText()
        for w in (self.level,):
            w.setEnabled(kind == "sphere")
        for w in (self.nx, self.ny, self.dx):
            w.setEnabled(kind == "sheet")
        if kind == "file":               # a mesh file the config names: its nodes are the cells
            self.cells_label.setText("cells: the mesh file's nodes")
            return
        n = {"sphere": 10 * 4 ** self.level.value() + 2, "sheet": self.nx.value() * self.ny.value(),
             "single": 1}[kind]
        self.cells_label.setText(f"{n:,} cell{'' if n == 1 else 's'}")

    def _update_solver(self, *_: Any) -> None:
        adaptive = self.method.currentText() in ADAPTIVE
        for w in (self.at, self.rt, self.dt_max):
            w.setEnabled(adaptive)
        for w in (self.split_dt, self.split):        # cell substeps of a fixed-step method
            w.setEnabled(self.method.currentText() in FIXED)
        rosenbrock = self.method.currentText() in ROSENBROCK
        if rosenbrock:                   # what a Rosenbrock method runs in (the config refuses the rest)
            self.precision.setCurrentText("float64")
            self.lookup_tables.setChecked(False)
            if self._method_shown not in ROSENBROCK:     # a fixed step's at = 1, rt = 0 would be no control
                for key in ("at", "rt", "dt_max"):       # (a loaded config's own values follow: form order)
                    set_value(self.form[f"solver.{key}"], ROSENBROCK_DEFAULTS[key])
        self._method_shown = self.method.currentText()
        for w in (self.precision, self.lookup_tables):
            w.setEnabled(not rosenbrock)
        self._show_applicable_views()

    def _show_applicable_views(self, *_: Any) -> None:
        """The step-size plot for adaptive solvers only, the restitution plot for restitution
        protocols only (an empty plot tells a user nothing)."""
        if hasattr(self, "steps"):
            self.steps.setVisible(self.method.currentText() in ADAPTIVE)
            self.restitution_view.setVisible(self.rest_kind.currentText() != "none")

    # ---- configs ------------------------------------------------------------------------
    def apply_config(self, cfg: CardiacConfig) -> None:
        self.base_cfg = cfg
        self.show_description(cfg.name, cfg.description)
        self.form.show(cfg)
        self.tissue.expect(cfg.mesh.kind)
        p = cfg.protocol
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
        self.probe_cells.setText(", ".join(str(c) for c in cfg.output.probe_cells))
        self._update_cells()
        self._update_solver()
        self.refresh_steering(cfg)

    def probe_list(self) -> list[int]:
        text = self.probe_cells.text().replace(";", ",")
        try:
            return [int(x) for x in text.split(",") if x.strip()]
        except ValueError:
            raise ConfigError(f"probe cells: '{text}' is not a list of cell indices") from None

    def current_config(self) -> CardiacConfig:
        if self.base_cfg is None:
            raise ConfigError("no cardiac config loaded")
        b = self.form.read(self.base_cfg)
        stimuli = [replace(st, region=region_for(b.mesh.kind, st.region, b.mesh.dx_mm)) for st in b.protocol.stimuli]
        if stimuli:
            stimuli[0] = replace(stimuli[0], period=self.period.value(), count=self.count.value())
        try:
            model = self.model_group.settings(b.model)
        except ConfigError:
            raise
        except Exception as exc:          # an import error of a picked file
            raise ConfigError(str(exc)) from None
        return self.validate(replace(b, protocol=replace(b.protocol, stimuli=stimuli), model=model,
                                     output=replace(b.output, probe_cells=self.probe_list()),
                                     restitution=self._restitution(b)))

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
        if b.mesh.kind == "single":
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

    def movie_image(self):
        """The sphere through its own renderer (an OpenGL canvas does not grab), else the view."""
        if self.tissue.kind == "sphere" and self.tissue.sphere is not None:
            return self.tissue.sphere.render()
        return super().movie_image()

    def tissue_clicked(self, cell: int) -> None:
        """A click on the tissue: stimulate there (during a run), paint the brush's gesture, or
        add a probe, as chosen."""
        action = self.tissue.click_action.currentData()
        if action == "stimulate" and self.running:
            self.stimulate(cell)
        elif action == "paint":
            self.paint_cell(cell)
        else:
            self.add_probe(cell)

    def tissue_dragged(self, cell: int) -> None:
        """A drag over the sheet (stimulate or paint) or over a surface (paint), every millimetre."""
        if self.tissue.click_action.currentData() == "paint":
            self.paint_cell(cell)
        else:
            self.stimulate(cell)

    def paint_cell(self, cell: int) -> bool:
        """A dab of the brush centred on ``cell`` (its position in mm)."""
        if self.mesh is None or not 0 <= cell < len(self.mesh.positions):
            return False
        return self.paint(np.asarray(self.mesh.positions[cell], float))

    def stimulate(self, cell: int) -> bool:
        """Inject a stimulus pulse around ``cell`` into the running simulation (between slices)."""
        if not self.running or self.tissue.click_action.currentData() != "stimulate":
            return False
        from app.sims.cardiac.stimulate import click_region

        if self.mesh is None:
            return False
        return self.steer("stimulate", STIMULUS_PA_PF, click_region(self.mesh.positions, int(cell)))

    def steer_values(self, cfg: CardiacConfig) -> dict[str, Any]:
        """The brush's starting values: the click stimulus, each paintable parameter's value
        and its scale factor (:data:`BRUSH_FACTOR`)."""
        from app.sims.cardiac.model import config_model

        values: dict[str, Any] = {"stimulate": STIMULUS_PA_PF}
        if cfg.model.paintable:
            for p in config_model(cfg.model).parameters:
                if p.qname in cfg.model.paintable:
                    values[f"model.{p.qname}"] = float(cfg.model.parameters.get(p.qname, p.default))
                    values[f"scale.{p.qname}"] = BRUSH_FACTOR
        return values

    # ---- running ------------------------------------------------------------------------
    def start_run(self) -> bool:
        self.arrays = None
        self.mesh = None                         # the first frame carries it
        try:
            self.running_cfg = self.current_config()
        except Exception:
            return super().start_run()           # reports the error
        self.restitution_view.clear()
        self.traces.live = {}
        return super().start_run()

    def status_text(self, frame) -> str:
        return f"{frame.throughput:.3g} sim ms/s, {frame.status}"

    def on_frame(self, frame) -> None:
        if frame.mesh is not self.mesh:          # the run's mesh comes with its frames
            self.mesh = frame.mesh
            self.tissue.set_mesh(frame.mesh)
        self.tissue.set_frame(frame)
        self.traces.set_frame(frame)
        self.steps.set_frame(frame)
        self._show_restitution(frame)

    def open_cellml(self, path: str | Path) -> None:
        """Use the cell model of a CellML file with the current mesh, solver and protocol; the
        preset box and description then say so (they no longer describe the preset's model)."""
        self.model_group.add_file(str(path))
        name = Path(path).name
        self.show_description(f"CellML model: {name}",
                              "The cell model from this file on the mesh, solver and protocol set "
                              "below (from the previous preset); its parameters are in the table.")
        self.config_path = None
        self.mark_loaded(name, f"CellML: {short_path(name)}", str(Path(path).resolve()))

    def method_note(self) -> str:
        model = self.model_group.picker.currentText()
        return f"cell model {model}" + (f" ({self.loaded})" if self.loaded else "")

    def draw_rest(self, frame) -> None:
        """The tissue at rest (coloured by its resting V), before Run."""
        self.mesh = frame.mesh
        self.tissue.set_mesh(frame.mesh)
        self.tissue.set_frame(frame)

    def rest_preview_wanted(self, cfg: CardiacConfig) -> bool:
        """Sheets and spheres up to level 5 (a level-7 sphere takes ~20 s to build on 2 cores)."""
        return cfg.mesh.kind != "sphere" or cfg.mesh.level <= 5

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
            self.tissue.show_activation(arrays["activation_time"], arrays.get("activation_last"))
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
        f = self.require_frame()
        out = {"V": np.asarray(f.V)}
        a = self.arrays or {}
        for key in ("activation_time", "activation_last", "apd90"):
            if key in a:
                out[key] = np.asarray(a[key])
        return out

    def export_data(self, path: str | Path) -> Path:
        """CSV: probe traces; NPZ: the maps, probe traces and step history."""
        self.require_frame()
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
        if kind == "cellml":
            from app.sims.cardiac.export_cellml import write_model_as_run
            written = write_model_as_run(self.current_config().model, path)
            log.info("exported %s", ", ".join(map(str, written)))
            return written[0]
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
