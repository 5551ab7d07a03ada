"""SBML import (Levels 2 and 3, python-libsbml) into a :class:`Network` the three engines run.

What is read: compartments (any size), species (amounts; ``initialConcentration`` times the
compartment size; a species without ``hasOnlySubstanceUnits`` stands for amount / size where it
appears in math), global and local parameters, initial assignments, assignment rules (inlined
where they are read; on species, recomputed where statistics are taken), reactions with whole
stoichiometry (a reversible one split into forward and backward where its law is
``forward - backward``), boundary and constant species (never changed by reactions), and events
without delay (triggers on species, or ``time >= T``; ``initialValue`` honoured; persistence has
no effect without delay). Kinetic laws are MathML walked into the text of the one expression
core (:func:`app.compute.codegen.parse`), so the whitelist decides what math runs; a law equal to
``c * prod C(x_s, m_s)`` (checked on random states) runs as mass action, anything else as a
general propensity printed to every engine.

Everything else is refused with the SBML element, its id and the reason (delays, algebraic and
rate rules, event priorities, functions outside the whitelist, packages, moles, non-integer
counts); a model with any refusal does not run, and :class:`SBMLModel` lists both what was
imported and what was refused for the panel's model table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from app.compute.codegen import FUNCTIONS, ExprError, Node, evaluate, names_used, parse
from app.sims.common.config import ConfigError
from app.sims.ssa.model import MAX_EVENTS, MAX_ORDER, Event, Network, binomial

SUFFIXES = (".xml", ".sbml")
COUNT_LIMIT = 2**30          # initial and assigned counts (the CUDA engine holds int32)
HARMLESS_PACKAGES = ("layout", "render")


@dataclass(frozen=True)
class Item:
    """One row of the model table: an SBML element, its id and what became of it."""

    element: str
    id: str
    detail: str


@dataclass(frozen=True)
class SBMLModel:
    """The result of reading a file: the network (None when anything was refused) and the table."""

    path: str
    name: str
    network: Network | None
    imported: tuple[Item, ...]
    refused: tuple[Item, ...]
    notes: tuple[str, ...] = ()

    def require_network(self) -> Network:
        if self.network is None:
            lines = "\n".join(f"  {r.element} '{r.id}': {r.detail}" for r in self.refused)
            raise ConfigError(f"{self.path}: the SBML model cannot run; refused:\n{lines}")
        return self.network


class _Refused(Exception):
    def __init__(self, element: str, id_: str, reason: str):
        super().__init__(reason)
        self.item = Item(element, id_, reason)


def is_sbml_path(path: str | Path) -> bool:
    return Path(path).suffix.lower() in SUFFIXES


def _libsbml():
    try:       # libSEDML first: loaded after libSBML it turns libSBML's math node types into pointers
        import libsedml  # noqa: F401
    except ImportError:
        pass
    try:
        import libsbml
    except ImportError as exc:
        raise ConfigError("reading SBML needs python-libsbml: pip install 'biogpu-studio[sbml]'") from exc
    return libsbml


_CACHE: dict[tuple[str, int, int], SBMLModel] = {}


def read_sbml(path: str | Path) -> SBMLModel:
    """Read an SBML file (cached by path, size and modification time)."""
    path = Path(path)
    try:
        stat = path.stat()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the SBML file ({exc.strerror})") from None
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _CACHE:
        libsbml = _libsbml()
        doc = libsbml.readSBMLFromFile(str(path))
        _CACHE[key] = _Importer(libsbml, doc, str(path)).run()
    return _CACHE[key]


def read_sbml_string(text: str, label: str = "<sbml>") -> SBMLModel:
    libsbml = _libsbml()
    return _Importer(libsbml, libsbml.readSBMLFromString(text), label).run()


def load_sbml_network(path: str | Path) -> Network:
    """The runnable network of an SBML file, or a ConfigError listing every refusal."""
    return read_sbml(path).require_network()


@dataclass
class _Species:
    id: str
    compartment: str
    amount_only: bool
    fixed: bool            # boundary or constant: reactions do not change it
    constant: bool


@dataclass
class _Context:
    """How names read in one piece of math: local parameters and whether time is allowed."""

    element: str
    id: str
    local: dict[str, float] = field(default_factory=dict)
    allow_time: bool = False


class _Importer:
    def __init__(self, libsbml, doc, label: str):
        self.sb, self.doc, self.label = libsbml, doc, label
        self.imported: list[Item] = []
        self.refused: list[Item] = []
        self.notes: list[str] = []

    # ---- entry ----------------------------------------------------------------------------
    def run(self) -> SBMLModel:
        sb, doc = self.sb, self.doc
        errors = [doc.getError(i) for i in range(doc.getNumErrors())
                  if doc.getError(i).getSeverity() >= sb.LIBSBML_SEV_ERROR]
        model = doc.getModel()
        if errors or model is None:
            message = errors[0].getMessage().strip() if errors else "no <model> element"
            raise ConfigError(f"{self.label}: not a readable SBML document: {message}")
        self.model = model
        name = model.getId() or model.getName() or Path(self.label).stem
        try:
            self._packages()
            self._expand_functions()
            network = self._network()
        except _Refused as exc:        # a refusal that leaves nothing to build on
            self.refused.append(exc.item)
            network = None
        if self.refused:
            network = None
        return SBMLModel(self.label, name, network, tuple(self.imported), tuple(self.refused),
                         tuple(self.notes))

    def refuse(self, element: str, id_: str, reason: str) -> None:
        self.refused.append(Item(element, id_, reason))

    def _packages(self) -> None:
        namespaces = self.doc.getSBMLNamespaces().getNamespaces()
        for i in range(namespaces.getLength()):
            parts = namespaces.getURI(i).split("/")
            if len(parts) >= 8 and parts[4].startswith("level3") and parts[6] not in ("core", ""):
                if parts[6] not in HARMLESS_PACKAGES:
                    self.refuse("package", parts[6], "SBML packages are not supported (core only)")

    def _expand_functions(self) -> None:
        if self.model.getNumFunctionDefinitions() == 0:
            return
        props = self.sb.ConversionProperties()
        props.addOption("expandFunctionDefinitions", True)
        if self.doc.convert(props) != self.sb.LIBSBML_OPERATION_SUCCESS:
            raise _Refused("functionDefinition", self.model.getFunctionDefinition(0).getId(),
                           "function definitions could not be expanded")
        self.model = self.doc.getModel()
        self.notes.append("function definitions expanded into the math that calls them")

    # ---- symbols --------------------------------------------------------------------------
    def _collect(self) -> None:
        m = self.model
        self.compartments = {m.getCompartment(i).getId(): m.getCompartment(i)
                             for i in range(m.getNumCompartments())}
        self.species: dict[str, _Species] = {}
        for i in range(m.getNumSpecies()):
            sp = m.getSpecies(i)
            self.species[sp.getId()] = _Species(sp.getId(), sp.getCompartment(),
                                                sp.getHasOnlySubstanceUnits(),
                                                sp.getBoundaryCondition() or sp.getConstant(),
                                                sp.getConstant())
        self.parameters = {m.getParameter(i).getId(): m.getParameter(i)
                           for i in range(m.getNumParameters())}
        self.assignment_rules: dict[str, object] = {}
        for i in range(m.getNumRules()):
            rule = m.getRule(i)
            var = rule.getVariable() if not rule.isAlgebraic() else ""
            if rule.isAlgebraic():
                self.refuse("algebraicRule", rule.getId() or f"#{i + 1}",
                            "algebraic rules need a DAE solver; the SSA has none")
            elif rule.isRate():
                self.refuse("rateRule", var, "rate rules change a value continuously; the SSA "
                            "only changes counts by reactions and events")
            elif var in self.compartments:
                self.refuse("assignmentRule", var, "compartment sizes must stay constant")
            elif var in self.species or var in self.parameters:
                self.assignment_rules[var] = rule
            else:
                self.refuse("assignmentRule", var, "assigns a symbol that is not a species or parameter")
        self.event_targets: set[str] = set()
        for i in range(m.getNumEvents()):
            ev = m.getEvent(i)
            for k in range(ev.getNumEventAssignments()):
                self.event_targets.add(ev.getEventAssignment(k).getVariable())
        self.reaction_ids = {m.getReaction(i).getId() for i in range(m.getNumReactions())}
        for sp in self.species.values():
            if sp.id in FUNCTIONS or sp.id == "time":
                self.refuse("species", sp.id, "its id is a function name of the expression core")
            cf = m.getSpecies(sp.id)
            if cf.isSetConversionFactor():
                self.refuse("species", sp.id, "conversion factors are not supported")
            self._check_substance(cf)
        if m.isSetConversionFactor():
            self.refuse("model", m.getId(), "conversion factors are not supported")

    def _check_substance(self, sp) -> None:
        unit = sp.getSubstanceUnits() or self.model.getSubstanceUnits() if self.model.getLevel() > 2 \
            else sp.getSubstanceUnits()
        if not unit:
            return
        kinds = {unit}
        ud = self.model.getUnitDefinition(unit)
        if ud is not None:
            kinds = {self.sb.UnitKind_toString(ud.getUnit(k).getKind()) for k in range(ud.getNumUnits())}
        if "mole" in kinds:
            self.refuse("species", sp.getId(), f"substance units '{unit}' are moles; the SSA counts "
                        "molecules: declare substanceUnits 'item' (or dimensionless) with counts")

    # ---- math -----------------------------------------------------------------------------
    def _text(self, node, ctx: _Context, depth: int = 0) -> str:
        """Expression-core text of a MathML ASTNode (names: species ids, as amounts)."""
        sb = self.sb
        if node is None:
            raise _Refused(ctx.element, ctx.id, "missing math")
        if depth > 200:
            raise _Refused(ctx.element, ctx.id, "math nested too deeply")
        t = node.getType()
        kids = [node.getChild(i) for i in range(node.getNumChildren())]
        sub = [lambda k=k: self._text(k, ctx, depth + 1) for k in kids]
        if t == sb.AST_INTEGER:
            return repr(float(node.getInteger()))
        if t in (sb.AST_REAL, sb.AST_REAL_E, sb.AST_RATIONAL):
            value = node.getReal()
            if not math.isfinite(value):
                raise _Refused(ctx.element, ctx.id, f"non-finite number {value}")
            return repr(float(value))
        if t == sb.AST_CONSTANT_E:
            return repr(math.e)
        if t == sb.AST_CONSTANT_PI:
            return repr(math.pi)
        if t in (sb.AST_CONSTANT_TRUE, sb.AST_CONSTANT_FALSE):
            return "1.0" if t == sb.AST_CONSTANT_TRUE else "0.0"
        if t == sb.AST_NAME:
            return self._symbol(node.getName(), ctx, depth)
        if t == sb.AST_NAME_TIME:
            if not ctx.allow_time:
                why = ("propensities must not change between reactions (the SSA's waiting times "
                       "assume that)" if ctx.element == "reaction" else
                       "time may only appear in a trigger 'time >= constant'")
                raise _Refused(ctx.element, ctx.id, f"reads time: {why}")
            return "time"
        if t == sb.AST_PLUS:
            return "(" + " + ".join(f() for f in sub) + ")" if sub else "0.0"
        if t == sb.AST_TIMES:
            return "(" + " * ".join(f() for f in sub) + ")" if sub else "1.0"
        if t == sb.AST_MINUS:
            return f"(-{sub[0]()})" if len(sub) == 1 else f"({sub[0]()} - {sub[1]()})"
        if t == sb.AST_DIVIDE:
            return f"({sub[0]()} / {sub[1]()})"
        if t in (sb.AST_POWER, sb.AST_FUNCTION_POWER):
            return f"pow({sub[0]()}, {sub[1]()})"
        simple = {sb.AST_FUNCTION_EXP: "exp", sb.AST_FUNCTION_LN: "log", sb.AST_FUNCTION_ABS: "abs"}
        if t in simple:
            return f"{simple[t]}({sub[0]()})"
        if t == sb.AST_FUNCTION_LOG:
            base = sub[0]() if len(sub) == 2 else "10.0"
            return f"(log({sub[-1]()}) / log({base}))"
        if t == sb.AST_FUNCTION_ROOT:
            return f"sqrt({sub[-1]()})" if len(sub) == 1 or kids[0].getValue() == 2 \
                else f"pow({sub[1]()}, (1.0 / {sub[0]()}))"
        if t in (sb.AST_FUNCTION_MIN, sb.AST_FUNCTION_MAX):
            name = "min" if t == sb.AST_FUNCTION_MIN else "max"
            out = sub[0]()
            for f in sub[1:]:
                out = f"{name}({out}, {f()})"
            return out
        if t == sb.AST_FUNCTION_PIECEWISE:
            if len(kids) % 2 == 0:
                raise _Refused(ctx.element, ctx.id, "piecewise without <otherwise> (undefined "
                               "where no piece holds)")
            out = sub[-1]()
            for k in range(len(kids) // 2 - 1, -1, -1):
                out = f"where({self._condition(kids[2 * k + 1], ctx, depth + 1)}, {sub[2 * k]()}, {out})"
            return out
        if self._is_boolean(node):
            return self._indicator(node, ctx, depth)
        name = node.getName() or sb.formulaToL3String(node)
        raise _Refused(ctx.element, ctx.id, f"'{name}' is not supported (allowed: + - * / power, "
                       "exp, ln, log, root, abs, min, max, piecewise, relations and logic)")

    def _is_boolean(self, node) -> bool:
        return node.isRelational() or node.isLogical() or node.getType() in (
            self.sb.AST_CONSTANT_TRUE, self.sb.AST_CONSTANT_FALSE)

    _RELATIONS = {"AST_RELATIONAL_EQ": "==", "AST_RELATIONAL_GEQ": ">=", "AST_RELATIONAL_GT": ">",
                  "AST_RELATIONAL_LEQ": "<=", "AST_RELATIONAL_LT": "<"}

    def _relation(self, node) -> str | None:
        for attr, op in self._RELATIONS.items():
            if node.getType() == getattr(self.sb, attr):
                return op
        return None

    def _condition(self, node, ctx: _Context, depth: int) -> str:
        """A comparison text for where(): ``a OP b``, or ``indicator > 0.5``."""
        op = self._relation(node)
        if op is not None and node.getNumChildren() == 2:
            return f"{self._text(node.getChild(0), ctx, depth + 1)} {op} {self._text(node.getChild(1), ctx, depth + 1)}"
        return f"{self._indicator(node, ctx, depth)} > 0.5"

    def _indicator(self, node, ctx: _Context, depth: int) -> str:
        """Text worth 1.0 where the boolean ``node`` holds and 0.0 elsewhere."""
        sb = self.sb
        t = node.getType()
        kids = [node.getChild(i) for i in range(node.getNumChildren())]
        if t in (sb.AST_CONSTANT_TRUE, sb.AST_CONSTANT_FALSE):
            return "1.0" if t == sb.AST_CONSTANT_TRUE else "0.0"
        op = self._relation(node)
        if op is not None or t == sb.AST_RELATIONAL_NEQ:
            parts = []
            for a, b in zip(kids, kids[1:]):
                pair = f"{self._text(a, ctx, depth + 1)} {op or '=='} {self._text(b, ctx, depth + 1)}"
                parts.append(f"where({pair}, 1.0, 0.0)" if op else f"where({pair}, 0.0, 1.0)")
            return self._fold("min", parts)
        inner = [self._indicator(k, ctx, depth + 1) if self._is_boolean(k)
                 else self._refuse_bool(ctx) for k in kids]
        if t == sb.AST_LOGICAL_AND:
            return self._fold("min", inner)
        if t == sb.AST_LOGICAL_OR:
            return self._fold("max", inner)
        if t == sb.AST_LOGICAL_NOT:
            return f"(1.0 - {inner[0]})"
        if t == sb.AST_LOGICAL_XOR:
            out = inner[0]
            for k in inner[1:]:
                out = f"abs({out} - {k})"
            return out
        raise _Refused(ctx.element, ctx.id, f"logical operator '{node.getName()}' is not supported")

    @staticmethod
    def _fold(func: str, parts: list[str]) -> str:
        out = parts[0] if parts else "1.0"
        for p in parts[1:]:
            out = f"{func}({out}, {p})"
        return out

    def _refuse_bool(self, ctx: _Context) -> str:
        raise _Refused(ctx.element, ctx.id, "a number where a condition was expected")

    def _symbol(self, name: str, ctx: _Context, depth: int) -> str:
        if name in ctx.local:
            return repr(ctx.local[name])
        if name in self.rule_stack:
            raise _Refused("assignmentRule", name, "assignment rules that depend on themselves")
        if name in self.assignment_rules:
            self.rule_stack.append(name)
            try:
                inner = self._text(self.assignment_rules[name].getMath(), ctx, depth + 1)
            finally:
                self.rule_stack.pop()
            return f"({inner})"
        if name in self.species:
            sp = self.species[name]
            if sp.amount_only:
                return name
            return f"({name} / {self._size(sp.compartment, ctx)!r})"
        if name in self.compartments:
            return repr(self._size(name, ctx))
        if name in self.parameters:
            if name in self.event_targets:
                raise _Refused(ctx.element, ctx.id, f"reads parameter '{name}', which an event "
                               "changes (only species may be event targets)")
            if name not in self.values:
                raise _Refused("parameter", name, "no value")
            return repr(self.values[name])
        if name in self.reaction_ids:
            raise _Refused(ctx.element, ctx.id, f"reads the rate of reaction '{name}'")
        raise _Refused(ctx.element, ctx.id, f"reads '{name}', which is not a species, "
                       "compartment or parameter")

    def _size(self, compartment: str, ctx: _Context) -> float:
        size = self.values.get(compartment)
        if size is None or not math.isfinite(size) or size <= 0:
            raise _Refused(ctx.element, ctx.id, f"needs the size of compartment '{compartment}', "
                           "which is not set (or not positive)")
        return size

    def _tree(self, text: str, ctx: _Context, extra: set[str] = frozenset()) -> Node:
        try:
            return parse(text, set(self.species) | set(extra))
        except ExprError as exc:
            raise _Refused(ctx.element, ctx.id, f"math the expression core refuses: {exc}") from None

    # ---- initial values -------------------------------------------------------------------
    def _initial_values(self) -> None:
        """Sizes, parameter values and species amounts at t = 0 (initial assignments and
        assignment rules applied until they settle)."""
        m = self.model
        self.values: dict[str, float] = {}
        for cid, c in self.compartments.items():
            if c.isSetSize():
                self.values[cid] = c.getSize()
            if not c.getConstant() and cid in self.event_targets:
                self.refuse("compartment", cid, "an event changes its size")
        for pid, p in self.parameters.items():
            if p.isSetValue():
                self.values[pid] = p.getValue()
        conc: dict[str, float] = {}
        for sid in self.species:
            sp = m.getSpecies(sid)
            if sp.isSetInitialAmount():
                self.values[sid] = sp.getInitialAmount()
            elif sp.isSetInitialConcentration():
                conc[sid] = sp.getInitialConcentration()
        every = set(self.values) | set(self.compartments) | set(self.parameters) | set(self.species)
        targets = [(m.getInitialAssignment(i).getSymbol(), m.getInitialAssignment(i).getMath(),
                    "initialAssignment") for i in range(m.getNumInitialAssignments())]
        targets += [(var, rule.getMath(), "assignmentRule") for var, rule in self.assignment_rules.items()]
        for _ in range(len(targets) + 2):
            for sid, c in conc.items():
                if self.compartments[self.species[sid].compartment].getId() in self.values:
                    self.values[sid] = c * self.values[self.species[sid].compartment]
            for var, math_, element in targets:
                value = self._evaluate_initial(math_, element, var, every)
                if value is None:
                    continue
                if var in self.species and not self.species[var].amount_only:
                    size = self.values.get(self.species[var].compartment)
                    if size is None:
                        continue
                    value *= size
                self.values[var] = value
                conc.pop(var, None)

    def _evaluate_initial(self, math_, element: str, var: str, every: set[str]) -> float | None:
        """The value of ``math_`` from the values known so far (None while some are missing)."""
        text = self._raw_text(math_, _Context(element, var, allow_time=True))
        tree = self._tree(text, _Context(element, var), every | {"time"})
        env = {"time": np.float64(0.0)}
        for name in names_used(tree):
            if name == "time":
                continue
            if name not in self.values:
                return None
            value = self.values[name]
            if name in self.species and not self.species[name].amount_only:
                size = self.values.get(self.species[name].compartment)
                if size is None:
                    return None
                value /= size
            env[name] = np.float64(value)
        return float(evaluate(tree, env))

    def _raw_text(self, math_, ctx: _Context) -> str:
        """Math text where every symbol stays a name (for the initial values)."""
        symbol = self._symbol
        self._symbol = lambda name, ctx_, depth: name   # type: ignore[method-assign]
        try:
            return self._text(math_, ctx)
        finally:
            self._symbol = symbol                        # type: ignore[method-assign]

    # ---- the network ----------------------------------------------------------------------
    def _network(self) -> Network:
        m = self.model
        self.rule_stack: list[str] = []
        self._collect()
        self._initial_values()
        names = list(self.species)
        if not names:
            raise _Refused("model", m.getId(), "no species")
        index = {n: i for i, n in enumerate(names)}
        x0 = np.zeros(len(names), np.int64)
        for sid in names:
            value = self.values.get(sid)
            if value is None:
                self.refuse("species", sid, "no initial amount, concentration or assignment")
                continue
            if not math.isfinite(value) or value < 0 or abs(value - round(value)) > 1e-9 * max(1.0, abs(value)):
                self.refuse("species", sid, f"initial amount {value:g} is not a whole number of "
                            "molecules (>= 0)")
                continue
            if value > COUNT_LIMIT:
                self.refuse("species", sid, f"initial amount {value:g} is above {COUNT_LIMIT} "
                            "(the CUDA engine keeps 32-bit counts)")
                continue
            x0[index[sid]] = round(value)
            sp = self.species[sid]
            flags = [k for k, v in (("boundary", m.getSpecies(sid).getBoundaryCondition()),
                                    ("constant", sp.constant), ("concentration", not sp.amount_only)) if v]
            self.imported.append(Item("species", sid, f"{int(x0[index[sid]])} molecules"
                                      + (f" ({', '.join(flags)})" if flags else "")))
        for pid in self.parameters:
            if pid in self.assignment_rules:
                continue
            self.imported.append(Item("parameter", pid, f"{self.values.get(pid, float('nan')):g}"))
        rates, orders, changes, laws, labels = [], [], [], [], []
        for i in range(m.getNumReactions()):
            try:
                for part in self._reaction(m.getReaction(i), index):
                    label, rate, order, change, law, detail = part
                    rates.append(rate)
                    orders.append(order)
                    changes.append(change)
                    laws.append(law)
                    labels.append(label)
                    self.imported.append(Item("reaction", label, detail))
            except _Refused as exc:
                self.refused.append(exc.item)
        derived = []
        for var in self.assignment_rules:
            if var in self.species:
                sp = self.species[var]
                ctx = _Context("assignmentRule", var)
                try:
                    text = self._symbol(var, ctx, 0)
                    if not sp.amount_only:
                        text = f"({text} * {self._size(sp.compartment, ctx)!r})"
                    derived.append((index[var], self._tree(text, ctx)))
                    self.imported.append(Item("assignmentRule", var, "species recomputed from "
                                              "the others"))
                except _Refused as exc:
                    self.refused.append(exc.item)
            else:
                self.imported.append(Item("assignmentRule", var, "parameter, inlined where read"))
        if any(changes[j][s] for j in range(len(changes)) for s, _ in derived):
            self.refuse("assignmentRule", names[derived[0][0]], "a species set by a rule is "
                        "also changed by reactions")
        events = self._events(index)
        if not labels:
            self.refuse("model", m.getId(), "no reactions")
        if self.refused:
            return None
        laws_t = tuple(laws)
        net = Network(tuple(names), x0, np.array(rates, np.float64),
                      np.array(orders, np.int64).reshape(len(labels), len(names)),
                      np.array(changes, np.int64).reshape(len(labels), len(names)), tuple(labels),
                      laws=laws_t if any(l is not None for l in laws_t) else None,
                      derived=tuple(derived), events=tuple(events))
        return _settle(net)

    def _reaction(self, r, index: dict[str, int]):
        """(label, rate, order row, change row, law or None, detail) per SSA reaction of ``r``."""
        rid = r.getId()
        if r.isSetFast() and r.getFast():
            raise _Refused("reaction", rid, "fast reactions (an equilibrium assumption) are not supported")
        law = r.getKineticLaw()
        if law is None or law.getMath() is None:
            raise _Refused("reaction", rid, "no kinetic law")
        local = {}
        for k in range(law.getNumParameters()):
            p = law.getParameter(k)
            local[p.getId()] = p.getValue()
        for k in range(law.getNumLocalParameters()) if hasattr(law, "getNumLocalParameters") else ():
            p = law.getLocalParameter(k)
            local[p.getId()] = p.getValue()
        ctx = _Context("reaction", rid, local)
        change = np.zeros(len(index), np.int64)
        for side, sign in ((r.getListOfReactants(), -1), (r.getListOfProducts(), 1)):
            for k in range(side.size()):
                ref = side.get(k)
                change[index[ref.getSpecies()]] += sign * self._stoichiometry(ref, rid)
        for sid, sp in self.species.items():
            if sp.fixed:
                change[index[sid]] = 0
        math_ = law.getMath()
        parts = [(rid, math_, change)]
        if r.getReversible():
            if math_.getType() != self.sb.AST_MINUS or math_.getNumChildren() != 2:
                raise _Refused("reaction", rid, "reversible, and its kinetic law is not "
                               "'forward - backward' (so it cannot be split into two reactions)")
            parts = [(f"{rid}_fwd", math_.getChild(0), change), (f"{rid}_rev", math_.getChild(1), -change)]
        for label, node, delta in parts:
            tree = self._tree(self._text(node, ctx), ctx)
            found = _mass_action(tree, index)
            if found is not None and any(found[1][s] < -delta[s] for s in np.flatnonzero(delta < 0)):
                found = None    # of lower order than it consumes (a constant rate): guarded below
            if found is not None:
                rate, order = found
                terms = ", ".join(f"{s}^{o}" for s, o in zip(index, order) if o)
                yield label, rate, order, delta, None, f"mass action c = {rate:.6g}" + (f" ({terms})" if terms else "")
            else:
                names = list(index)
                needs = ", ".join(f"{names[s]} >= {-int(delta[s])}" for s in np.flatnonzero(delta < 0))
                guard = f"; fires only while {needs} (guarded: the law need not vanish there)" if needs else ""
                yield (label, 1.0, np.zeros(len(index), np.int64), delta, tree,
                       f"general law {node_text(self.sb, node)}{guard}")

    def _stoichiometry(self, ref, rid: str) -> int:
        if ref.isSetId() and ref.getId() and (ref.getId() in self.assignment_rules or ref.getId() in self.event_targets
                                              or self.model.getInitialAssignment(ref.getId()) is not None):
            raise _Refused("speciesReference", ref.getId(), "variable stoichiometry is not supported")
        if hasattr(ref, "isSetStoichiometryMath") and ref.isSetStoichiometryMath():
            raise _Refused("reaction", rid, "stoichiometryMath is not supported")
        if self.model.getLevel() > 2 and not ref.isSetStoichiometry():
            raise _Refused("reaction", rid, f"the stoichiometry of {ref.getSpecies()} is not set")
        value = ref.getStoichiometry()
        if not math.isfinite(value) or value != round(value) or value < 0:
            raise _Refused("reaction", rid, f"stoichiometry {value:g} of {ref.getSpecies()} is not "
                           "a whole number")
        return int(value)

    def _events(self, index: dict[str, int]) -> list[Event]:
        m = self.model
        out: list[Event] = []
        for i in range(m.getNumEvents()):
            ev = m.getEvent(i)
            eid = ev.getId() or f"event{i + 1}"
            try:
                out.append(self._event(ev, eid, index))
                self.imported.append(Item("event", eid, _event_detail(out[-1])))
            except _Refused as exc:
                self.refused.append(exc.item)
        if len(out) > MAX_EVENTS:
            self.refuse("model", m.getId(), f"{len(out)} events; at most {MAX_EVENTS}")
        return out

    def _event(self, ev, eid: str, index: dict[str, int]) -> Event:
        if ev.isSetDelay():
            raise _Refused("event", eid, "events with a delay are not supported")
        if ev.isSetPriority():
            raise _Refused("event", eid, "event priorities are not supported (events fire in "
                           "document order)")
        trig = ev.getTrigger()
        if trig is None or trig.getMath() is None:
            raise _Refused("event", eid, "no trigger")
        initial_value = trig.getInitialValue() if trig.isSetInitialValue() else True
        assignments = []
        for k in range(ev.getNumEventAssignments()):
            ea = ev.getEventAssignment(k)
            var = ea.getVariable()
            if var not in self.species:
                raise _Refused("eventAssignment", var, f"event '{eid}' assigns a non-species "
                               "(only species counts may change)")
            if self.species[var].constant:
                raise _Refused("eventAssignment", var, "assigns a constant species")
            ctx = _Context("eventAssignment", var)
            text = self._text(ea.getMath(), ctx)
            if not self.species[var].amount_only:
                text = f"({text} * {self._size(self.species[var].compartment, ctx)!r})"
            assignments.append((index[var], self._tree(text, ctx)))
        node = trig.getMath()
        at = self._time_trigger(node, eid)
        if at is not None:
            time, rising = at
            if rising:
                return Event(eid, tuple(assignments), time=time, initial_value=initial_value)
            # time < T holds from the start and never again after T: it can fire only at t = 0
            return Event(eid, tuple(assignments), trigger=parse("1.0", set()), initial_value=initial_value)
        ctx = _Context("event", eid)
        if not self._is_boolean(node):
            self._refuse_bool(ctx)
        return Event(eid, tuple(assignments), trigger=self._tree(self._indicator(node, ctx, 0), ctx),
                     initial_value=initial_value)

    def _time_trigger(self, node, eid: str) -> tuple[float, bool] | None:
        """(T, rising) for a trigger ``time >= T`` (rising) or ``time < T`` (falling)."""
        sb = self.sb
        op = self._relation(node)
        if op is None or node.getNumChildren() != 2:
            if _mentions_time(sb, node):
                raise _Refused("event", eid, "a trigger must be a condition on species, or one "
                               "comparison of time with a constant")
            return None
        a, b = node.getChild(0), node.getChild(1)
        if a.getType() != sb.AST_NAME_TIME and b.getType() != sb.AST_NAME_TIME:
            if _mentions_time(sb, node):
                raise _Refused("event", eid, "a trigger must compare time itself with a constant")
            return None
        time_left = a.getType() == sb.AST_NAME_TIME
        other = b if time_left else a
        ctx = _Context("event", eid)
        if _mentions_time(sb, other):
            raise _Refused("event", eid, "a trigger must compare time with a constant")
        tree = self._tree(self._text(other, ctx), ctx)
        if names_used(tree):
            raise _Refused("event", eid, "a time trigger must compare time with a constant, "
                           f"not with species ({', '.join(sorted(names_used(tree)))})")
        value = float(evaluate(tree, {}))
        flipped = {">=": "<=", ">": "<", "<=": ">=", "<": ">", "==": "=="}
        op = op if time_left else flipped[op]
        return value, op in (">=", ">", "==")


def _mentions_time(sb, node) -> bool:
    if node.getType() == sb.AST_NAME_TIME:
        return True
    return any(_mentions_time(sb, node.getChild(i)) for i in range(node.getNumChildren()))


def node_text(sb, node) -> str:
    return sb.formulaToL3String(node)


def _event_detail(event: Event) -> str:
    when = f"at t = {event.time:g}" if event.time is not None else "when its trigger turns true"
    return f"{when}, sets {len(event.assignments)} species"


def _settle(net: Network) -> Network:
    """Fire the events due at t = 0 on the initial state; record every trigger's value."""
    from dataclasses import replace

    from app.sims.ssa import events as ev

    if not net.events:
        return net
    x = net.x0[None, :].copy()
    bits = np.zeros(1, np.uint32)
    for e, event in enumerate(net.events):
        initial = event.initial_value and (event.time is None or event.time <= 0)
        if initial:
            bits[0] |= np.uint32(1 << e)
    due = ev.next_event_time(ev.event_times(net), bits)
    if due[0] <= 0:
        ev.time_events(net, ev.event_times(net), x, bits, np.zeros(1))
    else:
        ev.species_events(net, x, bits)
    state0 = tuple(bool(bits[0] >> e & 1) for e in range(len(net.events)))
    # events only needed at t = 0 (falling time triggers) never fire later: keep their bit set
    return replace(net, x0=x[0], event_state0=state0)


def _mass_action(tree: Node, index: dict[str, int]) -> tuple[float, np.ndarray] | None:
    """(c, orders) when ``tree`` equals ``c * prod_s C(x_s, m_s)`` on random states, else None."""
    used = sorted(names_used(tree))
    if any(n not in index for n in used):
        return None
    rng = np.random.default_rng(12345)
    order = np.zeros(len(index), np.int64)
    candidates = [()]
    for _ in used:
        candidates = [c + (m,) for c in candidates for m in (1, 2, 3)]
    for combo in candidates:
        if sum(combo) > MAX_ORDER:
            continue
        points = [{n: rng.integers(m, m + 60, 8).astype(np.float64) for n, m in zip(used, combo)}]
        for k, n in enumerate(used):     # the law must vanish where C(x, m) does
            low = {u: rng.integers(m, m + 60, 8).astype(np.float64) for u, m in zip(used, combo)}
            low[n] = np.full(8, combo[k] - 1.0)
            points.append(low)
        law = [np.broadcast_to(evaluate(tree, p), (8,)) for p in points]
        ma = [np.prod([binomial(p[n], m) for n, m in zip(used, combo)], axis=0) if used
              else np.ones(8) for p in points]
        if not all(np.all(np.isfinite(v)) for v in law):
            continue
        c = law[0][0] / ma[0][0]
        if not math.isfinite(c) or c < 0:
            continue
        if all(np.allclose(l, c * a, rtol=1e-9, atol=1e-12 * max(abs(c), 1e-300)) for l, a in zip(law, ma)):
            for n, m in zip(used, combo):
                order[index[n]] = m
            return float(c), order
    return None
