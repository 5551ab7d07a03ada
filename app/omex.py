"""Run a COMBINE/OMEX archive's SED-ML experiments on the SSA engines (``biogpu omex``).

``OUT`` receives, as BioSimulators lays it out, the reports (``<SED-ML location>/<report>.csv``
and ``reports.h5``) and plots (``<SED-ML location>/<plot>.png``), and besides them
``archive/`` (the checked members), ``models/`` (each model with its changes applied),
``runs/<task>/`` (each ensemble run, or each sweep with its points on Dask: ordinary run and
sweep folders) and ``log.txt``. ``OUT`` is itself an RO-Crate whose inputs are the archive's
members. A plan is read and checked whole (every model, simulation, task and output) before
anything runs.
"""

from __future__ import annotations

import logging
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from app.sims.common.config import ConfigError, Document
from app.sims.ssa.sedml_results import H5_NAME

log = logging.getLogger(__name__)
DEFAULT_SEED = 2024


@dataclass
class OmexResult:
    out: Path
    reports: list[Path] = field(default_factory=list)
    plots: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    values: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)   # SED-ML location -> dg -> array


def run_archive(archive: str | Path, out: str | Path, backend: str = "auto", *, seed: int = DEFAULT_SEED,
                workers: int | None = None, scheduler: str | None = None, png: bool = True,
                say: Callable[[str], None] = print) -> OmexResult:
    """Check, run and write every SED-ML document of ``archive`` into ``out``."""
    from app.sims.common.output import check_output_dir
    from app.sims.common.provenance import write_crate
    from app.sims.ssa.omex import open_archive
    from app.sims.ssa.sedml import read_sedml

    started = time.time()
    out = check_output_dir(out)
    folder = out / "archive"
    if folder.exists() or (out / H5_NAME).exists():
        if not (out / "log.txt").is_file():      # only what an earlier 'biogpu omex' wrote is replaced
            raise ConfigError(f"{out} holds archive/ or {H5_NAME} that 'biogpu omex' did not write; "
                              "choose another output folder", str(archive))
        shutil.rmtree(folder, ignore_errors=True)
        (out / H5_NAME).unlink(missing_ok=True)
    opened = open_archive(archive, folder)
    docs = opened.sedml()
    if not docs:
        raise ConfigError(f"{archive}: the archive holds no SED-ML file")
    plans = [read_sedml(e.path, folder, e.location) for e in docs]
    result = OmexResult(out)
    for plan in plans:                          # every plan's models checked before any run
        for unit in plan.units.values():
            _model_files(plan, unit, out)
    for plan in plans:
        result.notes += plan.notes
        for note in plan.notes:
            say(f"note: {note}")
        data = {}
        for unit in plan.units.values():
            data[unit.id] = _run_unit(plan, unit, out, backend, seed, workers, scheduler, say)
        result.values[plan.location] = _write_outputs(plan, data, out, result, png, say)
    text = "\n".join([f"archive: {archive}", *[f"note: {n}" for n in result.notes],
                      *[f"report: {p.relative_to(out)}" for p in result.reports],
                      *[f"plot: {p.relative_to(out)}" for p in result.plots]]) + "\n"
    (out / "log.txt").write_text(text)
    inputs = [p.relative_to(out).as_posix() for p in folder.rglob("*") if p.is_file()]
    write_crate(out, name=Path(archive).name, started=started, ended=time.time(),
                summary={"backend": _backend_name(backend), "seed": seed}, inputs=inputs,
                description=f"{Path(archive).name} run by BioGPU Studio: the archive, its runs and reports")
    return result


def _backend_name(backend: str) -> str:
    from app.compute.device import resolve_backend
    return resolve_backend(backend)[0]


def _model_files(plan, unit, out: Path) -> list[Path]:
    from app.sims.ssa.sedml_results import write_model

    stem = f"{Path(plan.location).stem}-{unit.id}"
    if unit.sweep is None:
        return [write_model(plan, unit.model, out / "models" / f"{stem}.xml")]
    return [write_model(plan, unit.model, out / "models" / f"{stem}-p{i:05d}.xml", changes)
            for i, changes in enumerate(unit.points)]


def _run_unit(plan, unit, out: Path, backend: str, seed: int, workers, scheduler, say) -> dict[str, Any]:
    from app.compute.device import resolve_backend
    from app.sims.common.session import run_headless
    from app.sims.common.simulation import DOMAINS
    from app.sims.ssa.sedml_results import run_config, unit_data

    models = _model_files(plan, unit, out)
    folder = out / "runs" / f"{Path(plan.location).stem}-{unit.id}"
    domain = DOMAINS["ssa"]
    module = domain.load()
    configs = [run_config(plan, unit, m, seed) for m in models]
    if unit.sweep is None:
        cfg = module.load_config(Document(configs[0], {}, str(models[0])))
        resolved, _ = resolve_backend(backend)
        say(f"task '{unit.id}': {unit.realizations} realization(s) to t = {unit.sim.t_end:g} "
            f"({unit.sim.algorithm}, {resolved})")
        session = run_headless(domain, cfg, resolved, folder)
        if session.summary.get("stopped"):
            raise RuntimeError(f"task '{unit.id}' stopped: {session.summary['stopped']}")
        return unit_data(unit, [session.arrays])
    say(f"task '{unit.id}': a sweep of {len(configs)} points on Dask")
    return unit_data(unit, _run_sweep(unit, configs, folder, backend, workers, scheduler, say))


def _run_sweep(unit, configs: list[dict], folder: Path, backend: str, workers, scheduler, say) -> list[Mapping]:
    """The points as an ordinary sweep (app.sweep: Dask, resumable folders, the sweep table)."""
    from app.sims.common.simulation import DOMAINS
    from app.sweep.runner import PointTask, SweepPlan, SweepRun, start_cluster
    from app.sweep.spec import Axis, Point, SweepSpec

    module = DOMAINS["ssa"].load()
    keys = sorted(unit.point_values[0]) if unit.point_values else []
    spec = SweepSpec(tuple(Axis(k, tuple(v[k] for v in unit.point_values)) for k in keys), combine="zip",
                     metrics=("mean", "std"))
    tasks, cfgs = [], []
    for i, (data, values) in enumerate(zip(configs, unit.point_values)):
        cfgs.append(module.load_config(Document(data, {}, data["sbml"])))
        point = Point(i, 0, {k: float(values[k]) for k in keys}, data["ensemble"]["seed"])
        tasks.append(PointTask("ssa", data["sbml"], data, backend, str(folder), point, ("mean", "std"), {}))
    plan = SweepPlan("ssa", str(folder), spec, tasks, cfgs[0], cfgs, batch=False)
    folder.mkdir(parents=True, exist_ok=True)
    cluster = start_cluster(backend, workers, scheduler)
    try:
        result = SweepRun(plan, cluster, lambda row, done, total: say(
            f"  [{done}/{total}] {row['name']} {row.get('status', 'ok')}")).run()
    finally:
        cluster.close()
    if result.failed:
        bad = [r for r in result.rows if r.get("status") != "ok"]
        raise RuntimeError(f"task '{unit.id}': {len(bad)} sweep points failed; first: {bad[0].get('error')}")
    runs = []
    for task in tasks:
        with np.load(folder / "points" / task.point.name / "results.npz") as npz:
            runs.append({k: npz[k] for k in npz.files})
    return runs


def _write_outputs(plan, data, out: Path, result: OmexResult, png: bool, say) -> dict[str, np.ndarray]:
    from app.sims.ssa.sedml_results import generator_values, write_plot, write_report

    values = generator_values(plan, plan.units, data)
    for output in plan.outputs:
        if output.kind == "report":
            for path in write_report(out, plan, output, values):
                if path not in result.reports:
                    result.reports.append(path)
        elif png:
            try:
                result.plots.append(write_plot(out, plan, output, values))
            except ImportError as exc:
                say(f"plot '{output.id}' skipped: matplotlib is not installed ({exc.name})")
    return values


def archive_config(archive: str | Path, folder: str | Path, seed: int = DEFAULT_SEED) -> tuple[dict, list[str]]:
    """The SSA run config (plain data) of the first task of ``archive`` that is one run (a task or
    an ensemble), with its model (changes applied) written into ``folder``; and notes on the rest
    (what the SSA panel opens: sweeps and the other tasks run with ``biogpu omex``)."""
    from app.sims.ssa.omex import open_archive
    from app.sims.ssa.sedml import read_sedml
    from app.sims.ssa.sedml_results import run_config, write_model

    folder = Path(folder)
    opened = open_archive(archive, folder / "archive")
    plans = [read_sedml(e.path, opened.folder, e.location) for e in opened.sedml()]
    units = [(plan, unit) for plan in plans for unit in plan.units.values()]
    single = [(plan, unit) for plan, unit in units if unit.sweep is None]
    if not single:
        raise ConfigError(f"{archive}: every task is a sweep; run the archive with 'biogpu omex'")
    plan, unit = single[0]
    model = write_model(plan, unit.model, folder / "models" / f"{Path(plan.location).stem}-{unit.id}.xml")
    data = run_config(plan, unit, model, seed)
    data["ensemble"].pop("snapshot_times", None)     # the panel shows statistics and histograms
    notes = list(plan.notes)
    others = [f"{p.location}: {u.id}" for p, u in units if u is not unit]
    if others:
        notes.append(f"opened task '{unit.id}' of {plan.location}; the archive's other tasks ("
                     f"{', '.join(others)}) run with 'biogpu omex -i {Path(archive).name} -o OUT'")
    return data, notes
