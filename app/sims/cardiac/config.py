"""The cardiac run config: mesh, model parameters, stimulus protocol, solver, outputs."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from app.sims.cardiac.rosenbrock import ROSENBROCK
from app.sims.cardiac.solvers import ADAPTIVE, AUTO, IMPLICIT, METHODS
from app.sims.common.config import Document, build, spec
from app.sims.common.steering import Steerable, SteeringEvent, by_key, check_steering

MESH_KINDS = ("sphere", "sheet", "single", "file")
MAX_STIMULI = 32          # stimulus entries of one run (a bit each in the cells' masks)
# V copies a CUDA run of fixed steps keeps on the device until they are read (readout grids):
# as many as VOLTAGE_SNAPSHOT_BYTES hold, within these bounds (see voltage_snapshots)
VOLTAGE_SNAPSHOTS = (8, 512)
VOLTAGE_SNAPSHOT_BYTES = 256 << 20
REGION_KINDS = ("all", "cap", "rect", "cells")
PRECISIONS = ("float32", "float64", "mixed")
MAX_LOOKUP_ROWS = 200_000   # voltage lookup table rows (0.001 mV over 200 mV)

# CVODE where the config does not say: APD90 within 0.1 % of CVODES at 1e-8 on the Chaste
# corpus (docs/user-guide/cellml-corpus.md)
CVODE_DEFAULTS = {"at": 1e-7, "rt": 1e-7, "precision": "float64", "dt_max": 1.0, "dt_min": 1e-12}
# a Rosenbrock method where the config does not say (float64 only: its tolerances are far below
# float32's). At 1e-6 its steps are long enough in diastole that dt_max bounds them: on CiPA, Shannon,
# Grandi, Iyer 2004 and ToRORd (20 beats, the corpus protocol) dt_max 10 ms took
# half the steps of 1 ms (10,466-13,622 against 24,888-27,710), APD90 within 0.002 % of CVODES with both.
ROSENBROCK_DEFAULTS = {"at": 1e-6, "rt": 1e-6, "precision": "float64", "dt_max": 10.0, "dt_min": 1e-12}
# solver.method auto, per engine: CVODE on the CPU, RODAS4 on CUDA (one GPU thread has no CVODE).
# On an H100 (scripts/cardiac/cellml_corpus.py --runs cuda, 20 beats of the Chaste
# corpus) RODAS4 brought all 75 compared models within 0.12 % of CVODES's APD90 in 2,400-25,000
# steps; the explicit bs32 at 1e-6 it replaces reached 63 (12 stiff Markov models did not finish in
# 270 s) and took 758 s on those 63 against RODAS4's 447 s.
AUTO_SOLVERS = {"cpu": {"method": "cvode", **CVODE_DEFAULTS},
                "cuda": {"method": "rodas4", **ROSENBROCK_DEFAULTS}}
AUTO_FIXED = ("at", "rt", "dt", "dt_min", "dt_max", "precision", "rush_larsen", "lookup_tables")


@dataclass(frozen=True)
class Conductivity:
    """Monodomain conductivities of a mesh from a file (mS/mm = S/m): along the fibres, across
    them in the sheet, and normal to the sheet (0 = as across)."""

    along: float = field(default=0.34, metadata=spec(range=(0.0, 1e3), unit="mS/mm"))
    across: float = field(default=0.06, metadata=spec(range=(0.0, 1e3), unit="mS/mm"))
    sheet: float = field(default=0.0, metadata=spec(range=(0.0, 1e3), unit="mS/mm",
                         doc="normal to the sheet; 0 = as across"))


@dataclass(frozen=True)
class MeshSettings:
    """The tissue's mesh. ``file``: a triangle surface or tetrahedral volume (openCARP
    .pts/.elem/.lon or any format meshio reads), relative paths from the config's folder;
    diffusion by linear finite elements with D = σ/(χ Cm) per direction (``D`` is not used)."""

    kind: str = field(default="sphere", metadata=spec(choices=MESH_KINDS))
    level: int = field(default=7, metadata=spec(range=(0, 9), doc="sphere subdivisions; 7 = 163,842 cells"))
    radius_mm: float = field(default=0.0, metadata=spec(range=(0.0, 1e4),
                             doc="sphere radius; 0 = mean spacing 0.2 mm"))
    nx: int = field(default=100, metadata=spec(range=(1, 8192)))
    ny: int = field(default=100, metadata=spec(range=(1, 8192)))
    dx_mm: float = field(default=0.2, metadata=spec(range=(1e-4, 100.0)))
    path: str = field(default="", metadata=spec(doc="mesh file (kind file)"))
    unit_mm: float = field(default=0.0, metadata=spec(range=(0.0, 1e6),
                           doc="mm per file unit; 0 = the format's (openCARP µm, others mm)"))
    conductivity: Conductivity = field(default_factory=Conductivity)
    chi: float = field(default=140.0, metadata=spec(range=(1e-6, 1e6), unit="1/mm",
                       doc="membrane surface-to-volume ratio"))
    cm: float = field(default=0.01, metadata=spec(range=(1e-9, 1e3), unit="µF/mm²",
                      doc="membrane capacitance"))
    electrodes: list[list[float]] = field(default_factory=list, metadata=spec(
        doc="pseudo-ECG electrode positions (mm, the mesh's frame), recorded every output.readout_every ms"))
    tag_conductivity: dict[str, float] = field(default_factory=dict, metadata=spec(
        doc="element tag -> factor on the conductivities of its elements (0: a non-conducting scar)"))


@dataclass(frozen=True)
class Region:
    """Cells a stimulus reaches. ``cap``: sphere cells within ``angle_deg`` of ``center``;
    ``rect``: sheet cells with x0 <= x <= x1, y0 <= y <= y1 (mm); ``cells``: indices."""

    kind: str = field(default="all", metadata=spec(choices=REGION_KINDS))
    center: list[float] = field(default_factory=lambda: [0.0, 0.0, 1.0])
    angle_deg: float = field(default=10.0, metadata=spec(range=(0.0, 180.0)))
    x0: float = -1e9
    x1: float = 1e9
    y0: float = -1e9
    y1: float = 1e9
    cells: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class Stimulus:
    """Square pulses of ``amplitude`` pA/pF (CellML sign: negative depolarises) lasting
    ``duration`` ms, the first at ``start``, then every ``period`` ms, ``count`` in all."""

    name: str = "S1"
    start: float = field(default=1.0, metadata=spec(range=(0.0, 1e8)))
    duration: float = field(default=2.0, metadata=spec(range=(1e-6, 1e4)))
    amplitude: float = field(default=-20.0, metadata=spec(range=(-1e4, 1e4)))
    period: float = field(default=1000.0, metadata=spec(range=(1e-3, 1e8)))
    count: int = field(default=1, metadata=spec(range=(1, 100000)))
    region: Region = field(default_factory=Region)


@dataclass(frozen=True)
class Protocol:
    t_end: float = field(default=300.0, metadata=spec(range=(1e-6, 1e8)))
    stimuli: list[Stimulus] = field(default_factory=lambda: [Stimulus()])


@dataclass(frozen=True)
class SolverSettings:
    method: str = field(default="rlfe", metadata=spec(
        choices=tuple(METHODS) + tuple(ROSENBROCK) + tuple(IMPLICIT) + (AUTO,),
        doc="auto (a single cell's default): CVODE on the CPU, RODAS4 at 1e-6 in float64 on CUDA"))
    dt: float = field(default=0.05, metadata=spec(range=(1e-7, 10.0),
                      doc="fixed step (ms); the first step of adaptive methods"))
    at: float = field(default=1.0, metadata=spec(range=(0.0, 1e6)))
    rt: float = field(default=0.0, metadata=spec(range=(0.0, 1.0)))
    dt_min: float = field(default=1e-6, metadata=spec(range=(1e-12, 1.0), doc="floor: smaller stops the run"))
    dt_max: float = field(default=1.0, metadata=spec(range=(1e-6, 100.0)))
    safety: float = field(default=0.9, metadata=spec(range=(0.1, 1.0)))
    fac_min: float = field(default=0.2, metadata=spec(range=(0.01, 1.0)))
    fac_max: float = field(default=5.0, metadata=spec(range=(1.0, 100.0)))
    rush_larsen: bool = True
    precision: str = field(default="float32", metadata=spec(
        choices=PRECISIONS, doc="mixed: float64 states and update, the cell model in float32 (CUDA; "
                                "the CPU engines run mixed in float64)"))
    lookup_tables: bool = field(default=False, metadata=spec(
        doc="read the model's voltage-only terms from tables (linear interpolation; direct outside the range)"))
    lookup_step: float = field(default=0.02, metadata=spec(range=(1e-4, 1.0), unit="mV", doc="table step"))
    lookup_v_min: float = field(default=-120.0, metadata=spec(range=(-1000.0, 1000.0), unit="mV"))
    lookup_v_max: float = field(default=80.0, metadata=spec(range=(-1000.0, 1000.0), unit="mV"))
    split_dt: float = field(default=0.0, metadata=spec(range=(0.0, 10.0), unit="ms", doc=(
        "operator splitting: each step of this length advances the cell model alone by steps of dt, "
        "then the diffusion of V alone by one Runge-Kutta-Chebyshev super-step (stable at any length); "
        "a whole multiple of dt, fixed-step methods, CPU engines; 0 = off (cell and diffusion in one step)")))
    split: str = field(default="strang", metadata=spec(choices=("strang", "godunov"), doc=(
        "with split_dt: strang = diffusion over half of it, the cell model, diffusion over the other half "
        "(the default: more accurate velocities); godunov = the cell model over the split step, then "
        "diffusion over it (half the diffusion passes)")))


@dataclass(frozen=True)
class OutputSettings:
    random_probes: int = field(default=100, metadata=spec(range=(0, 100000)))
    probe_cells: list[int] = field(default_factory=list)
    probe_seed: int = field(default=7, metadata=spec(range=(0, 2**32 - 1)))
    dt_save: float = field(default=0.05, metadata=spec(range=(0.0, 1e6),
                           doc="probe sampling (ms); 0 = every accepted step"))
    activation_threshold: float = field(default=-20.0, metadata=spec(range=(-100.0, 50.0)))
    snapshot_interval: float = field(default=1.0, metadata=spec(range=(0.01, 1e6),
                                     doc="sim ms between live views of V"))
    readout_every: float = field(default=1.0, metadata=spec(range=(1e-3, 1e6), unit="ms", doc=(
        "simulated ms between the kept readouts of the whole tissue: the pseudo-ECG rows and the "
        "phase-singularity tracking (at the first step at or past each multiple, however the run "
        "is sliced)")))
    singularity_delay: float = field(default=10.0, metadata=spec(range=(0.0, 1e4), unit="ms", doc=(
        "delay τ of the phase embedding that tracks phase singularities (rotor cores) at the "
        "readouts (readout_every); about a quarter of a rotation; 0 = off")))
    series_every: float = field(default=0.0, metadata=spec(range=(0.0, 1e6), unit="ms", doc=(
        "keep V of the whole tissue every this many ms (at the first step at or past each multiple) "
        "in results.npz V_series, exported as a VTU time series; 0 = off")))


@dataclass(frozen=True)
class RunSettings:
    """Checkpoints, as for the network and the epidermis: written every ``checkpoint_every``
    simulated ms and at the end; a run starts from the file when it exists and ``resume``."""

    checkpoint: str = field(default="", metadata=spec(doc="checkpoint file"))
    resume: bool = field(default=True, metadata=spec(doc="start from the checkpoint if it exists"))
    checkpoint_every: float = field(default=100.0, metadata=spec(range=(1e-3, 1e8),
                                    doc="simulated ms between checkpoint writes"))


@dataclass(frozen=True)
class ParameterRegion:
    """Cells of a sheet or sphere where the model's parameters take other values (a scar, an
    ACh-affected region): ``rect`` (x0..x1, y0..y1 mm), ``circle`` (center, radius mm; on a
    sphere the 3-D distance), ``cap``/``cells`` as for stimuli, or ``tag`` (the nodes of a mesh
    file's elements carrying one of ``tags``)."""

    kind: str = field(default="rect", metadata=spec(choices=("rect", "circle", "cap", "cells", "tag")))
    x0: float = -1e9
    x1: float = 1e9
    y0: float = -1e9
    y1: float = 1e9
    center: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])
    radius_mm: float = field(default=1.0, metadata=spec(range=(0.0, 1e6)))
    angle_deg: float = field(default=10.0, metadata=spec(range=(0.0, 180.0)))
    cells: list[int] = field(default_factory=list)
    tags: list[int] = field(default_factory=list)
    parameters: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class ModelSettings:
    """The cell model: a shipped model's name or a CellML file, and parameter values
    (``component.variable`` keys, the model's annotated constants) for all cells, then for
    regions (later regions win)."""

    file: str = "courtemanche_ramirez_nattel_1998"
    voltage: str = field(default="", metadata=spec(doc="component.variable of V where the file has no annotation"))
    stimulus: str = field(default="", metadata=spec(doc="component.variable of the stimulus current"))
    parameters: dict[str, float] = field(default_factory=dict)
    regions: list[ParameterRegion] = field(default_factory=list)
    # parameters kept per cell from the start, so a running tissue can be painted (no recompile)
    paintable: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class RestitutionSettings:
    """A restitution protocol replacing ``protocol.stimuli`` and ``t_end`` (see
    :mod:`app.sims.cardiac.restitution`); measured on the single cell or the first probe."""

    kind: str = field(default="none", metadata=spec(choices=("none", "s1s2", "dynamic")))
    apd: str = field(default="s1", metadata=spec(choices=("s1", "per_beat"),
                     doc="APD90 definition the curve shows (both are written)"))
    s1_period: float = field(default=1000.0, metadata=spec(range=(1.0, 1e5)))
    s1_count: int = field(default=8, metadata=spec(range=(1, 1000)))
    s2_intervals: list[float] = field(default_factory=lambda: [600.0, 450.0, 400.0, 350.0, 330.0, 310.0])
    periods: list[float] = field(default_factory=lambda: [1000.0, 800.0, 600.0, 500.0, 400.0])
    beats: int = field(default=10, metadata=spec(range=(2, 10000)))
    start: float = field(default=50.0, metadata=spec(range=(0.0, 1e6)))
    amplitude: float = field(default=-20.0, metadata=spec(range=(-1e4, 1e4)))
    duration: float = field(default=2.0, metadata=spec(range=(1e-3, 1e3)))
    region: Region = field(default_factory=Region)


@dataclass(frozen=True)
class CardiacConfig:
    domain: str = "cardiac"
    name: str = ""
    description: str = ""
    mesh: MeshSettings = field(default_factory=MeshSettings)
    D: float = field(default=0.06, metadata=spec(range=(0.0, 100.0), doc="mm²/ms"))
    model: ModelSettings = field(default_factory=ModelSettings)
    protocol: Protocol = field(default_factory=Protocol)
    solver: SolverSettings = field(default_factory=SolverSettings)
    output: OutputSettings = field(default_factory=OutputSettings)
    run: RunSettings = field(default_factory=RunSettings)
    restitution: RestitutionSettings = field(default_factory=RestitutionSettings)
    steering: tuple[SteeringEvent, ...] = ()    # changes made while it ran (replayed at their step)


def with_restitution(cfg: CardiacConfig) -> CardiacConfig:
    """The config with its restitution protocol's stimuli and run length (unchanged without)."""
    from dataclasses import replace

    from app.sims.cardiac import restitution as rs
    r = cfg.restitution
    if r.kind == "none":
        return cfg
    plist = restitution_pulses(cfg)
    stimuli = rs.stimuli(plist, r.s1_period, r.amplitude, r.duration, r.region, Stimulus)
    return replace(cfg, protocol=replace(cfg.protocol, stimuli=stimuli, t_end=rs.protocol_end(plist, r.s1_period)))


def restitution_pulses(cfg: CardiacConfig):
    from app.sims.cardiac import restitution as rs
    r = cfg.restitution
    return rs.pulses(r.kind, r.s1_period, r.s1_count, r.s2_intervals, r.periods, r.beats, r.start)


def _check_fixed_step(doc: Document, st: Stimulus, dt: float, where: tuple) -> None:
    """A fixed step must not step over a pulse: dt at most the pulse, and the pulse edges
    (start, start + duration, every period) on whole steps, where the solver lands."""
    if dt > st.duration * (1 + 1e-9):
        raise doc.error(f"solver.dt = {dt:g} ms is longer than stimulus {st.name}'s {st.duration:g} ms "
                        "pulse: a fixed-step solver would step over it (use dt <= the pulse, or an "
                        "adaptive method, which lands on every pulse edge)", where + ("duration",))
    edges = {"start": st.start, "duration": st.duration}
    if st.count > 1:
        edges["period"] = st.period
    for key, value in edges.items():
        steps = value / dt
        if abs(steps - round(steps)) > 1e-6 * max(1.0, steps):
            raise doc.error(f"stimulus {st.name}: {key} = {value:g} ms is not a whole number of "
                            f"solver.dt = {dt:g} ms steps, so the fixed-step solver would not land on "
                            "the pulse edge (choose dt dividing it, or an adaptive method)", where + (key,))


def _load_file_mesh(doc: Document, cfg: CardiacConfig) -> CardiacConfig:
    """Resolve the mesh path against the config's folder, then read and check the mesh (the
    refusals name the file and element)."""
    from dataclasses import replace
    from pathlib import Path

    from app.sims.cardiac.mesh_io import MeshFileError
    if not cfg.mesh.path:
        raise doc.error("mesh.kind file needs mesh.path", ("mesh", "path"))
    for key, value in cfg.mesh.tag_conductivity.items():
        if not key.lstrip("-").isdigit() or not (np.isfinite(value) and value >= 0):
            raise doc.error(f"mesh.tag_conductivity: '{key}: {value}' must map an integer element tag "
                            "to a factor >= 0", ("mesh", "tag_conductivity", key))
    path = Path(cfg.mesh.path).expanduser()
    if not path.is_absolute() and doc.source and not doc.source.startswith("<"):
        path = Path(doc.source).parent / path
    cfg = replace(cfg, mesh=replace(cfg.mesh, path=str(path)))
    from app.sims.cardiac.fem import settings_report
    try:
        report = settings_report(cfg.mesh)[1]
    except MeshFileError as exc:
        raise doc.error(str(exc), ("mesh", "path")) from None
    s = cfg.solver
    if s.method not in ADAPTIVE and s.split_dt == 0 and s.dt > report["stable_dt_ms"]:
        raise doc.error(f"solver.dt = {s.dt:g} ms exceeds the stable diffusion step "
                        f"{report['stable_dt_ms']:.4g} ms of {path} (min edge "
                        f"{report['min_edge_mm']:.4g} mm): lower dt, or split the diffusion off "
                        "(solver.split_dt)", ("solver", "dt"))
    return cfg


def load_config(doc: Document) -> CardiacConfig:
    cfg: CardiacConfig = build(CardiacConfig, doc.data, doc)
    for i, e in enumerate(cfg.mesh.electrodes):
        if len(e) != 3 or not np.all(np.isfinite(e)):
            raise doc.error("mesh.electrodes: each electrode is a finite [x, y, z] in mm",
                            ("mesh", "electrodes", i))
    if cfg.mesh.kind == "file":
        cfg = _load_file_mesh(doc, cfg)
    r = cfg.restitution
    if r.kind != "none":
        values = r.s2_intervals if r.kind == "s1s2" else r.periods
        key = "s2_intervals" if r.kind == "s1s2" else "periods"
        if not values or min(values) <= r.duration or not all(np.isfinite(values)):
            raise doc.error(f"restitution.{key}: a list of intervals longer than the pulse (ms)", ("restitution", key))
        if len(values) > (MAX_STIMULI // 2 if r.kind == "s1s2" else MAX_STIMULI):
            raise doc.error(f"restitution.{key}: at most {MAX_STIMULI // 2 if r.kind == 's1s2' else MAX_STIMULI} "
                            "intervals in one run", ("restitution", key))
        cfg = with_restitution(cfg)
    from app.sims.cardiac.cellml import CellMLImportError
    from app.sims.cardiac.model import config_model
    try:
        model = config_model(cfg.model)
    except CellMLImportError as exc:
        raise doc.error(str(exc), ("model",)) from None
    cfg = _solver_defaults(cfg, doc.data.get("solver"))
    protocol = doc.data.get("protocol")
    if r.kind == "none" and not (isinstance(protocol, dict) and "stimuli" in protocol):
        from dataclasses import replace
        cfg = replace(cfg, protocol=replace(cfg.protocol, stimuli=model_stimuli(model, cfg.protocol.t_end)))
    blocks = [(("model", "parameters"), cfg.model.parameters)]
    blocks += [(("model", "regions", i, "parameters"), r.parameters) for i, r in enumerate(cfg.model.regions)]
    for where, values in blocks:
        for key, value in values.items():
            if not np.isfinite(value):
                raise doc.error(f"parameter '{key}' must be a finite number", where + (key,))
    s = cfg.solver
    if s.method == AUTO:
        _check_auto(doc, cfg, doc.data.get("solver"))
    if s.method in ADAPTIVE + tuple(IMPLICIT) and s.at == 0 and s.rt == 0:
        raise doc.error("adaptive methods need at > 0 or rt > 0", ("solver",))
    if s.method in IMPLICIT:
        from app.sims.cardiac.implicit import MAX_UNKNOWNS
        unknowns = n_cells(cfg.mesh) * config_model(cfg.model).n_states
        if unknowns > MAX_UNKNOWNS:
            raise doc.error(f"solver.method {s.method} (dense Jacobian) takes at most {MAX_UNKNOWNS} unknowns; "
                            f"this {cfg.mesh.kind} has {unknowns} (cells x states): use it for single cells, "
                            "an explicit Rush-Larsen method for tissue", ("solver", "method"))
        if s.lookup_tables:
            raise doc.error(f"solver.method {s.method} evaluates the model itself: lookup_tables must be false",
                            ("solver", "lookup_tables"))
    if s.method in ROSENBROCK:
        _check_rosenbrock(doc, cfg)
    if s.method in METHODS and METHODS[s.method].grl and not s.rush_larsen:
        raise doc.error(f"solver.method {s.method} is a Rush-Larsen method (every state stepped by its "
                        "diagonal Jacobian): rush_larsen must be true", ("solver", "rush_larsen"))
    if s.split_dt > 0:
        _check_split(doc, cfg)
    if s.dt_min >= s.dt_max:
        raise doc.error("dt_min must be below dt_max", ("solver", "dt_min"))
    if s.lookup_tables:
        rows = (s.lookup_v_max - s.lookup_v_min) / s.lookup_step
        if not 2 <= rows <= MAX_LOOKUP_ROWS:
            raise doc.error(f"solver.lookup_v_min .. lookup_v_max ({s.lookup_v_min:g} .. {s.lookup_v_max:g} mV) "
                            f"every lookup_step = {s.lookup_step:g} mV gives {rows:.0f} rows; the tables need "
                            f"2 to {MAX_LOOKUP_ROWS} (v_min < v_max)", ("solver", "lookup_v_max"))
    cells = n_cells(cfg.mesh)
    for i, c in enumerate(cfg.output.probe_cells):
        if not 0 <= c < cells:
            raise doc.error(f"probe cell {c} is not a cell of this {cfg.mesh.kind} "
                            f"(cells 0..{cells - 1})", ("output", "probe_cells", i))
    for i, st in enumerate(cfg.protocol.stimuli):
        r = st.region
        where = ("protocol", "stimuli", i, "region")
        for j, c in enumerate(r.cells if r.kind == "cells" else []):
            if not 0 <= c < cells:
                raise doc.error(f"stimulus {st.name}: cell {c} is not a cell of this {cfg.mesh.kind} "
                                f"(cells 0..{cells - 1})", where + ("cells", j))
        if s.method not in ADAPTIVE + tuple(IMPLICIT) + (AUTO,):
            _check_fixed_step(doc, st, s.dt, ("protocol", "stimuli", i))
        if r.kind == "cap" and (len(r.center) != 3 or not np.any(r.center)):
            raise doc.error("cap center is a nonzero 3-vector", where + ("center",))
        if r.kind == "rect" and (r.x0 > r.x1 or r.y0 > r.y1):
            raise doc.error(f"stimulus {st.name}: rect needs x0 <= x1 and y0 <= y1 (mm), got "
                            f"x {r.x0:g}..{r.x1:g}, y {r.y0:g}..{r.y1:g}", where)
    for i, name in enumerate(cfg.model.paintable):
        if name not in model.parameter_names:
            raise doc.error(f"'{name}' is not a parameter of this model", ("model", "paintable", i))
    tab = METHODS.get(s.method)     # last: the structural checks above name the plainer mistakes
    if tab is not None and tab.stages == 1 and tab.rl and s.rush_larsen:
        _check_step_stability(doc, model, model.parameter_vector(cfg.model.parameters), s.dt, tab)
    from dataclasses import replace as replace_
    return replace_(cfg, steering=check_steering(cfg.steering, by_key(steerables(cfg)), doc))


def _check_split(doc: Document, cfg: CardiacConfig) -> None:
    """``solver.split_dt``: a fixed-step explicit method, a whole number of its steps per split
    step, and a tissue (a single cell has no diffusion to split off)."""
    s = cfg.solver
    where = ("solver", "split_dt")
    if s.method not in METHODS or METHODS[s.method].adaptive:
        raise doc.error(f"solver.split_dt = {s.split_dt:g} ms needs a fixed-step method (e.g. rlfe, grl1) for "
                        f"the cell substeps; {s.method} is not one", where)
    if cfg.mesh.kind == "single":
        raise doc.error("solver.split_dt splits diffusion off the cell model: a single cell has none (use 0)",
                        where)
    k = s.split_dt / s.dt
    if round(k) < 1 or abs(k - round(k)) > 1e-6 * k:
        raise doc.error(f"solver.split_dt = {s.split_dt:g} ms is not a whole number of solver.dt = {s.dt:g} ms "
                        "cell substeps", where)


def _check_step_stability(doc: Document, model, params: np.ndarray, dt: float, tab) -> None:
    """Refuse a one-stage Rush–Larsen step that amplifies what the model damps at its initial
    state (:mod:`app.sims.cardiac.stability`): the run would end in NaN or |V| > 200 mV."""
    from app.sims.cardiac.stability import step_growth
    growth = step_growth(model, params, dt, tab)
    if growth is None or not growth.unstable:
        return
    if tab.grl:
        cause, cure = ("the stiffness is in the coupling between states that GRL1 steps apart (not one "
                       "Markov chain or fast group)", "a smaller dt")
    else:
        cause, cure = ("forward Euler on a fast non-gating state", "method grl1 (every state by its own "
                       "diagonal Jacobian, each Markov chain and group of fast-exchanging states together) "
                       "or a smaller dt")
    raise doc.error(f"solver.method {tab.name} at dt = {dt:g} ms is unstable for model {model.name} at its "
                    f"initial state: one step multiplies the mode led by {growth.state} by {growth.rho:.3g}, "
                    f"the model's own dynamics by at most {growth.exact:.3g} ({cause}); use {cure}",
                    ("solver", "dt"))


STIMULUS_MS = 2.0      # a steered stimulus: a pulse of this length (its charge is given at once)
SCALE_MAX = 100.0      # the largest factor a 'scale.<parameter>' brush paints


def steerables(cfg: CardiacConfig) -> tuple[Steerable, ...]:
    """Gestures on a running tissue (each with a region: a brush or cell indices): ``ablate``
    (the cells become scar: uncoupled, so they neither conduct nor are excited), ``restore``
    (coupling and painted parameters back to the config's), ``stimulate`` (a 2-ms pulse of the
    value's amplitude, pA/pF, negative depolarising), ``model.<parameter>`` (paint a value)
    and ``scale.<parameter>`` (paint a factor of the configured value: 0.5 halves a
    conductance, 0 blocks it) for the parameters listed in ``model.paintable``; other model
    parameters need a restart (list them in ``model.paintable`` to paint them live)."""
    from app.sims.cardiac.model import config_model

    paintable = set(cfg.model.paintable)
    names = config_model(cfg.model).parameter_names
    out = [Steerable("ablate", "gesture", region=True, doc="scar: uncoupled cells"),
           Steerable("restore", "gesture", region=True, doc="coupling and painted parameters as configured"),
           Steerable("stimulate", "gesture", (-1e3, 1e3), region=True, unit="pA/pF",
                     doc=f"a {STIMULUS_MS:g}-ms pulse (negative depolarises)")]
    out += [Steerable(f"model.{name}", "float", (-1e12, 1e12), region=name in paintable,
                      live=name in paintable,
                      doc="painted on a region" if name in paintable else "list it in model.paintable")
            for name in names]
    out += [Steerable(f"scale.{name}", "float", (0.0, SCALE_MAX), region=True, unit="x",
                      doc="a factor of the configured value, painted on a region (0.5 halves it, 0 blocks it)")
            for name in names if name in paintable]
    return tuple(out)


def _solver_defaults(cfg: CardiacConfig, given) -> CardiacConfig:
    """A single cell whose config names no solver method runs ``auto`` (:func:`for_backend`);
    CVODE's tolerances and precision, where not given, are :data:`CVODE_DEFAULTS` (the explicit
    methods' at = 1, rt = 0 and float32 are tissue settings)."""
    from dataclasses import replace
    given = given if isinstance(given, dict) else {}
    s = cfg.solver
    if "method" not in given and cfg.mesh.kind == "single" and not s.lookup_tables:
        s = replace(s, method=AUTO)
    if s.method in IMPLICIT:
        s = replace(s, **{k: v for k, v in CVODE_DEFAULTS.items() if k not in given})
    if s.method in ROSENBROCK:
        s = replace(s, **{k: v for k, v in ROSENBROCK_DEFAULTS.items() if k not in given})
    return replace(cfg, solver=s)


def _check_rosenbrock(doc: Document, cfg: CardiacConfig) -> None:
    """A Rosenbrock method (:mod:`.rosenbrock`) steps one cell with its full Jacobian, in float64,
    from the model evaluated directly."""
    s = cfg.solver
    if cfg.mesh.kind != "single":
        raise doc.error(f"solver.method {s.method} is for single cells (a dense Jacobian per cell); this "
                        f"{cfg.mesh.kind} needs a tissue method (e.g. rlfe or grl1)", ("solver", "method"))
    if s.precision != "float64":
        raise doc.error(f"solver.method {s.method} runs in float64 only (its tolerances are below "
                        f"{s.precision}'s resolution): set precision float64", ("solver", "precision"))
    if s.lookup_tables:
        raise doc.error(f"solver.method {s.method} needs the Jacobian of the model it steps: "
                        "lookup_tables must be false", ("solver", "lookup_tables"))


def _check_auto(doc: Document, cfg: CardiacConfig, given) -> None:
    """``auto`` is for single cells and sets its own solver settings (:data:`AUTO_SOLVERS`):
    one given with another value than the field's default is refused."""
    if cfg.mesh.kind != "single":
        raise doc.error(f"method auto is for single cells; this {cfg.mesh.kind} needs an explicit "
                        "method (e.g. rlfe)", ("solver", "method"))
    defaults = SolverSettings()
    for key in AUTO_FIXED:       # a written-out default (a saved form) is no choice
        if isinstance(given, dict) and key in given and getattr(cfg.solver, key) != getattr(defaults, key):
            raise doc.error(f"method auto sets its own ({', '.join(AUTO_FIXED)}); name a method "
                            "(cvode on the CPU, rodas4 on CUDA) to choose them", ("solver", key))


def for_backend(cfg: CardiacConfig, backend: str) -> CardiacConfig:
    """The config an engine runs: ``solver.method auto`` replaced by the backend's solver
    (:data:`AUTO_SOLVERS`: CVODE on the CPU engines, RODAS4 on CUDA); other methods unchanged.
    ``solver.split_dt`` on CUDA needs a one-stage method (its substeps run in registers):
    others are refused (ValueError)."""
    from dataclasses import replace
    method = METHODS.get(cfg.solver.method)
    if backend == "cuda" and cfg.solver.split_dt > 0 and (method is None or method.stages != 1):
        raise ValueError(f"solver.split_dt = {cfg.solver.split_dt:g} ms with solver.method {cfg.solver.method}: "
                         "on CUDA the split step's cell model runs a one-stage method (rlfe, grl1, fe); "
                         "choose one, or run on the CPU engines")
    if cfg.solver.method != AUTO:
        return cfg
    settings = AUTO_SOLVERS["cuda" if backend == "cuda" else "cpu"]
    return replace(cfg, solver=replace(cfg.solver, **settings))


def model_stimuli(model, t_end: float) -> list[Stimulus]:
    """The stimulus a config without ``protocol.stimuli`` gets: the model's annotated one
    (amplitude in µA/µF, duration, period, offset; converted at import), repeated every period
    until ``t_end``, reaching every cell; what the file does not annotate takes
    :class:`Stimulus`'s default (a model without any annotation: one -20 µA/µF pulse of 2 ms); an
    annotated amplitude of 0 means no stimulus."""
    ann = model.imported.default_stimulus
    if ann.get("amplitude") == 0.0:            # the file's stimulus is off: none
        return []
    base = Stimulus()
    values = {"amplitude": ann.get("amplitude", base.amplitude), "duration": ann.get("duration", base.duration),
              "period": ann.get("period", base.period), "start": ann.get("start", base.start)}
    ok = (np.isfinite(list(values.values())).all() and values["duration"] > 0 and values["period"] > 0
          and values["start"] >= 0 and values["amplitude"] != 0)
    if not ok or "amplitude" not in ann:
        return [base]
    count = int(np.clip(np.ceil((t_end - values["start"]) / values["period"]), 1, 100000))
    return [Stimulus(name="model", count=count, **values)]


def prefers_cpu(cfg: CardiacConfig) -> str | None:
    """Why ``cfg`` runs faster on the CPU engines than on a GPU, or None: a single cell is one
    GPU thread, a hundred times slower than the CPU's CVODE (ToRORd's 20 beats: 24 s with RODAS4
    on an H100 against 0.18 s), so the backend ``auto`` runs it on the CPU."""
    if cfg.mesh.kind == "single":
        return "a single cell runs faster on the CPU than on one GPU thread"
    return None


def n_cells(mesh: MeshSettings) -> int:
    """Cells of the mesh the settings describe (the geodesic sphere: 10·4^level + 2)."""
    if mesh.kind == "sphere":
        return 10 * 4 ** mesh.level + 2
    if mesh.kind == "file":
        from app.sims.cardiac.fem import settings_mesh
        return settings_mesh(mesh).n_cells
    return mesh.nx * mesh.ny if mesh.kind == "sheet" else 1


def voltage_snapshots(n: int, itemsize: int) -> int:
    """How many copies of V (``n`` values of ``itemsize`` bytes) a CUDA run keeps on the device
    until they are read (:data:`VOLTAGE_SNAPSHOT_BYTES`, within :data:`VOLTAGE_SNAPSHOTS`)."""
    low, high = VOLTAGE_SNAPSHOTS
    return int(np.clip(VOLTAGE_SNAPSHOT_BYTES // max(1, n * itemsize), low, high))


def estimate_memory(cfg: CardiacConfig, backend: str):
    """Host and GPU bytes: the state and the solver's stages (cells x states), the mesh, the
    activation maps, the probe recordings (probes x saved times) and a single cell's history."""
    from app.sims.cardiac.model import config_model
    from app.sims.common.memory import estimate

    n, states = float(n_cells(cfg.mesh)), float(config_model(cfg.model).n_states)
    width = 4.0 if cfg.solver.precision == "float32" else 8.0
    row = 7 * 12                                  # neighbour index + weight per slot (sphere: 6)
    if cfg.mesh.kind == "file":
        from app.sims.cardiac.fem import settings_report
        row = int(settings_report(cfg.mesh)[1]["neighbour_width"] + 1) * 12
    stages = 8.0                                  # stages, error and accepted copies (at most)
    out, t_end = cfg.output, cfg.protocol.t_end
    step = out.dt_save if out.dt_save > 0 else cfg.solver.dt
    probes = float(min(out.random_probes, n) + len(out.probe_cells))
    saves = t_end / step + 2
    host = {f"state: {n:,.0f} cells x {states:.0f} states x {stages:.0f} stage copies":
            n * states * stages * max(width, 8.0 if backend != "cuda" else 0.0),
            "mesh, activation maps and voltage copies": n * (row + 6 * 8),
            f"probe recordings: {probes:,.0f} probes x {saves:,.0f} saved times x 8 B": probes * saves * 8}
    if n == 1:
        host["single-cell history: every step's states"] = (t_end / cfg.solver.dt + 2) * states * 8 * 2
    gpu = {}
    if backend == "cuda":
        host[f"state: {n:,.0f} cells x {states:.0f} states x {stages:.0f} stage copies"] = n * states * 8
        gpu = {f"state: {n:,.0f} cells x {states:.0f} states x {stages:.0f} stage copies":
               n * states * stages * width,
               "mesh, activation maps and the frames' read-back buffer": n * (row + 7 * 8)}
        kept = voltage_snapshots(int(n), int(width))
        for side in (host, gpu):                  # readouts kept until read (cuda.VoltageSnapshots)
            side[f"V copies kept until read: {kept}"] = n * kept * width
    key = {"sphere": ("mesh", "level"), "file": ("mesh", "path")}.get(cfg.mesh.kind, ("mesh", "nx"))
    recordings = f"probe recordings: {probes:,.0f} probes x {saves:,.0f} saved times x 8 B"
    single = "single-cell history: every step's states"
    return estimate(host, gpu, key, {recordings: ("output", "dt_save"), single: ("solver", "dt")})
