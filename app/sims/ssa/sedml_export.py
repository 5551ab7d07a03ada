"""An SSA run or sweep folder as a COMBINE/OMEX archive: the SBML model, a SED-ML (L1V4) file that
says what ran, and the results.

The SED-ML: one ``uniformTimeCourse`` (from 0 to ``t_end`` in ``samples - 1`` steps; the KiSAO
algorithm with its seed and, for tau-leaping, epsilon), a ``task``, a ``repeatedTask``
``ensemble`` over a ``uniformRange`` of the realizations (no changes: each repeat a fresh
realization), and per species a mean and a standard-deviation data generator that aggregate over
``ensemble`` (KiSAO mean and standard deviation; population moments, as the engines compute
them); a report of them and a plot of the means. A sweep adds an outer ``repeatedTask``
``sweep`` whose ``vectorRange`` lists each swept value and whose ``setValue`` changes set the
model's parameters or initial counts. The results: ``results/`` holds the reports computed
from the run's own arrays, laid out as ``biogpu omex`` writes them, plus each run's
``summary.json``. Checked with libSEDML and libCOMBINE before the archive is written.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from app.sims.common.config import ConfigError
from app.sims.ssa.omex import FORMATS, write_archive
from app.sims.ssa.sedml import EPSILON, EXPORT_KISAO, SEED, _libsedml

SEDML_NAME = "simulation.sedml"
MODEL_NAME = "model.xml"
SPECIES_XPATH = "/sbml:sbml/sbml:model/sbml:listOfSpecies/sbml:species[@id='{}']"
PARAMETER_XPATH = "/sbml:sbml/sbml:model/sbml:listOfParameters/sbml:parameter[@id='{}']/@value"


def _check(sd, doc, label: str) -> None:
    """libSEDML reads the document back (its checks run while reading); any error is refused."""
    doc = sd.readSedMLFromString(sd.writeSedMLToString(doc))
    errors = [doc.getError(i).getMessage().strip() for i in range(doc.getNumErrors())
              if doc.getError(i).getSeverity() >= sd.LIBSEDML_SEV_ERROR]
    if errors:
        raise ValueError(f"{label}: libSEDML finds the exported SED-ML invalid: {' | '.join(errors[:3])}")


def _sbml_text(cfg) -> str:
    from app.sims.ssa.model import grid_network
    from app.sims.ssa.sbml_export import network_spec, spec_to_sbml

    if cfg.sbml is not None:
        path = Path(cfg.sbml)
        if not path.is_file():
            raise ConfigError(f"the run's SBML file {path} is gone; it is needed to export the run")
        return path.read_text(encoding="utf-8")
    spec = cfg.model if cfg.model is not None else network_spec(grid_network(cfg.grid))
    return spec_to_sbml(spec, cfg.name or "network")


def sedml_text(cfg, species: list[str], sweep: dict[str, list[float]] | None = None) -> str:
    """SED-ML L1V4 of an ensemble run of ``cfg`` (``sweep``: SBML XPath -> values per point)."""
    sd = _libsedml()
    ens = cfg.ensemble
    doc = sd.SedDocument(1, 4)
    doc.getNamespaces().add("http://www.sbml.org/sbml/level3/version2/core", "sbml")
    model = doc.createModel()
    model.setId("model")
    model.setLanguage("urn:sedml:language:sbml")
    model.setSource(MODEL_NAME)
    sim = doc.createUniformTimeCourse()
    sim.setId("sim")
    sim.setInitialTime(0.0)
    sim.setOutputStartTime(0.0)
    sim.setOutputEndTime(float(ens.t_end))
    sim.setNumberOfSteps(int(ens.samples) - 1)
    alg = sim.createAlgorithm()
    alg.setKisaoID(EXPORT_KISAO[ens.algorithm].replace("_", ":"))
    param = alg.createAlgorithmParameter()
    param.setKisaoID(SEED.replace("_", ":"))
    param.setValue(str(int(ens.seed)))
    if ens.algorithm == "tau-leap":
        param = alg.createAlgorithmParameter()
        param.setKisaoID(EPSILON.replace("_", ":"))
        param.setValue(repr(float(ens.epsilon)))
    task = doc.createTask()
    task.setId("run")
    task.setModelReference("model")
    task.setSimulationReference("sim")
    rep = doc.createRepeatedTask()
    rep.setId("ensemble")
    rep.setName(f"{ens.realizations} realizations")
    rep.setResetModel(True)
    rng = rep.createUniformRange()
    rng.setId("realization")
    rng.setStart(0.0)
    rng.setEnd(float(ens.realizations - 1))
    rng.setNumberOfSteps(int(ens.realizations) - 1)
    rng.setType("linear")
    rep.setRangeId("realization")
    sub = rep.createSubTask()
    sub.setTask("run")
    sub.setOrder(1)
    top = "ensemble"
    if sweep:
        outer = doc.createRepeatedTask()
        outer.setId("sweep")
        outer.setResetModel(True)
        for i, (target, values) in enumerate(sweep.items()):
            vr = outer.createVectorRange()
            vr.setId(f"value{i}")
            vr.setValues([float(v) for v in values])
            change = outer.createTaskChange()
            change.setModelReference("model")
            change.setTarget(target)
            change.setRange(f"value{i}")
            change.setMath(sd.parseL3Formula(f"value{i}"))
        outer.setRangeId("value0")
        sub = outer.createSubTask()
        sub.setTask("ensemble")
        sub.setOrder(1)
        top = "sweep"
    time_dg = doc.createDataGenerator()
    time_dg.setId("time")
    var = time_dg.createVariable()
    var.setId("t")
    var.setSymbol("urn:sedml:symbol:time")
    var.setTaskReference(top)
    time_dg.setMath(sd.parseL3Formula("t"))
    report = doc.createReport()
    report.setId("statistics")
    report.setName("ensemble mean and standard deviation")
    plot = doc.createPlot2D()
    plot.setId("means")
    plot.setName("ensemble means")
    _dataset(report, "time", "time")
    for s in species:
        for stat, term in (("mean", "KISAO:0000841"), ("sd", "KISAO:0000842")):
            dg = doc.createDataGenerator()
            dg.setId(f"{stat}_{s}")
            dg.setName(f"{stat} of {s}")
            v = dg.createVariable()
            v.setId(f"{s}_{stat}")
            v.setTarget(SPECIES_XPATH.format(s))
            v.setTaskReference(top)
            v.setDimensionTerm(term)
            applied = v.createAppliedDimension()
            applied.setTarget("ensemble")
            dg.setMath(sd.parseL3Formula(f"{s}_{stat}"))
            _dataset(report, f"{stat}_{s}", f"{s} {stat}")
        curve = plot.createCurve()
        curve.setId(f"curve_{s}")
        curve.setName(s)
        curve.setXDataReference("time")
        curve.setYDataReference(f"mean_{s}")
    _check(sd, doc, "export")
    return sd.writeSedMLToString(doc)


def _dataset(report, dg: str, label: str) -> None:
    ds = report.createDataSet()
    ds.setId(f"ds_{dg}")
    ds.setLabel(label)
    ds.setName(label)
    ds.setDataReference(dg)


def _load(folder: Path):
    from app.sims.common.simulation import load_run_config

    config = folder / "config.yaml"
    if not config.is_file():
        raise ConfigError(f"{folder}: not a run folder (no config.yaml)")
    domain, cfg = load_run_config(config)
    if domain.name != "ssa":
        raise ConfigError(f"{folder}: a {domain.name} run; only SSA runs export to SED-ML")
    try:
        summary = json.loads((folder / "summary.json").read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{folder}: cannot read summary.json ({exc})") from None
    if not summary.get("finished", False):
        raise ConfigError(f"{folder}: the run did not finish; only finished runs are exported")
    with np.load(folder / "results.npz") as npz:
        arrays = {k: npz[k] for k in npz.files}
    return cfg, summary, arrays


def _sweep_targets(folder: Path, summary: dict) -> tuple[list[Path], dict[str, list[float]]]:
    if summary.get("replicates", 1) != 1:
        raise ConfigError(f"{folder}: a sweep with replicates (a seed per replicate) has no SED-ML form; "
                          "export a sweep without replicates")
    if summary.get("failed") or summary.get("finished") != summary.get("points"):
        raise ConfigError(f"{folder}: not every point of the sweep finished")
    points = sorted(p for p in (folder / "points").iterdir() if (p / "point.json").is_file())
    rows = [json.loads((p / "point.json").read_text())["row"] for p in points]
    targets: dict[str, list[float]] = {}
    for key in summary["keys"]:
        parts = key.split(".")
        if len(parts) == 3 and parts[:2] == ["model", "parameters"]:
            target = PARAMETER_XPATH.format(parts[2])
        elif len(parts) == 3 and parts[:2] == ["model", "species"]:
            target = SPECIES_XPATH.format(parts[2]) + "/@initialAmount"
        else:
            raise ConfigError(f"{folder}: the swept key '{key}' is not a model parameter or initial count; "
                              "SED-ML repeated tasks change models, not simulations")
        targets[target] = [float(r[key]) for r in rows]
    return points, targets


def export_folder(folder: str | Path, dest: str | Path) -> Path:
    """Write the OMEX archive of the run or sweep ``folder`` to ``dest``."""
    from app.sims.ssa.sedml import read_sedml
    from app.sims.ssa.sedml_results import generator_values, unit_data, write_report

    folder, dest = Path(folder), Path(dest)
    sweep_summary = _sweep_summary(folder)
    targets = None
    run_folders = [folder]
    if sweep_summary is not None:
        run_folders, targets = _sweep_targets(folder, sweep_summary)
    loaded = [_load(f) for f in run_folders]
    cfg = loaded[0][0]
    species = [str(s) for s in np.asarray(loaded[0][2]["species"]).tolist()]
    with tempfile.TemporaryDirectory(prefix="omex-export-") as tmp:
        stage = Path(tmp)
        (stage / MODEL_NAME).write_text(_sbml_text(cfg), encoding="utf-8")
        (stage / SEDML_NAME).write_text(sedml_text(cfg, species, targets), encoding="utf-8")
        plan = read_sedml(stage / SEDML_NAME, stage, SEDML_NAME)
        results = stage / "results"
        data = {uid: unit_data(unit, [a for _, _, a in loaded]) for uid, unit in plan.units.items()}
        values = generator_values(plan, plan.units, data)
        members = [(stage / MODEL_NAME, MODEL_NAME, FORMATS["sbml"], False),
                   (stage / SEDML_NAME, SEDML_NAME, FORMATS["sedml"], True)]
        for output in plan.outputs:
            if output.kind == "report":
                write_report(results, plan, output, values)
        for f, (_, summary, _) in zip(run_folders, loaded):
            name = "summary.json" if sweep_summary is None else f"points/{f.name}/summary.json"
            (results / name).parent.mkdir(parents=True, exist_ok=True)
            (results / name).write_text(json.dumps(summary, indent=2))
        for path in sorted(results.rglob("*")):
            if path.is_file():
                rel = path.relative_to(stage).as_posix()
                fmt = {".csv": "http://purl.org/NET/mediatypes/text/csv",
                       ".h5": "http://purl.org/NET/mediatypes/application/x-hdf",
                       ".json": "http://purl.org/NET/mediatypes/application/json"}[path.suffix]
                members.append((path, rel, fmt, False))
        write_archive(dest, members)
    _check_archive(dest)
    return dest


def pack_sbml(sbml: str | Path, dest: str | Path, ensemble) -> Path:
    """An archive that runs the SBML file ``sbml`` as an ensemble (``ensemble``: the run config's
    :class:`~app.sims.ssa.config.EnsembleSettings`), without results: a model to share."""
    from app.sims.ssa.config import SSAConfig
    from app.sims.ssa.sbml import load_sbml_network

    sbml, dest = Path(sbml), Path(dest)
    species = list(load_sbml_network(sbml).species)
    cfg = SSAConfig(name=sbml.stem, sbml=str(sbml), ensemble=ensemble)
    with tempfile.TemporaryDirectory(prefix="omex-pack-") as tmp:
        stage = Path(tmp)
        (stage / MODEL_NAME).write_text(_sbml_text(cfg), encoding="utf-8")
        (stage / SEDML_NAME).write_text(sedml_text(cfg, species), encoding="utf-8")
        write_archive(dest, [(stage / MODEL_NAME, MODEL_NAME, FORMATS["sbml"], False),
                             (stage / SEDML_NAME, SEDML_NAME, FORMATS["sedml"], True)])
    _check_archive(dest)
    return dest


def _sweep_summary(folder: Path) -> dict[str, Any] | None:
    if (folder / "points").is_dir() and not (folder / "config.yaml").is_file():
        try:
            return json.loads((folder / "summary.json").read_text())
        except (OSError, ValueError) as exc:
            raise ConfigError(f"{folder}: cannot read the sweep's summary.json ({exc})") from None
    return None


def _check_archive(path: Path) -> None:
    """libCOMBINE reads the archive back and libSEDML validates its SED-ML."""
    from app.sims.ssa.omex import _libcombine

    lc = _libcombine()
    sd = _libsedml()
    archive = lc.CombineArchive()
    try:
        if not archive.initializeFromArchive(str(path)):
            raise ValueError(f"{path}: libCOMBINE cannot read the exported archive")
        entry = archive.getMasterFile()
        if entry is None:
            raise ValueError(f"{path}: the exported archive has no master file")
        doc = sd.readSedMLFromString(archive.extractEntryToString(entry.getLocation()))
        _check(sd, doc, str(path))
    finally:
        archive.cleanUp()
