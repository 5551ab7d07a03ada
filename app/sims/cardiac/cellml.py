"""CellML import: a CellML 1.0/1.1/2.0 file in, a :class:`~app.sims.cardiac.model.CellModel` out.

Myokit's CellML importer (``myokit.formats.cellml``) reads the file, flattens the components,
resolves the connections and converts units (``Variable.convert_unit``): time to ms, the
membrane voltage to mV. What this module adds:

* **oxmeta annotations**, read from every ``rdf:Description`` in the file (in most Chaste files
  the RDF sits inside each annotated variable, which Myokit does not read): the membrane
  voltage, time, the stimulus current and its amplitude/duration/period/offset, and the
  annotated constants that become the model's editable parameters. Without annotations the
  voltage is the state named ``V``/``Vm``/``v`` and the stimulus a variable named like
  ``i_stim``; the caller may name either explicitly (``voltage=``, ``stimulus=``).
* **the stimulus**, replaced by the engines' input ``i_st`` in µA/µF (= pA/pF = mV/ms),
  negative depolarising (the CellML sign of CRN). The model's stimulus variable becomes
  ``i_st·s`` with ``s`` chosen so that ``∂(dV/dt)/∂i_st = −1`` exactly: dV/dt is linear in the
  stimulus, ``s = −1/k`` with ``k = ∂(dV/dt)/∂I_stim`` measured at the initial state (−1/Cm for
  a current in pA with Cm in pF, 1/Cm for a current per area in the other sign, ...). The
  model's own handling of the stimulus (e.g. also in d[K]i/dt) is kept. A model without a
  stimulus variable gets ``−i_st`` added to dV/dt.
* **the expression tree** of :mod:`app.compute.codegen`, in calculation order, constants folded
  in float64, small integer powers as products;
* **Rush–Larsen gates**, found symbolically: a state whose derivative, with the variables that
  depend on the state substituted in, is ``a·x + b`` with ``a`` and ``b`` free of ``x`` and
  ``a`` not identically 0. Its outputs are ``a`` and ``b``; the other states' outputs are their
  derivatives. Gates whose ``a`` or ``b`` reads another state than V (a Markov chain's states,
  buffers, Ca-dependent gates) come first in the gate block and are counted (``n_coupled``):
  adaptive methods step them by the tableau, because Rush–Larsen's error on them is invisible
  to an embedded estimate. Among them, the Markov chains (sets of gates affine in each other)
  are found (``chains``; :mod:`app.sims.cardiac.markov`): GRL1 steps each chain together.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from app.compute.codegen import Binary, Call, Compare, Name, Node, Num, Unary, evaluate, names_used
from app.sims.cardiac.markov import find_chains

OXMETA = "https://chaste.comlab.ox.ac.uk/cellml/ns/oxford-metadata#"
RDF = "{http://www.w3.org/1999/02/22-rdf-syntax-ns#}"
CMETA = "{http://www.cellml.org/metadata/1.0#}id"
STIMULUS_TERMS = ("membrane_stimulus_current",)
STIMULUS_SETTINGS = {"membrane_stimulus_current_amplitude": "amplitude",
                     "membrane_stimulus_current_duration": "duration",
                     "membrane_stimulus_current_period": "period",
                     "membrane_stimulus_current_offset": "start"}
VOLTAGE_NAMES = ("V", "Vm", "v", "V_m", "E", "u")
# not i_st: the sustained inward current of sinoatrial models (Kurata 2002, Maltsev 2009)
STIMULUS_NAMES = re.compile(r"^i_?stim(ulus)?$|^istim$", re.IGNORECASE)
MAX_FILE_BYTES = 20 * 1024 * 1024
I_ST = "i_st"


class CellMLImportError(ValueError):
    """A CellML file that cannot be used, naming the file and the problem."""


@dataclass(frozen=True)
class Parameter:
    name: str            # identifier in the trees
    qname: str           # CellML component.variable
    default: float
    unit: str
    annotation: str      # oxmeta term ('' if none)


@dataclass(frozen=True)
class Equation:
    name: str
    tree: Node


@dataclass(frozen=True)
class ImportedModel:
    """What :func:`import_cellml` returns; :class:`CellModel` wraps it with the printers."""

    name: str
    source: str
    states: tuple[str, ...]          # identifiers: non-gating (V first), then gates (coupled first)
    state_qnames: tuple[str, ...]
    state_units: tuple[str, ...]
    n_gates: int
    n_coupled: int                   # the first gates: rates read another state than V (:func:`_coupled`)
    initial: tuple[float, ...]
    parameters: tuple[Parameter, ...]
    equations: tuple[Equation, ...]  # calculation order; outputs last
    outputs: tuple[str, ...]         # dy/dt of the non-gating states, then a's, then b's
    stimulus_scale: float            # model stimulus = i_st * stimulus_scale
    default_stimulus: dict           # in ms and µA/µF (our sign), from the annotations
    annotations: dict                # oxmeta term -> qname
    chains: tuple[tuple[str, ...], ...] = ()   # Markov chains among the gates (app.sims.cardiac.markov)


def _annotations(path: Path) -> dict[tuple[str, str], str]:
    """(component, variable) -> oxmeta term, from every RDF description in the file."""
    from lxml import etree

    parser = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False)
    root = etree.parse(str(path), parser).getroot()
    by_id: dict[str, tuple[str, str]] = {}
    for comp in root.iter():
        if not isinstance(comp.tag, str) or etree.QName(comp).localname != "component":
            continue
        for var in comp:
            if isinstance(var.tag, str) and etree.QName(var).localname == "variable" and var.get(CMETA):
                by_id[var.get(CMETA)] = (comp.get("name"), var.get("name"))
    out = {}
    for desc in root.iter(f"{RDF}Description"):
        target = by_id.get((desc.get(f"{RDF}about") or "").lstrip("#"))
        if target is None:
            continue
        for item in desc.iter():
            res = item.get(f"{RDF}resource") if isinstance(item.tag, str) else None
            if res and res.startswith(OXMETA) and etree.QName(item).localname == "is":
                out.setdefault(target, res[len(OXMETA):])
    return out


def _load_myokit(path: Path):
    try:
        import myokit
        import myokit.formats.cellml as mcellml
    except ImportError:  # pragma: no cover - a core dependency
        raise CellMLImportError("CellML import needs Myokit: pip install myokit") from None
    if not path.is_file():
        raise CellMLImportError(f"{path}: no such CellML file")
    if path.stat().st_size > MAX_FILE_BYTES:
        raise CellMLImportError(f"{path}: larger than {MAX_FILE_BYTES // 2**20} MiB")
    if b"<!ENTITY" in path.read_bytes():
        raise CellMLImportError(f"{path}: XML entity declarations are refused")
    try:
        return myokit, mcellml.CellMLImporter().model(str(path))
    except Exception as exc:     # Myokit raises its own error types; name the file
        raise CellMLImportError(f"{path}: not an importable CellML file: {exc}") from None


def _find(model, annotated: dict, term: str, fallback, what: str, path: Path, given: str | None):
    if given:
        try:
            return model.get(given)
        except Exception:
            raise CellMLImportError(f"{path}: no variable '{given}' for the {what}") from None
    for (comp, var), t in annotated.items():
        if t == term:
            try:
                return model.get(f"{comp}.{var}")
            except Exception:
                continue
    return fallback()


def import_cellml(path: str | Path, voltage: str | None = None, stimulus: str | None = None,
                  extra_parameters: tuple[str, ...] = ()) -> ImportedModel:
    """Import ``path``; ``voltage``/``stimulus`` (``component.variable``) override the search;
    ``extra_parameters`` names constants to keep editable besides the annotated ones."""
    path = Path(path)
    myokit, m = _load_myokit(path)
    annotated = _annotations(path)

    def voltage_by_name():
        for st in m.states():
            if st.name() in VOLTAGE_NAMES:
                return st
        raise CellMLImportError(f"{path}: cannot find the membrane voltage: no oxmeta "
                                f"'membrane_voltage' annotation and no state named "
                                f"{'/'.join(VOLTAGE_NAMES)}; name it (model.voltage: component.variable)")

    def stimulus_by_name():
        found = [v for v in m.variables(deep=True) if STIMULUS_NAMES.match(v.name()) and not v.is_state()]
        return found[0] if len(found) == 1 else None

    V = _find(m, annotated, "membrane_voltage", voltage_by_name, "membrane voltage", path, voltage)
    if not V.is_state():
        raise CellMLImportError(f"{path}: the membrane voltage {V.qname()} is not a state")
    stim = _find(m, annotated, "membrane_stimulus_current", stimulus_by_name, "stimulus current", path, stimulus)
    time = m.time()
    try:
        time.convert_unit("ms")
        V.convert_unit("mV")
    except Exception as exc:
        raise CellMLImportError(f"{path}: cannot convert time to ms or V to mV: {exc}") from None
    stim_settings = _stimulus_settings(myokit, m, annotated)
    return _build(myokit, m, path, V, stim, time, annotated, stim_settings, extra_parameters)


def _stimulus_settings(myokit, m, annotated) -> dict:
    """The annotated stimulus amplitude (model units), duration/period/start (ms)."""
    out = {}
    for (comp, var), term in annotated.items():
        key = STIMULUS_SETTINGS.get(term)
        if key is None:
            continue
        try:
            v = m.get(f"{comp}.{var}")
            if key != "amplitude":
                v.convert_unit("ms")
            out[key] = float(v.eval())
        except Exception:
            continue
    return out


class _Names:
    """Unique identifiers for CellML variables (``component_variable``)."""

    def __init__(self):
        self.by_var: dict = {}
        self.used: set[str] = {I_ST}

    def __call__(self, var) -> str:
        key = var.qname()
        if key not in self.by_var:
            base = re.sub(r"[^A-Za-z0-9_]", "_", key.replace(".", "_"))
            name, k = base, 2
            while name in self.used:
                name, k = f"{base}_{k}", k + 1
            self.used.add(name)
            self.by_var[key] = name
        return self.by_var[key]


def _build(myokit, m, path, V, stim, time, annotated, stim_settings, extra=()) -> ImportedModel:
    names = _Names()
    deriv = {}                           # state qname -> name of its derivative equation
    for st in m.states():
        deriv[st.qname()] = "d_" + names(st)
    convert = _Converter(myokit, names, deriv, path)
    equations: dict[str, Node] = {}
    qname_of: dict[str, str] = {}
    literal: dict[str, float] = {}
    time_name = names(time)
    needed = _needed_variables(m, stim)
    for var in m.variables(deep=True):
        if var is time or var.qname() not in needed:
            continue
        rhs = var.rhs()
        if rhs is None:
            raise CellMLImportError(f"{path}: {var.qname()} has no equation")
        target = deriv[var.qname()] if var.is_state() else names(var)
        qname_of[names(var)] = var.qname()
        if stim is not None and var is stim:
            equations[target] = Name("__stimulus__")
            continue
        equations[target] = convert(rhs, var.qname())
        if var.is_literal() and not var.is_state():
            try:
                value = float(rhs.eval())
            except Exception:               # Myokit's NumericalError, ZeroDivisionError
                value = math.nan
            if not math.isfinite(value):
                raise CellMLImportError(f"{path}: the constant {var.qname()} = {rhs.code()} is not a "
                                        "finite number (a division by zero or another undefined "
                                        "operation)")
            literal[target] = value
    # parameters: annotated literal constants that are not about the stimulus or time
    skip = set(STIMULUS_SETTINGS) | {"membrane_stimulus_current", "membrane_stimulus_current_end", "time",
                                     "membrane_voltage"}
    params = []
    for (comp, var_name), term in sorted(annotated.items(), key=lambda kv: kv[1]):
        qn = f"{comp}.{var_name}"
        try:
            var = m.get(qn)
        except Exception:
            continue
        if (term in skip or var.is_state() or not var.is_literal() or names(var) not in equations
                or names(var) not in literal):        # a constant stimulus variable is replaced
            continue
        params.append(Parameter(names(var), qn, literal[names(var)], str(var.unit() or ""), term))
    for qn in extra:
        try:
            var = m.get(qn)
        except Exception:
            raise CellMLImportError(f"{path}: no variable '{qn}' (parameters are component.variable)") from None
        if var.is_state() or not var.is_literal():
            raise CellMLImportError(f"{path}: '{qn}' is not a constant: only constants can be parameters")
        if names(var) in equations and all(p.qname != qn for p in params):
            params.append(Parameter(names(var), qn, literal[names(var)], str(var.unit() or ""), ""))
    param_names = {p.name for p in params}
    for name in param_names:           # inputs now, not constants to fold
        del equations[name]
    states = [st for st in m.states()]
    v_name = names(V)
    state_names = [names(st) for st in states]
    inputs = set(state_names) | {I_ST, "__stimulus__"} | param_names
    eqs = _fold_constants(equations, inputs, path, time_name, keep=set(deriv.values()))
    # the stimulus: i_st * scale, with d(dV/dt)/d(i_st) = -1
    init = {names(st): float(st.initial_value(as_float=True)) for st in states}
    dv = deriv[V.qname()]
    if stim is not None:
        k = _stimulus_slope(eqs, dv, init, params)
        if not np.isfinite(k) or abs(k) < 1e-300:
            raise CellMLImportError(f"{path}: dV/dt does not depend on the stimulus {stim.qname()}")
        scale = float(f"{-1.0 / k:.12g}")
        eqs[names(stim)] = _mul(Name(I_ST), Num(scale))
    else:
        scale = 1.0
        eqs[dv] = Binary("-", eqs[dv], Name(I_ST))
    default_stim = {k: v for k, v in stim_settings.items() if k != "amplitude"}
    if "amplitude" in stim_settings:
        default_stim["amplitude"] = stim_settings["amplitude"] / scale
    # gates
    order = [v_name] + [s for s in state_names if s != v_name]
    deps = _state_dependencies(eqs, set(state_names))
    gates: dict[str, tuple[Node, Node]] = {}
    for s in order[1:]:
        lin = _linear(Name(deriv[_qname(states, names, s)]), s, eqs, deps)
        if lin is not None and not (isinstance(lin[0], Num) and lin[0].value == 0.0):
            gates[s] = lin
    coupled = _coupled(gates, deps, set(state_names), v_name)
    nongating = [s for s in order if s not in gates]
    gate_list = [s for s in order if s in coupled] + [s for s in order if s in gates and s not in coupled]
    if not gate_list:
        raise CellMLImportError(
            f"{path}: no gating variable among its {len(order)} state(s) "
            f"({', '.join(_qname(states, names, s) for s in order[:6])}): the cardiac engines "
            "integrate the gates (states with dy/dt = alpha (1 - y) - beta y) by Rush-Larsen and "
            "need at least one; a model of the membrane voltage alone is not supported")
    outputs = [deriv[_qname(states, names, s)] for s in nongating]
    for s in gate_list:
        eqs[f"a_{s}"] = gates[s][0]
        outputs.append(f"a_{s}")
    for s in gate_list:
        eqs[f"b_{s}"] = gates[s][1]
        outputs.append(f"b_{s}")
    ordered = _calculation_order(eqs, outputs, inputs - {"__stimulus__"}, path)
    _check_finite(eqs, ordered, outputs, init, params, path, {names(st): st.qname() for st in states})
    chains = find_chains([(n, eqs[n]) for n in ordered], state_names, {s: (f"a_{s}", f"b_{s}") for s in coupled})
    all_states = nongating + gate_list
    qn = {names(st): st for st in states}
    return ImportedModel(
        name=m.name(), source=str(path), states=tuple(all_states),
        state_qnames=tuple(qn[s].qname() for s in all_states),
        state_units=tuple(str(qn[s].unit() or "") for s in all_states),
        n_gates=len(gate_list), n_coupled=len(coupled), initial=tuple(init[s] for s in all_states),
        parameters=tuple(params),
        equations=tuple(Equation(n, eqs[n]) for n in ordered), outputs=tuple(outputs),
        stimulus_scale=scale, default_stimulus=default_stim,
        annotations={t: f"{c}.{v}" for (c, v), t in annotated.items()}, chains=chains)


def _check_finite(eqs, ordered, outputs, init, params, path, qnames) -> None:
    """Refuse a model whose right-hand side is not finite at its own initial state, stimulus off
    (an exp that overflows, a division by zero in the file): no solver can start from there."""
    env = {**init, **{p.name: p.default for p in params}, I_ST: 0.0}
    with np.errstate(all="ignore"):
        for n in ordered:
            env[n] = evaluate(eqs[n], env)
    bad = [o for o in outputs if not np.isfinite(env[o])]
    if bad:
        culprit = next((n for n in ordered if not np.isfinite(env[n])), bad[0])
        state = bad[0][2:] if bad[0].startswith(("d_", "a_", "b_")) else bad[0]
        raise CellMLImportError(
            f"{path}: the derivative of {qnames.get(state, state)} is {env[bad[0]]} at the file's initial "
            f"state (first non-finite value: '{culprit}', an overflow or a division by zero in the "
            "file's equations): not simulable from its initial state")


def _needed_variables(m, stim) -> set[str]:
    """Qualified names of the variables the state derivatives read, the stimulus's own
    equation (timing, amplitude) left out: it is replaced."""
    needed: set[str] = set()
    stack = list(m.states())
    while stack:
        var = stack.pop()
        if var.qname() in needed:
            continue
        needed.add(var.qname())
        if stim is not None and var is stim:
            continue
        for ref in var.rhs().references():
            stack.append(ref.var())
    for var in m.variables(deep=True):     # annotated constants stay editable even if unused
        if var.is_literal() and not var.is_state():
            needed.add(var.qname())
    return needed


def _qname(states, names, ident):
    for st in states:
        if names(st) == ident:
            return st.qname()
    raise KeyError(ident)


class _Converter:
    """Myokit expression -> codegen tree."""

    def __init__(self, myokit, names, deriv, path):
        self.mk, self.names, self.deriv, self.path = myokit, names, deriv, path

    def __call__(self, e, where: str) -> Node:
        self.where = where
        return self.node(e)

    def fail(self, what: str):
        raise CellMLImportError(f"{self.path}: {self.where}: {what} is not supported")

    def node(self, e) -> Node:
        mk = self.mk
        if isinstance(e, mk.Number):
            return Num(float(e.eval()))
        if isinstance(e, mk.Name):
            return Name(self.names(e.var()))
        if isinstance(e, mk.Derivative):
            return Name(self.deriv[e.var().qname()])
        if isinstance(e, mk.PrefixPlus):
            return self.node(e[0])
        if isinstance(e, mk.PrefixMinus):
            return Unary("-", self.node(e[0]))
        ops = {mk.Plus: "+", mk.Minus: "-", mk.Multiply: "*", mk.Divide: "/"}
        for cls, op in ops.items():
            if type(e) is cls:
                return Binary(op, self.node(e[0]), self.node(e[1]))
        if isinstance(e, mk.Power):
            base, expo = self.node(e[0]), self.node(e[1])
            if isinstance(expo, Num) and expo.value in (2.0, 3.0, 4.0):
                out = base
                for _ in range(int(expo.value) - 1):
                    out = Binary("*", out, base)
                return out
            return Call("pow", (base, expo))
        simple = {mk.Sqrt: "sqrt", mk.Exp: "exp", mk.Abs: "abs"}
        for cls, fn in simple.items():
            if type(e) is cls:
                return Call(fn, (self.node(e[0]),))
        if isinstance(e, mk.Log10):
            return Binary("/", Call("log", (self.node(e[0]),)), Num(math.log(10.0)))
        if isinstance(e, mk.Log):
            if len(e) == 1:
                return Call("log", (self.node(e[0]),))
            return Binary("/", Call("log", (self.node(e[0]),)), Call("log", (self.node(e[1]),)))
        if isinstance(e, mk.If):
            return self.where_(e._i, self.node(e._t), self.node(e._e))
        if isinstance(e, mk.Piecewise):
            ops_ = list(e)
            out = self.node(ops_[-1])
            for k in range(len(ops_) - 3, -1, -2):
                out = self.where_(ops_[k], self.node(ops_[k + 1]), out)
            return out
        self.fail(f"{type(e).__name__} ({e.code()[:60]})")

    def where_(self, cond, yes: Node, no: Node) -> Node:
        mk = self.mk
        if isinstance(cond, mk.And):
            return self.where_(cond[0], self.where_(cond[1], yes, no), no)
        if isinstance(cond, mk.Or):
            return self.where_(cond[0], yes, self.where_(cond[1], yes, no))
        if isinstance(cond, mk.Not):
            return self.where_(cond[0], no, yes)
        cmp = {mk.Less: "<", mk.LessEqual: "<=", mk.More: ">", mk.MoreEqual: ">=", mk.Equal: "=="}
        for cls, op in cmp.items():
            if type(cond) is cls:
                return Call("where", (Compare(op, self.node(cond[0]), self.node(cond[1])), yes, no))
        if isinstance(cond, mk.NotEqual):
            return Call("where", (Compare("==", self.node(cond[0]), self.node(cond[1])), no, yes))
        self.fail(f"condition {type(cond).__name__}")


def _substitute(node: Node, values: dict[str, float]) -> Node:
    if isinstance(node, Name):
        return Num(values[node.name]) if node.name in values else node
    if isinstance(node, Unary):
        arg = _substitute(node.arg, values)
        return Num(-arg.value) if isinstance(arg, Num) else Unary("-", arg)
    if isinstance(node, Binary):
        return Binary(node.op, _substitute(node.left, values), _substitute(node.right, values))
    if isinstance(node, Compare):
        return Compare(node.op, _substitute(node.left, values), _substitute(node.right, values))
    if isinstance(node, Call):
        return Call(node.func, tuple(_substitute(a, values) for a in node.args))
    return node


def _fold_constants(eqs: dict[str, Node], inputs: set[str], path, time_name: str,
                    keep: set[str] = frozenset()) -> dict[str, Node]:
    """Evaluate (float64) every equation that reads no state, parameter or input; inline them.
    The equations in ``keep`` (the state derivatives) stay, as numbers where constant: a state
    with dx/dt = 0 (a concentration held fixed) is a state all the same."""
    deps = {n: names_used(t) for n, t in eqs.items()}
    values: dict[str, float] = {}
    varying: set[str] = set(inputs)
    pending = dict(deps)
    while pending:
        progress = False
        for n, d in list(pending.items()):
            if time_name in d:
                raise CellMLImportError(f"{path}: {n} depends on time outside the stimulus; "
                                        "time-dependent models other than the stimulus are not supported")
            unknown = d - set(values) - varying
            if unknown & set(pending):
                continue
            if unknown:
                raise CellMLImportError(f"{path}: {n} reads undefined variables {sorted(unknown)}")
            if d & varying:
                varying.add(n)
            else:
                with np.errstate(all="ignore"):
                    values[n] = float(evaluate(eqs[n], values))
            del pending[n]
            progress = True
        if not progress:
            raise CellMLImportError(f"{path}: the equations form a cycle: {sorted(pending)[:8]}")
    out = {n: _substitute(t, values) for n, t in eqs.items() if n in varying}
    out.update({n: Num(values[n]) for n in keep if n in values})
    return out


def _evaluate_all(eqs: dict[str, Node], env: dict) -> dict:
    env = dict(env)
    pending = set(eqs) - set(env)
    while pending:
        for n in list(pending):
            if names_used(eqs[n]) <= set(env):
                with np.errstate(all="ignore"):
                    env[n] = evaluate(eqs[n], env)
                pending.discard(n)
    return env


def _stimulus_slope(eqs, dv: str, init: dict, params) -> float:
    env = {**init, **{p.name: p.default for p in params}, I_ST: 0.0}
    out = []
    for s in (1.0, -1.0):
        env["__stimulus__"] = s
        out.append(float(_evaluate_all({**eqs}, env)[dv]))
    return 0.5 * (out[0] - out[1])


def _state_dependencies(eqs: dict[str, Node], states: set[str]) -> dict[str, set[str]]:
    """For every equation, the states it reads directly or through other equations."""
    memo: dict[str, set[str]] = {}

    def of(name: str) -> set[str]:
        if name in memo:
            return memo[name]
        if name in states:
            return {name}
        if name not in eqs:
            return set()
        memo[name] = set()          # cycles (none in a valid model) stop here
        stack, seen, out = [name], {name}, set()
        while stack:
            cur = stack.pop()
            for dep in names_used(eqs[cur]) if cur in eqs else ():
                if dep in states:
                    out.add(dep)
                elif dep in eqs and dep not in seen:
                    seen.add(dep)
                    stack.append(dep)
        memo[name] = out
        return out

    return {n: of(n) for n in eqs}


def _coupled(linear: dict[str, tuple[Node, Node]], deps: dict[str, set[str]], states: set[str],
             voltage: str) -> set[str]:
    """The states of ``linear`` (state -> (a, b)) whose a or b reads another state than the
    membrane voltage: a Markov chain's states, buffers, Ca-dependent gates. Rush-Larsen freezes
    that state over a step; where h·|a| >> 1 it gives the quasi-steady state against the frozen
    value (for a Markov chain, one Jacobi sweep; for a buffer, a Ca flux that its pool does not
    lose), and an embedded error estimate (the difference of two such values) does not see it.
    The adaptive methods step them by the tableau
    (:meth:`~app.sims.cardiac.model.CellModel.with_coupled_stepped`)."""
    out = set()
    for s, (a, b) in linear.items():
        found: set[str] = set()
        for n in names_used(a) | names_used(b):
            found |= deps.get(n, {n})
        if found & states - {voltage, s}:
            out.add(s)
    return out


def _free(node: Node, x: str, deps) -> bool:
    return all(n != x and x not in deps.get(n, ()) for n in names_used(node))


def _mul(a: Node, b: Node) -> Node:
    if isinstance(a, Num) and isinstance(b, Num):
        return Num(a.value * b.value)
    for p, q in ((a, b), (b, a)):
        if isinstance(p, Num) and p.value == 0.0:
            return Num(0.0)
        if isinstance(p, Num) and p.value == 1.0:
            return q
    return Binary("*", a, b)


def _add(a: Node, b: Node, op: str = "+") -> Node:
    if isinstance(b, Num) and b.value == 0.0:
        return a
    if isinstance(a, Num) and a.value == 0.0:
        return b if op == "+" else Unary("-", b)
    return Binary(op, a, b)


def _linear(node: Node, x: str, eqs, deps) -> tuple[Node, Node] | None:
    """``(a, b)`` with ``node = a·x + b`` and a, b free of x (equations that depend on x are
    substituted in); None where the dependence is not linear."""
    if _free(node, x, deps):
        return Num(0.0), node
    if isinstance(node, Name):
        if node.name == x:
            return Num(1.0), Num(0.0)
        return _linear(eqs[node.name], x, eqs, deps)
    if isinstance(node, Unary):
        inner = _linear(node.arg, x, eqs, deps)
        return None if inner is None else (_mul(Num(-1.0), inner[0]), _mul(Num(-1.0), inner[1]))
    if isinstance(node, Binary) and node.op in "+-":
        left, right = _linear(node.left, x, eqs, deps), _linear(node.right, x, eqs, deps)
        if left is None or right is None:
            return None
        return _add(left[0], right[0], node.op), _add(left[1], right[1], node.op)
    if isinstance(node, Binary) and node.op == "*":
        for p, q in ((node.left, node.right), (node.right, node.left)):
            if _free(p, x, deps):
                lin = _linear(q, x, eqs, deps)
                return None if lin is None else (_mul(p, lin[0]), _mul(p, lin[1]))
        return None
    if isinstance(node, Binary) and node.op == "/" and _free(node.right, x, deps):
        lin = _linear(node.left, x, eqs, deps)
        if lin is None:
            return None
        def divided(t: Node) -> Node:
            return Num(0.0) if isinstance(t, Num) and t.value == 0.0 else Binary("/", t, node.right)
        return divided(lin[0]), divided(lin[1])
    if isinstance(node, Call) and node.func == "where" and _free(node.args[0], x, deps):
        yes, no = _linear(node.args[1], x, eqs, deps), _linear(node.args[2], x, eqs, deps)
        if yes is None or no is None:
            return None
        cond = node.args[0]
        return Call("where", (cond, yes[0], no[0])), Call("where", (cond, yes[1], no[1]))
    return None


def _calculation_order(eqs: dict[str, Node], outputs: list[str], inputs: set[str], path) -> list[str]:
    """The equations the outputs need, each after the ones it reads."""
    needed, stack = set(), list(outputs)
    while stack:
        n = stack.pop()
        if n in needed or n in inputs:
            continue
        if n not in eqs:
            raise CellMLImportError(f"{path}: '{n}' is read but never defined")
        needed.add(n)
        stack.extend(names_used(eqs[n]))
    order, done = [], set(inputs)
    pending = [n for n in eqs if n in needed]
    reads = {n: names_used(eqs[n]) for n in pending}
    while pending:
        rest = []
        for n in pending:
            if reads[n] <= done:
                order.append(n)
                done.add(n)
            else:
                rest.append(n)
        if len(rest) == len(pending):
            raise CellMLImportError(f"{path}: the equations form a cycle: {sorted(rest)[:8]}")
        pending = rest
    return order
