"""SED-ML (Level 1 Versions 3 and 4, python-libsedml) read into a plan the SSA engines run.

Supported: models (SBML, a file of the archive or another model of the document) with
``changeAttribute``, ``addXML``, ``changeXML``, ``removeXML`` and ``computeChange``;
``uniformTimeCourse`` from time 0 with a stochastic KiSAO algorithm (:data:`ALGORITHMS`);
``task``; ``repeatedTask`` with one sub-task and ``uniformRange`` / ``vectorRange`` ranges: without
``setValue`` changes over a stochastic task it is an ensemble (the range's length is the number
of realizations), with ``setValue`` changes it is a sweep (each point a task or an ensemble);
``dataGenerator`` math over variables (species, time) and parameters, with the L1V4 aggregations
(:data:`AGGREGATIONS`) over a repeated task's dimension; ``report`` and ``plot2D`` outputs.
Everything else is refused with the element's id and the reason (:class:`SedmlError`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.compute.codegen import ExprError, Node, evaluate, parse
from app.sims.common.config import ConfigError

#: KiSAO id -> (our algorithm, KiSAO name). Exact SSA variants sample the same process as the
#: direct method and run as it; the tau-leaping family runs our explicit tau-leaping.
ALGORITHMS = {
    "KISAO_0000029": ("direct", "Gillespie direct algorithm"),
    "KISAO_0000015": ("direct", "Gillespie first reaction algorithm"),
    "KISAO_0000027": ("direct", "Gibson-Bruck next reaction algorithm"),
    "KISAO_0000038": ("direct", "sorting stochastic simulation algorithm"),
    "KISAO_0000241": ("direct", "Gillespie-like method"),
    "KISAO_0000039": ("tau-leap", "tau-leaping method"),
    "KISAO_0000040": ("tau-leap", "Poisson tau-leaping method"),
    "KISAO_0000084": ("tau-leap", "nonnegative Poisson tau-leaping method"),
}
EXPORT_KISAO = {"direct": "KISAO_0000029", "logdirect": "KISAO_0000029", "tau-leap": "KISAO_0000039"}
KNOWN_NAMES = {"KISAO_0000019": "CVODE", "KISAO_0000030": "Euler forward method",
               "KISAO_0000032": "explicit fourth-order Runge-Kutta method", "KISAO_0000088": "LSODA",
               "KISAO_0000045": "implicit tau-leaping method", "KISAO_0000046": "trapezoidal tau-leaping method",
               "KISAO_0000048": "adaptive explicit-implicit tau-leaping method",
               "KISAO_0000074": "binomial tau-leaping method", "KISAO_0000028": "slow-scale SSA",
               "KISAO_0000437": "flux balance analysis", "KISAO_0000560": "LSODA/LSODAR hybrid method"}
SEED, EPSILON = "KISAO_0000488", "KISAO_0000228"
#: L1V4 aggregation KiSAO terms -> our name (NaN-ignoring variants are the same here: no NaN)
AGGREGATIONS = {"KISAO_0000841": "mean", "KISAO_0000825": "mean", "KISAO_0000842": "sd",
                "KISAO_0000826": "sd", "KISAO_0000859": "variance", "KISAO_0000858": "variance",
                "KISAO_0000830": "max", "KISAO_0000828": "max", "KISAO_0000840": "min",
                "KISAO_0000829": "min"}
TIME_SYMBOLS = ("urn:sedml:symbol:time", "KISAO:0000832", "KISAO_0000832")
MAX_POINTS = 100_000          # sweep points of one repeated task
MAX_SEDML_BYTES = 16 << 20    # a SED-ML file (they are kilobytes)
MAX_MODEL_BYTES = 64 << 20    # an SBML model
_SPECIES = re.compile(r"^/sbml:sbml/sbml:model/sbml:listOfSpecies/sbml:species\[@id=(['\"])([A-Za-z_]\w*)\1\]$")


class SedmlError(ConfigError):
    """A SED-ML element refused: the document, the element, its id and the reason."""

    def __init__(self, doc: str, element: str, id_: str, reason: str):
        super().__init__(f"{element} '{id_}': {reason}", source=doc)
        self.element, self.id, self.reason = element, id_, reason


def _libsedml():
    import sys

    late = "libsbml" in sys.modules and "libsedml" not in sys.modules
    try:
        import libsedml
    except ImportError as exc:
        raise ConfigError("SED-ML needs python-libsedml: pip install 'biogpu-studio[sedml]'") from exc
    if late and not isinstance(sys.modules["libsbml"].parseL3Formula("a").getType(), int):
        raise ConfigError("libSEDML was loaded after libSBML in this process, which breaks libSBML's math; "
                          "load SBML through app.sims.ssa.sbml (it loads libSEDML first)")
    return libsedml


def kisao(term: str) -> str:
    return term.strip().replace(":", "_").upper()


# ---- the plan ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TimeCourse:
    id: str
    t_end: float
    samples: int            # grid points from 0 to t_end
    first: int              # the first reported grid point (outputStartTime)
    algorithm: str
    kisao: str
    seed: int | None
    epsilon: float


@dataclass(frozen=True)
class ModelChange:
    """One XML change of a model: kind (attribute, add, change, remove), XPath target, value."""

    kind: str
    target: str
    value: str = ""
    math: Node | None = None          # computeChange / setValue: evaluated per point
    names: tuple[str, ...] = ()


@dataclass(frozen=True)
class Unit:
    """What one referenced task runs: a model, a time course, realizations, sweep points.

    ``dims`` names the repeated-task dimensions of a species variable of this task, outermost
    first (a sweep's id, then an ensemble's id; none for a plain task).
    """

    id: str
    model: str
    sim: TimeCourse
    realizations: int
    dims: tuple[str, ...]
    ensemble: str | None = None                 # id of the ensemble dimension, if any
    sweep: str | None = None                    # id of the sweep dimension, if any
    points: tuple[tuple[tuple[str, str, float], ...], ...] = ()   # per point: (model, XPath, value)
    point_values: tuple[dict, ...] = ()         # per point: range id -> value (for tables)


@dataclass(frozen=True)
class Variable:
    id: str
    task: str
    species: str | None           # None: time
    aggregate: str | None = None
    over: tuple[str, ...] = ()    # dimensions aggregated over (empty: all repeated ones)


@dataclass(frozen=True)
class DataGenerator:
    id: str
    name: str
    math: Node
    variables: tuple[Variable, ...]
    parameters: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Output:
    id: str
    name: str
    kind: str                                       # report or plot2D
    items: tuple[tuple[str, str, str], ...]         # report: (id, label, dg); plot: (id, x dg, y dg)
    item_names: tuple[str, ...] = ()


@dataclass
class Plan:
    source: str                     # the SED-ML file (for messages)
    location: str                   # its location in the archive (report paths)
    models: dict[str, tuple[Path, tuple[ModelChange, ...]]]
    units: dict[str, Unit]
    generators: dict[str, DataGenerator]
    outputs: list[Output]
    notes: list[str]
    namespaces: dict[str, str] = field(default_factory=dict)    # XPath prefixes of the document


# ---- math ------------------------------------------------------------------------------------
def math_text(sd, node, where: tuple[str, str, str]) -> str:
    """The text of a MathML tree (libSBML's, ``sd`` its module) in the expression core's grammar
    (refusing the rest)."""
    t = node.getType()
    kids = [node.getChild(i) for i in range(node.getNumChildren())]

    def sub(i: int) -> str:
        return f"({math_text(sd, kids[i], where)})"

    if t == sd.AST_INTEGER:
        return repr(float(node.getInteger()))
    if t in (sd.AST_REAL, sd.AST_REAL_E, sd.AST_RATIONAL):
        return repr(float(node.getReal()))
    if t == sd.AST_NAME:
        return node.getName()
    if t == sd.AST_CONSTANT_PI:
        return repr(math.pi)
    if t == sd.AST_CONSTANT_E:
        return repr(math.e)
    ops = {sd.AST_PLUS: " + ", sd.AST_TIMES: " * "}
    if t in ops:
        return ops[t].join(sub(i) for i in range(len(kids))) or ("0.0" if t == sd.AST_PLUS else "1.0")
    if t == sd.AST_MINUS:
        return f"-{sub(0)}" if len(kids) == 1 else f"{sub(0)} - {sub(1)}"
    if t == sd.AST_DIVIDE:
        return f"{sub(0)} / {sub(1)}"
    if t in (sd.AST_POWER, sd.AST_FUNCTION_POWER):
        return f"{sub(0)} ** {sub(1)}"
    simple = {sd.AST_FUNCTION_EXP: "exp", sd.AST_FUNCTION_LN: "log", sd.AST_FUNCTION_ABS: "abs"}
    if t in simple:
        return f"{simple[t]}({sub(0)})"
    if t == sd.AST_FUNCTION_ROOT and len(kids) == 1:
        return f"sqrt({sub(0)})"
    if t == sd.AST_FUNCTION_LOG and len(kids) == 1:
        return f"log({sub(0)}) / {math.log(10)!r}"
    if t in (sd.AST_FUNCTION_MIN, sd.AST_FUNCTION_MAX) and len(kids) == 2:
        return f"{'min' if t == sd.AST_FUNCTION_MIN else 'max'}({sub(0)}, {sub(1)})"
    doc, element, id_ = where
    raise SedmlError(doc, element, id_, f"the math '{sd.formulaToL3String(node)}' uses what is not "
                     "supported (numbers, names, + - * / ^, exp, ln, log, sqrt, abs, min, max)")


def parse_math(sd, node, names: set[str], where: tuple[str, str, str]) -> Node:
    from app.sims.ssa.sbml import _libsbml

    if node is None:
        raise SedmlError(*where, "has no math")
    sb = _libsbml()          # libSEDML's own tree types do not reach Python as numbers
    tree = sb.readMathMLFromString(sd.writeMathMLToString(node))
    if tree is None:
        raise SedmlError(*where, "its math cannot be read")
    text = math_text(sb, tree, where)
    try:
        return parse(text, names)
    except ExprError as exc:
        raise SedmlError(*where, f"math refused: {exc}") from None


def evaluate_math(node: Node, env: dict[str, Any]):
    import numpy as np
    return np.asarray(evaluate(node, {k: np.asarray(v, dtype=float) for k, v in env.items()}), dtype=float)


# ---- reading -----------------------------------------------------------------------------------
def read_sedml(path: str | Path, root: str | Path, location: str | None = None) -> Plan:
    """The plan of the SED-ML file ``path`` whose model sources resolve inside ``root``."""
    sd = _libsedml()
    path, root = Path(path), Path(root).resolve()
    label = str(location or path.name)
    if path.stat().st_size > MAX_SEDML_BYTES:
        raise SedmlError(label, "sedML", "", f"{path.stat().st_size:,} bytes; at most {MAX_SEDML_BYTES:,} are read")
    text = path.read_text(encoding="utf-8", errors="replace")
    if "<!DOCTYPE" in text or "<!ENTITY" in text:
        raise SedmlError(label, "sedML", "", "declares a DTD or entities; refused")
    doc = sd.readSedMLFromString(text)
    if doc.getNumErrors(sd.LIBSEDML_SEV_ERROR) + doc.getNumErrors(sd.LIBSEDML_SEV_FATAL):
        log = doc.getErrorLog()
        first = [log.getError(i).getMessage().strip() for i in range(log.getNumErrors())
                 if log.getError(i).getSeverity() >= sd.LIBSEDML_SEV_ERROR][:3]
        raise SedmlError(label, "sedML", "", "not valid SED-ML: " + " | ".join(first))
    reader = _Reader(sd, doc, label, path.parent, root)
    return reader.plan(location or path.name)


class _Reader:
    def __init__(self, sd, doc, label: str, folder: Path, root: Path):
        self.sd, self.doc, self.label, self.folder, self.root = sd, doc, label, folder, root
        self.notes: list[str] = []

    def refuse(self, element: str, id_: str, reason: str) -> SedmlError:
        return SedmlError(self.label, element, id_, reason)

    def plan(self, location: str) -> Plan:
        doc = self.doc
        if doc.getNumDataDescriptions():
            dd = doc.getDataDescription(0)
            raise self.refuse("dataDescription", dd.getId(), "external data is not supported")
        models = {m.getId(): self.model(m) for m in doc.getListOfModels()}
        sims = {}
        for s in doc.getListOfSimulations():
            sims[s.getId()] = s
        generators = {g.getId(): self.generator(g) for g in doc.getListOfDataGenerators()}
        outputs = [self.output(o) for o in doc.getListOfOutputs()]
        used_dgs = {dg for o in outputs for item in o.items for dg in item[1:] if dg}
        tasks = sorted({v.task for g in generators.values() if g.id in used_dgs for v in g.variables})
        units = {t: self.unit(t, sims, models) for t in tasks}
        for g in generators.values():
            if g.id in used_dgs:
                for v in g.variables:
                    self.check_variable(v, units[v.task], g.id)
        ns = doc.getNamespaces()
        prefixes = {ns.getPrefix(i): ns.getURI(i) for i in range(ns.getNumNamespaces()) if ns.getPrefix(i)}
        return Plan(self.label, location, models, units, generators, outputs, self.notes, prefixes)

    # models ---------------------------------------------------------------------------------
    def model(self, m) -> tuple[Path, tuple[ModelChange, ...]]:
        mid, source = m.getId(), m.getSource()
        lang = m.getLanguage() or ""
        if lang and "sbml" not in lang.lower():
            raise self.refuse("model", mid, f"language '{lang}': only SBML models run here")
        changes = tuple(self.change(c, mid) for c in m.getListOfChanges())
        if source.startswith("#"):
            parent = self.doc.getModel(source[1:])
            if parent is None or source[1:] == mid:
                raise self.refuse("model", mid, f"source '{source}' names no other model of this document")
            base, before = self.model(parent)
            return base, before + changes
        if "://" in source or source.startswith(("urn:", "http:", "https:", "file:")):
            raise self.refuse("model", mid, f"source '{source}' is an external reference; only files of "
                              "the archive are read")
        target = (self.folder / source).resolve()
        if not target.is_relative_to(self.root):
            raise self.refuse("model", mid, f"source '{source}' leaves the archive")
        if not target.is_file():
            raise self.refuse("model", mid, f"source '{source}' is not in the archive")
        if target.stat().st_size > MAX_MODEL_BYTES:
            raise self.refuse("model", mid, f"source '{source}' has {target.stat().st_size:,} bytes; at most "
                              f"{MAX_MODEL_BYTES:,} are read")
        return target, changes

    def change(self, c, mid: str) -> ModelChange:
        sd = self.sd
        cid = c.getId() or c.getTarget()
        kinds = {sd.SEDML_CHANGE_ATTRIBUTE: "attribute", sd.SEDML_CHANGE_ADDXML: "add",
                 sd.SEDML_CHANGE_CHANGEXML: "change", sd.SEDML_CHANGE_REMOVEXML: "remove",
                 sd.SEDML_CHANGE_COMPUTECHANGE: "compute"}
        kind = kinds.get(c.getTypeCode())
        if kind is None:
            raise self.refuse(c.getElementName(), cid, f"this change of model '{mid}' is not supported")
        if kind == "attribute":
            return ModelChange(kind, c.getTarget(), c.getNewValue())
        if kind in ("add", "change"):
            xml = c.getNewXML()
            text = "".join(xml.getChild(i).toXMLString() for i in range(xml.getNumChildren())) \
                if xml is not None and xml.getName() == "" else (xml.toXMLString() if xml else "")
            return ModelChange(kind, c.getTarget(), text)
        if kind == "remove":
            return ModelChange(kind, c.getTarget())
        if c.getNumVariables():
            raise self.refuse("computeChange", cid, "variables of a computeChange are not supported "
                              "(parameters and numbers are)")
        params = {p.getId(): p.getValue() for p in c.getListOfParameters()}
        node = parse_math(sd, c.getMath(), set(params), (self.label, "computeChange", cid))
        value = float(evaluate_math(node, params))
        return ModelChange("attribute", c.getTarget(), repr(value))

    # simulations and tasks --------------------------------------------------------------------
    def timecourse(self, s) -> TimeCourse:
        sd = self.sd
        sid = s.getId()
        if s.getTypeCode() != sd.SEDML_SIMULATION_UNIFORMTIMECOURSE:
            raise self.refuse(s.getElementName(), sid, "only uniformTimeCourse simulations are supported")
        t0, start, end = s.getInitialTime(), s.getOutputStartTime(), s.getOutputEndTime()
        steps = s.getNumberOfSteps() if self.doc.getVersion() >= 4 else s.getNumberOfPoints()
        if t0 != 0:
            raise self.refuse("uniformTimeCourse", sid, f"initialTime {t0:g}: the engines start at time 0")
        if not (0 <= start < end) or steps < 1 or not math.isfinite(end):
            raise self.refuse("uniformTimeCourse", sid, f"output times {start:g} to {end:g} in {steps} steps")
        dt = (end - start) / steps
        first = round(start / dt)
        if abs(first * dt - start) > 1e-9 * max(1.0, end):
            raise self.refuse("uniformTimeCourse", sid, f"outputStartTime {start:g} is not on the grid of "
                              f"step {dt:g} from 0 (the engines sample from time 0)")
        samples = first + steps + 1
        if samples > 100001:
            raise self.refuse("uniformTimeCourse", sid, f"{samples} output times; at most 100001")
        alg = s.getAlgorithm()
        term = kisao(alg.getKisaoID() if alg is not None else "")
        if term not in ALGORITHMS:
            name = KNOWN_NAMES.get(term, "not a stochastic algorithm known here")
            raise self.refuse("algorithm", term or "(none)", f"KiSAO term '{term}' ({name}) of simulation "
                              f"'{sid}' is not supported; supported: " +
                              ", ".join(f"{k} {v[1]}" for k, v in ALGORITHMS.items()))
        ours, name = ALGORITHMS[term]
        if term != EXPORT_KISAO[ours]:
            self.notes.append(f"simulation '{sid}': {term} ({name}) runs as our {ours} method "
                              "(an exact SSA samples the same process)" if ours == "direct" else
                              f"simulation '{sid}': {term} ({name}) runs as our explicit tau-leaping")
        seed, eps = None, 0.03
        for p in alg.getListOfAlgorithmParameters():
            pk = kisao(p.getKisaoID())
            try:
                value = float(p.getValue())
            except ValueError:
                raise self.refuse("algorithmParameter", pk, f"value '{p.getValue()}' is not a number") from None
            if pk == SEED and value >= 0 and value == int(value):
                seed = int(value)
            elif pk == EPSILON and 0 < value <= 0.5 and ours == "tau-leap":
                eps = value
            else:
                raise self.refuse("algorithmParameter", pk, f"value {p.getValue()} of simulation '{sid}' is not "
                                  f"supported (a seed {SEED} >= 0, and for tau-leaping an epsilon {EPSILON} "
                                  "in (0, 0.5])")
        return TimeCourse(sid, end, samples, first, ours, term, seed, eps)

    def task(self, tid: str):
        task = self.doc.getTask(tid)
        if task is None:
            raise self.refuse("task", tid, "no such task")
        return task

    def unit(self, tid: str, sims, models) -> Unit:
        sd = self.sd
        task = self.task(tid)
        if task.getTypeCode() == sd.SEDML_TASK:
            return Unit(tid, self.model_ref(task), self.sim_ref(task, sims), 1, ())
        if task.getTypeCode() != sd.SEDML_TASK_REPEATEDTASK:
            raise self.refuse(task.getElementName(), tid, "only task and repeatedTask are supported")
        inner_id, length, ranges = self.repeated(task)
        inner = self.task(inner_id)
        if task.getNumTaskChanges() == 0:        # an ensemble of realizations
            if inner.getTypeCode() != sd.SEDML_TASK:
                raise self.refuse("repeatedTask", tid, "a repeatedTask without changes (an ensemble) must "
                                  "repeat a plain task")
            if task.isSetResetModel() and not task.getResetModel():
                raise self.refuse("repeatedTask", tid, "resetModel='false': runs continuing from the previous "
                                  "end state are not supported (each realization starts from the model)")
            return Unit(tid, self.model_ref(inner), self.sim_ref(inner, sims), length, (tid,), ensemble=tid)
        base = self.unit(inner_id, sims, models)
        if base.sweep is not None:
            raise self.refuse("repeatedTask", tid, "a sweep of a sweep is not supported")
        if task.isSetResetModel() and not task.getResetModel():
            raise self.refuse("repeatedTask", tid, "resetModel='false' is not supported")
        points, values = [], []
        for i in range(length):
            env = {rid: vals[i] for rid, vals in ranges.items()}
            changes = []
            for change in task.getListOfTaskChanges():
                cid = change.getId() or change.getTarget()
                if change.getNumVariables():
                    raise self.refuse("setValue", cid, "variables in setValue math are not supported")
                params = {p.getId(): p.getValue() for p in change.getListOfParameters()}
                node = parse_math(sd, change.getMath(), set(env) | set(params), (self.label, "setValue", cid))
                mref = change.getModelReference()
                if mref != base.model:
                    raise self.refuse("setValue", cid, f"changes model '{mref}', not the model '{base.model}' "
                                      "the repeated task runs")
                changes.append((mref, change.getTarget(), float(evaluate_math(node, {**env, **params}))))
            points.append(tuple(changes))
            values.append(env)
        return Unit(tid, base.model, base.sim, base.realizations, (tid,) + base.dims,
                    ensemble=base.ensemble, sweep=tid, points=tuple(points), point_values=tuple(values))

    def repeated(self, task) -> tuple[str, int, dict[str, list[float]]]:
        sd = self.sd
        tid = task.getId()
        if task.getNumSubTasks() != 1:
            raise self.refuse("repeatedTask", tid, f"{task.getNumSubTasks()} subTasks: exactly one is supported")
        if getattr(task, "getConcatenate", None) and task.isSetConcatenate() and task.getConcatenate():
            raise self.refuse("repeatedTask", tid, "concatenate='true' is not supported")
        ranges: dict[str, list[float]] = {}
        for r in task.getListOfRanges():
            rid = r.getId()
            code = r.getTypeCode()
            if code == sd.SEDML_RANGE_UNIFORMRANGE:
                n = r.getNumberOfSteps() if self.doc.getVersion() >= 4 else r.getNumberOfPoints()
                if not 0 <= n < MAX_POINTS:
                    raise self.refuse("uniformRange", rid, f"{n} steps; at most {MAX_POINTS - 1}")
                a, b, kind = r.getStart(), r.getEnd(), (r.getType() or "linear").lower()
                if kind == "log":
                    if a <= 0 or b <= 0:
                        raise self.refuse("uniformRange", rid, "a log range needs positive start and end")
                    vals = [math.exp(math.log(a) + i * (math.log(b) - math.log(a)) / max(n, 1)) for i in range(n + 1)]
                elif kind == "linear":
                    vals = [a + i * (b - a) / max(n, 1) for i in range(n + 1)]
                else:
                    raise self.refuse("uniformRange", rid, f"type '{kind}' (linear or log)")
            elif code == sd.SEDML_RANGE_VECTORRANGE:
                vals = [float(v) for v in r.getValues()]
                if len(vals) > MAX_POINTS:
                    raise self.refuse("vectorRange", rid, f"{len(vals)} values; at most {MAX_POINTS}")
            else:
                raise self.refuse(r.getElementName(), rid, "only uniformRange and vectorRange are supported")
            ranges[rid] = vals
        master = task.getRangeId()
        if master not in ranges:
            raise self.refuse("repeatedTask", tid, f"its range '{master}' is not one of its ranges")
        length = len(ranges[master])
        if length < 1 or any(len(v) < length for v in ranges.values()):
            raise self.refuse("repeatedTask", tid, "a range is shorter than the master range")
        sub = task.getSubTask(0)
        if sub.getNumTaskChanges():
            raise self.refuse("subTask", sub.getTask(), f"changes inside a subTask of repeatedTask '{tid}' are not "
                              "supported (put them on the repeatedTask)")
        return sub.getTask(), length, {k: v[:length] for k, v in ranges.items()}

    def model_ref(self, task) -> str:
        mid = task.getModelReference()
        if self.doc.getModel(mid) is None:
            raise self.refuse("task", task.getId(), f"model '{mid}' not found")
        return mid

    def sim_ref(self, task, sims) -> TimeCourse:
        sid = task.getSimulationReference()
        if sid not in sims:
            raise self.refuse("task", task.getId(), f"simulation '{sid}' not found")
        return self.timecourse(sims[sid])

    # data generators and outputs -----------------------------------------------------------------
    def generator(self, g) -> DataGenerator:
        gid = g.getId()
        variables = []
        for v in g.getListOfVariables():
            vid = v.getId()
            if v.isSetModelReference() and not v.isSetTaskReference():
                raise self.refuse("variable", vid, "a variable of a model (not a task) is not supported")
            symbol, target = v.getSymbol(), v.getTarget()
            species = None
            if symbol:
                if symbol not in TIME_SYMBOLS:
                    raise self.refuse("variable", vid, f"symbol '{symbol}': only time is supported")
            else:
                m = _SPECIES.match(target.strip())
                if m is None:
                    raise self.refuse("variable", vid, f"target '{target}': only species "
                                      "(/sbml:sbml/sbml:model/sbml:listOfSpecies/sbml:species[@id='...']) and time "
                                      "can be recorded")
                species = m.group(2)
            aggregate, over = None, ()
            term = v.getDimensionTerm() if v.isSetDimensionTerm() else ""
            if term:
                aggregate = AGGREGATIONS.get(kisao(term))
                if aggregate is None:
                    raise self.refuse("variable", vid, f"dimensionTerm '{term}' is not supported; supported: "
                                      + ", ".join(sorted(AGGREGATIONS)))
                over = tuple(a.getTarget() for a in v.getListOfAppliedDimensions() if a.isSetTarget())
                if any(a.isSetDimensionTarget() for a in v.getListOfAppliedDimensions()):
                    raise self.refuse("variable", vid, "appliedDimension with a dimensionTarget is not supported")
            elif v.getNumAppliedDimensions():
                raise self.refuse("variable", vid, "appliedDimension without a dimensionTerm")
            variables.append(Variable(vid, v.getTaskReference(), species, aggregate, over))
        params = {p.getId(): p.getValue() for p in g.getListOfParameters()}
        names = {v.id for v in variables} | set(params)
        node = parse_math(self.sd, g.getMath(), names, (self.label, "dataGenerator", gid))
        return DataGenerator(gid, g.getName() or gid, node, tuple(variables), params)

    def check_variable(self, v: Variable, unit: Unit, gid: str) -> None:
        for dim in v.over:
            if dim not in unit.dims:
                raise self.refuse("variable", v.id, f"applied dimension '{dim}' is not a repeated task of "
                                  f"task '{unit.id}' (its dimensions: {', '.join(unit.dims) or 'none'})")
        if v.aggregate and not unit.dims:
            raise self.refuse("variable", v.id, f"aggregates over task '{unit.id}', which repeats nothing")

    def output(self, o) -> Output:
        sd = self.sd
        oid = o.getId()
        if o.getTypeCode() == sd.SEDML_OUTPUT_REPORT:
            items = tuple((d.getId(), d.getLabel() or d.getId(), d.getDataReference()) for d in o.getListOfDataSets())
            names = tuple(d.getName() or "" for d in o.getListOfDataSets())
            kind = "report"
        elif o.getTypeCode() == sd.SEDML_OUTPUT_PLOT2D:
            items = tuple((c.getId(), c.getXDataReference(), c.getYDataReference()) for c in o.getListOfCurves())
            names = tuple(c.getName() or c.getYDataReference() for c in o.getListOfCurves())
            kind = "plot2D"
            if any(c.getTypeCode() != sd.SEDML_OUTPUT_CURVE for c in o.getListOfCurves()):
                raise self.refuse("plot2D", oid, "only curves (no shaded areas) are supported")
        else:
            raise self.refuse(o.getElementName(), oid, "only report and plot2D outputs are supported")
        for item in items:
            for ref in item[2:] if kind == "report" else item[1:]:
                if self.doc.getDataGenerator(ref) is None:
                    raise self.refuse(kind, oid, f"data generator '{ref}' not found")
        return Output(oid, o.getName() or oid, kind, items, names)
