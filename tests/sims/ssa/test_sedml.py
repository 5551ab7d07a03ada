"""SED-ML in and out: a run exported as OMEX re-imports to identical arrays (same seed), SED-ML
model changes take effect, ensembles give per-realization data and the engines' own mean and SD,
and what is not supported is refused with the element's id and the reason."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("libsedml")
pytest.importorskip("libcombine")
pytest.importorskip("libsbml")
h5py = pytest.importorskip("h5py")

from app.omex import run_archive  # noqa: E402
from app.sims.common.config import Document  # noqa: E402
from app.sims.common.session import run_headless  # noqa: E402
from app.sims.common.simulation import DOMAINS  # noqa: E402
from app.sims.ssa.omex import FORMATS, write_archive  # noqa: E402
from app.sims.ssa.sbml_export import spec_to_sbml  # noqa: E402
from app.sims.ssa.sedml import SedmlError  # noqa: E402
from app.sims.ssa.sedml_export import export_folder  # noqa: E402

SSA = DOMAINS["ssa"]
MODEL = {"species": {"X": 30, "Y": 0}, "parameters": {"k": 1.3},
         "reactions": [{"rate": "k", "reactants": {"X": 1}, "products": {"Y": 1}},
                       {"rate": 0.7, "reactants": {"Y": 1}, "products": {"X": 1}}]}


def ssa_run(tmp_path: Path, realizations=64, seed=7, algorithm="direct", name="run",
            backend="cpu") -> tuple[Path, dict]:
    data = {"domain": "ssa", "name": "bd", "model": MODEL,
            "ensemble": {"realizations": realizations, "t_end": 2.0, "samples": 9, "seed": seed,
                         "algorithm": algorithm}}
    cfg = SSA.load().load_config(Document(data, {}, "<test>"))
    session = run_headless(SSA, cfg, backend, tmp_path / name)
    return tmp_path / name, session.arrays


def report(out: Path, location="simulation.sedml", rid="statistics") -> dict[str, np.ndarray]:
    """A report of reports.h5 read as BioSimulators reads it: each data set cut to its shape."""
    with h5py.File(out / "reports.h5") as fh:
        ds = fh[f"{location}/{rid}"]
        data, got = ds[:], {}
        for i, (label, shape) in enumerate(zip(ds.attrs["sedmlDataSetLabels"], ds.attrs["sedmlDataSetShapes"])):
            dims = [int(n) for n in shape.split(",")]
            index = (i,) + tuple(slice(0, n) for n in dims) + (0,) * (data.ndim - 1 - len(dims))
            got[label] = data[index]
        return got


@pytest.mark.parametrize("algorithm", ["direct", "tau-leap"])
def test_export_then_import_reproduces_the_run(tmp_path, algorithm, monkeypatch):
    folder, arrays = ssa_run(tmp_path, algorithm=algorithm)
    archive = export_folder(folder, tmp_path / "run.omex")
    result = run_archive(archive, tmp_path / "out", "cpu", say=lambda s: None)
    got = report(tmp_path / "out")
    np.testing.assert_array_equal(got["time"], arrays["times"])
    for j, s in enumerate(("X", "Y")):
        np.testing.assert_array_equal(got[f"{s} mean"], arrays["mean"][:, j])    # identical, not close
        np.testing.assert_array_equal(got[f"{s} sd"], arrays["std"][:, j])
    # the archive's own results are the same numbers, laid out as the import writes them
    exported = report(tmp_path / "out" / "archive" / "results")
    for label, values in got.items():
        np.testing.assert_array_equal(exported[label], values)
    csv = (tmp_path / "out" / "simulation.sedml" / "statistics.csv").read_text().splitlines()
    assert csv[0].startswith("time,0.0,") and csv[1].startswith("X mean,30.0,")
    assert [p.name for p in result.plots] == ["means.png"]
    run_summary = json.loads((tmp_path / "out" / "runs" / "simulation-ensemble" / "summary.json").read_text())
    assert run_summary["seed"] == 7 and run_summary["realizations"] == 64
    from tests.sims.common.crate_check import validate_crate
    assert validate_crate(tmp_path / "out", monkeypatch) == []


# ---- hand-written SED-ML -----------------------------------------------------------------------
def sedml(tasks: str, generators: str, outputs: str, models: str = "", sims: str = "", version: int = 4) -> str:
    models = models or '<model id="m" language="urn:sedml:language:sbml" source="model.xml"/>'
    steps = "numberOfSteps" if version == 4 else "numberOfPoints"
    sims = sims or (f'<uniformTimeCourse id="sim" initialTime="0" outputStartTime="0" outputEndTime="2" {steps}="4">'
                    '<algorithm kisaoID="KISAO:0000029"><listOfAlgorithmParameters><algorithmParameter '
                    'kisaoID="KISAO:0000488" value="11"/></listOfAlgorithmParameters></algorithm></uniformTimeCourse>')
    return (f'<?xml version="1.0" encoding="UTF-8"?><sedML xmlns="http://sed-ml.org/sed-ml/level1/version{version}" '
            f'xmlns:sbml="http://www.sbml.org/sbml/level3/version2/core" level="1" version="{version}">'
            f'<listOfModels>{models}</listOfModels><listOfSimulations>{sims}</listOfSimulations>'
            f'<listOfTasks>{tasks}</listOfTasks><listOfDataGenerators>{generators}</listOfDataGenerators>'
            f'<listOfOutputs>{outputs}</listOfOutputs></sedML>')


MATHNS = 'xmlns="http://www.w3.org/1998/Math/MathML"'
SPECIES = "/sbml:sbml/sbml:model/sbml:listOfSpecies/sbml:species[@id='{}']"


def dg(gid: str, task: str, species: str | None = None, term: str = "", over: str = "", math: str = "") -> str:
    target = f'target="{SPECIES.format(species)}"' if species else 'symbol="urn:sedml:symbol:time"'
    dim = f' dimensionTerm="{term}"' if term else ""
    applied = f'<listOfAppliedDimensions><appliedDimension target="{over}"/></listOfAppliedDimensions>' if over else ""
    return (f'<dataGenerator id="{gid}"><math {MATHNS}>{math or f"<ci>v_{gid}</ci>"}</math><listOfVariables>'
            f'<variable id="v_{gid}" taskReference="{task}" {target}{dim}>{applied}</variable>'
            '</listOfVariables></dataGenerator>')


def report_xml(*dgs: str, rid="r") -> str:
    return (f'<report id="{rid}"><listOfDataSets>' + "".join(
        f'<dataSet id="d_{g}" label="{g}" dataReference="{g}"/>' for g in dgs) + "</listOfDataSets></report>")


ENSEMBLE = ('<task id="t" modelReference="m" simulationReference="sim"/>'
            '<repeatedTask id="ens" range="i" resetModel="true"><listOfRanges><uniformRange id="i" start="0" '
            'end="49" numberOfSteps="49" type="linear"/></listOfRanges><listOfSubTasks><subTask order="1" task="t"/>'
            '</listOfSubTasks></repeatedTask>')


def pack(tmp_path: Path, text: str, model: str | None = None, name="a.omex") -> Path:
    from app.sims.common.config import Document as Doc
    from app.sims.ssa.model import compile_network  # noqa: F401  (the spec is checked by spec_to_sbml's caller)
    from app.sims.ssa.config import load_config

    stage = tmp_path / f"stage-{name}"
    stage.mkdir()
    spec = load_config(Doc({"domain": "ssa", "model": MODEL}, {}, "<m>")).model
    (stage / "model.xml").write_text(model or spec_to_sbml(spec, "bd"))
    (stage / "simulation.sedml").write_text(text)
    return write_archive(tmp_path / name, [(stage / "model.xml", "model.xml", FORMATS["sbml"], False),
                                           (stage / "simulation.sedml", "simulation.sedml", FORMATS["sedml"], True)])


def run(tmp_path: Path, text: str, out="out", **kw) -> dict[str, np.ndarray]:
    run_archive(pack(tmp_path, text, name=f"{out}.omex", **kw), tmp_path / out, "cpu", say=lambda s: None)
    return report(tmp_path / out, rid="r")


def test_ensemble_raw_and_aggregated_data_agree(tmp_path):
    """Per-realization data (no aggregation) has one row per realization; its mean, SD, min and max
    over the realizations equal the aggregating data generators (the engine's own moments)."""
    gens = (dg("time", "ens") + dg("raw", "ens", "X") + dg("mean", "ens", "X", "KISAO:0000841", "ens")
            + dg("sd", "ens", "X", "KISAO:0000842", "ens") + dg("var", "ens", "X", "KISAO:0000859")
            + dg("lo", "ens", "X", "KISAO:0000840", "ens") + dg("hi", "ens", "X", "KISAO:0000830", "ens"))
    got = run(tmp_path, sedml(ENSEMBLE, gens, report_xml("time", "raw", "mean", "sd", "var", "lo", "hi")))
    with h5py.File(tmp_path / "out" / "reports.h5") as fh:
        shapes = list(fh["simulation.sedml/r"].attrs["sedmlDataSetShapes"])
    assert shapes == ["5", "50,5", "5", "5", "5", "5", "5"]
    raw = got["raw"]
    np.testing.assert_allclose(got["mean"], raw.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(got["sd"], raw.std(axis=0), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(got["var"], raw.var(axis=0), rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(got["lo"], raw.min(axis=0))
    np.testing.assert_array_equal(got["hi"], raw.max(axis=0))
    assert raw[:, 0].tolist() == [30.0] * 50 and len(set(raw[:, -1])) > 3      # they differ by realization
    assert not (tmp_path / "out" / "simulation.sedml" / "r.csv").exists()     # 2-D data sets: HDF5 only


def test_model_changes_take_effect(tmp_path):
    """changeAttribute k = 0 and removeXML of the backward reaction: no X ever converts, so X stays
    at its initial 30 - and addXML of a new species, changeXML of the initial count to 12."""
    models = ('<model id="m" language="urn:sedml:language:sbml" source="model.xml"><listOfChanges>'
              '<changeAttribute target="/sbml:sbml/sbml:model/sbml:listOfParameters/sbml:parameter[@id=\'k\']/@value" '
              'newValue="0"/>'
              '<removeXML target="/sbml:sbml/sbml:model/sbml:listOfReactions/sbml:reaction[2]"/>'
              '<changeXML target="/sbml:sbml/sbml:model/sbml:listOfSpecies/sbml:species[@id=\'Y\']"><newXML>'
              '<species xmlns="http://www.sbml.org/sbml/level3/version2/core" id="Y" compartment="cell" '
              'initialAmount="12" hasOnlySubstanceUnits="true" boundaryCondition="false" constant="false"/>'
              '</newXML></changeXML></listOfChanges></model>')
    gens = dg("x", "t", "X") + dg("y", "t", "Y")
    got = run(tmp_path, sedml('<task id="t" modelReference="m" simulationReference="sim"/>', gens,
                              report_xml("x", "y"), models=models))
    assert got["x"].tolist() == [30.0] * 5 and got["y"].tolist() == [12.0] * 5


@pytest.mark.slow
def test_a_sweep_of_ensembles_runs_on_dask(tmp_path):
    """setValue over a vectorRange: a sweep, each point an ensemble, as app.sweep points."""
    sweep = ('<repeatedTask id="sw" range="kv" resetModel="true"><listOfRanges><vectorRange id="kv">'
             '<value>0</value><value>2.5</value></vectorRange></listOfRanges><listOfChanges>'
             '<setValue modelReference="m" range="kv" target="/sbml:sbml/sbml:model/sbml:listOfParameters/'
             f'sbml:parameter[@id=\'k\']/@value"><math {MATHNS}><ci>kv</ci></math></setValue></listOfChanges>'
             '<listOfSubTasks><subTask order="1" task="ens"/></listOfSubTasks></repeatedTask>')
    gens = dg("mean", "sw", "X", "KISAO:0000841", "ens") + dg("overall", "sw", "X", "KISAO:0000841")
    got = run(tmp_path, sedml(ENSEMBLE + sweep, gens, report_xml("mean", "overall")))
    mean = got["mean"]
    assert mean.shape == (2, 5)                      # points x times
    assert mean[0].tolist() == [30.0] * 5            # k = 0: nothing happens
    assert mean[1, -1] < 20                          # k = 2.5: X decays towards 30 * 0.7 / 3.2
    np.testing.assert_allclose(got["overall"], mean.mean(axis=0))
    points = sorted((tmp_path / "out" / "runs" / "simulation-sw" / "points").iterdir())
    assert len(points) == 2 and all((p / "ro-crate-metadata.json").is_file() for p in points)
    assert (tmp_path / "out" / "runs" / "simulation-sw" / "sweep.csv").is_file()


def test_sedml_level1_version3_and_output_start(tmp_path):
    sims = ('<uniformTimeCourse id="sim" initialTime="0" outputStartTime="1" outputEndTime="2" numberOfPoints="2">'
            '<algorithm kisaoID="KISAO:0000027"/></uniformTimeCourse>')
    text = sedml('<task id="t" modelReference="m" simulationReference="sim"/>', dg("time", "t"),
                 report_xml("time"), sims=sims, version=3)
    assert run(tmp_path, text)["time"].tolist() == [1.0, 1.5, 2.0]


@pytest.mark.parametrize("case, words", [
    (dict(sims='<uniformTimeCourse id="sim" initialTime="0" outputStartTime="0" outputEndTime="2" numberOfSteps="4">'
               '<algorithm kisaoID="KISAO:0000019"/></uniformTimeCourse>'), "algorithm 'KISAO_0000019': KiSAO term "
     "'KISAO_0000019' (CVODE)"),
    (dict(sims='<uniformTimeCourse id="sim" initialTime="0" outputStartTime="0" outputEndTime="2" numberOfSteps="4">'
               '<algorithm kisaoID="KISAO:0000999"/></uniformTimeCourse>'), "not a stochastic algorithm known here"),
    (dict(sims='<uniformTimeCourse id="sim" initialTime="1" outputStartTime="1" outputEndTime="2" numberOfSteps="4">'
               '<algorithm kisaoID="KISAO:0000029"/></uniformTimeCourse>'), "uniformTimeCourse 'sim': initialTime 1"),
    (dict(sims='<steadyState id="sim"><algorithm kisaoID="KISAO:0000029"/></steadyState>'), "steadyState 'sim'"),
    (dict(models='<model id="m" language="urn:sedml:language:sbml" source="http://example.org/m.xml"/>'),
     "model 'm': source 'http://example.org/m.xml' is an external reference"),
    (dict(models='<model id="m" language="urn:sedml:language:sbml" source="../../../etc/passwd"/>'),
     "model 'm': source '../../../etc/passwd' leaves the archive"),
    (dict(models='<model id="m" language="urn:sedml:language:cellml" source="model.xml"/>'), "only SBML"),
    (dict(generators=dg("p", "t", math="<apply><factorial/><ci>v_p</ci></apply>")), "dataGenerator 'p'"),
    (dict(outputs='<plot3D id="p3"/>'), "plot3D 'p3': only report and plot2D"),
])
def test_unsupported_elements_are_refused_by_id(tmp_path, case, words):
    parts = {"tasks": '<task id="t" modelReference="m" simulationReference="sim"/>',
             "generators": dg("x", "t", "X"), "outputs": report_xml("x")}
    parts.update({k: v for k, v in case.items() if k in parts})
    text = sedml(parts["tasks"], parts["generators"], parts["outputs"] if "outputs" not in case else
                 case["outputs"] + report_xml(*(["p"] if "generators" in case else ["x"])),
                 models=case.get("models", ""), sims=case.get("sims", ""))
    if "generators" in case:
        text = text.replace('dataReference="x"', 'dataReference="p"')
    with pytest.raises(SedmlError) as err:
        run_archive(pack(tmp_path, text), tmp_path / "out", "cpu", say=lambda s: None)
    assert words in str(err.value)
    assert "simulation.sedml" in str(err.value)
    assert not (tmp_path / "out" / "runs").exists()            # refused before anything ran


def test_a_functional_range_and_two_subtasks_are_refused(tmp_path):
    rep = ('<task id="t" modelReference="m" simulationReference="sim"/><repeatedTask id="rt" range="f" '
           'resetModel="true"><listOfRanges><functionalRange id="f" range="f"><math ' + MATHNS +
           '><cn>1</cn></math></functionalRange></listOfRanges><listOfSubTasks><subTask order="1" task="t"/>'
           '</listOfSubTasks></repeatedTask>')
    with pytest.raises(SedmlError, match="functionalRange 'f': only uniformRange and vectorRange"):
        run_archive(pack(tmp_path, sedml(rep, dg("x", "rt", "X"), report_xml("x"))), tmp_path / "o", "cpu",
                    say=lambda s: None)
    two = ENSEMBLE.replace('</listOfSubTasks>', '<subTask order="2" task="t"/></listOfSubTasks>')
    with pytest.raises(SedmlError, match="repeatedTask 'ens': 2 subTasks"):
        run_archive(pack(tmp_path, sedml(two, dg("x", "ens", "X"), report_xml("x")), name="b.omex"),
                    tmp_path / "o2", "cpu", say=lambda s: None)


def test_cli_runs_and_exports(tmp_path, capsys):
    from app.cli import main

    folder, arrays = ssa_run(tmp_path, realizations=16)
    assert main(["omex", "--export", str(folder), "-o", str(tmp_path / "x.omex")]) == 0
    assert main(["omex", "-i", str(tmp_path / "x.omex"), "-o", str(tmp_path / "o"), "--backend", "cpu",
                 "--no-png"]) == 0
    np.testing.assert_array_equal(report(tmp_path / "o")["X mean"], arrays["mean"][:, 0])
    bad = tmp_path / "bad.omex"
    bad.write_bytes(b"PK\x05\x06" + bytes(18))
    assert main(["omex", "-i", str(bad), "-o", str(tmp_path / "o2")]) == 2
    assert str(bad) in capsys.readouterr().err


@pytest.mark.slow
def test_a_sweep_folder_exports_and_reimports_identically(tmp_path):
    """A sweep over a rate parameter (app.sweep on Dask) as an OMEX archive: an outer repeatedTask
    of setValue changes around the ensemble; re-imported, each point's mean is the same numbers."""
    import yaml

    from app.sweep.runner import run_sweep

    config = tmp_path / "sweep.yaml"
    config.write_text(yaml.safe_dump({
        "domain": "ssa", "name": "bd", "model": MODEL,
        "ensemble": {"realizations": 32, "t_end": 2.0, "samples": 5, "seed": 3},
        "sweep": {"parameters": [{"key": "model.parameters.k", "values": [0.5, 2.0]}]}}))
    result = run_sweep(config, tmp_path / "sw", backend="cpu", workers=1)
    assert result.summary["finished"] == 2
    archive = export_folder(tmp_path / "sw", tmp_path / "sw.omex")
    run_archive(archive, tmp_path / "out", "cpu", workers=1, say=lambda s: None, png=False)
    got = report(tmp_path / "out")
    for i, point in enumerate(sorted((tmp_path / "sw" / "points").iterdir())):
        with np.load(point / "results.npz") as npz:
            np.testing.assert_array_equal(got["X mean"][i], npz["mean"][:, 0])
            np.testing.assert_array_equal(got["Y sd"][i], npz["std"][:, 1])
    assert validate_sweep_crate(tmp_path / "sw")


def validate_sweep_crate(folder: Path) -> bool:
    doc = json.loads((folder / "ro-crate-metadata.json").read_text())
    ids = {e["@id"] for e in doc["@graph"]}
    return {"sweep.csv", "summary.json", "points/p00000-r00/results.npz"} <= ids


@pytest.mark.gpu
@pytest.mark.parametrize("algorithm", ["direct", "tau-leap"])
def test_export_then_import_on_cuda(tmp_path, algorithm):
    """A CUDA ensemble (4096 realizations) exported and re-run on CUDA: identical mean and SD; and
    against the same archive run on the CPU, the means agree within 5 standard errors."""
    folder, arrays = ssa_run(tmp_path, realizations=4096, algorithm=algorithm, backend="cuda")
    archive = export_folder(folder, tmp_path / "run.omex")
    run_archive(archive, tmp_path / "gpu", "cuda", say=lambda s: None, png=False)
    got = report(tmp_path / "gpu")
    for j, s in enumerate(("X", "Y")):
        np.testing.assert_array_equal(got[f"{s} mean"], arrays["mean"][:, j])
        np.testing.assert_array_equal(got[f"{s} sd"], arrays["std"][:, j])
    run_archive(archive, tmp_path / "cpu", "cpu", say=lambda s: None, png=False)
    cpu = report(tmp_path / "cpu")
    se = np.sqrt((got["X sd"] ** 2 + cpu["X sd"] ** 2) / 4096)[1:]
    assert (np.abs(got["X mean"] - cpu["X mean"])[1:] < 5 * se).all()


def test_a_model_with_a_dtd_is_refused(tmp_path):
    bomb = ('<?xml version="1.0"?><!DOCTYPE sbml [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;">]>'
            '<sbml xmlns="http://www.sbml.org/sbml/level3/version2/core" level="3" version="2"><model id="m">'
            '<notes>&b;</notes></model></sbml>')
    text = sedml('<task id="t" modelReference="m" simulationReference="sim"/>', dg("x", "t", "X"), report_xml("x"))
    with pytest.raises(SedmlError, match="model 'm': model.xml declares a DTD"):
        run_archive(pack(tmp_path, text, model=bomb), tmp_path / "out", "cpu", say=lambda s: None)
