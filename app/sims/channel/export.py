"""Export of a fitted channel model: our YAML, a Myokit ``.mmt`` model and an NMODL ``.mod``
point process for NEURON.

The rate expressions are printed from the parsed trees (never from the user's text), with
only checked identifiers (:data:`model.IDENTIFIER`) and printed numbers. Units as ours: v in
mV, time in ms, rates in 1/ms, conductance in nS, current in pA (NMODL: nA, the point-process
unit). Our engines clamp every rate to [0, RATE_MAX] and treat a NaN at a removable
singularity by evaluating beside it; the exported models evaluate the expressions as written.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from app.compute.codegen import Binary, Compare, Name, Node, Num, Unary
from app.sims.channel.model import ChannelModel, ChannelSpec
from app.sims.common.config import ConfigError, dump_yaml

# NMODL words a model name must not take (language keywords, NEURON globals, our own names)
NMODL_RESERVED = frozenset("""v t dt celsius area diam secondorder PI FARADAY R NEURON UNITS PARAMETER
ASSIGNED STATE BREAKPOINT INITIAL DERIVATIVE KINETIC PROCEDURE FUNCTION SOLVE METHOD CONSERVE
COMPARTMENT LOCAL TABLE DEPEND FROM TO WITH IF ELSE VERBATIM ENDVERBATIM COMMENT ENDCOMMENT
TITLE INDEPENDENT SUFFIX POINT_PROCESS RANGE GLOBAL NONSPECIFIC_CURRENT USEION READ WRITE
exp log log10 sqrt fabs pow sin cos tan sinh cosh tanh floor ceil fmin fmax
ich gch ech bgmin bgmax bgwhere bglt bgle bggt bgge bgeq bgexpm1 rates kin""".split())
MYOKIT_RESERVED = frozenset("""v g_ch E_ch I_ch time pace and or not if piecewise exp log log10 sqrt
abs floor ceil sin cos tan""".split())


def fitted_spec(spec: ChannelSpec, values: np.ndarray) -> ChannelSpec:
    """``spec`` with every parameter's ``value`` set to the fit (the search ranges kept,
    widened where a value would leave them)."""
    params = [replace(p, value=float(x), min=min(p.min, float(x)), max=max(p.max, float(x)))
              for p, x in zip(spec.parameters, values)]
    return replace(spec, parameters=params)


def to_yaml(spec: ChannelSpec, values: np.ndarray, chi2: float | None = None) -> str:
    head = "# fitted channel model" + (f": chi2 = {chi2:.10g} pA^2" if chi2 is not None else "") + "\n"
    return head + dump_yaml(fitted_spec(spec, values))


# ---- printers ------------------------------------------------------------------------------

def _number(x: float) -> str:
    if not np.isfinite(x):
        raise ConfigError(f"cannot export the non-finite number {x}")
    return repr(float(x))


def to_nmodl_expr(node: Node) -> str:
    """NMODL source of a rate tree; min/max/where/expm1 call the helper FUNCTIONs of
    :data:`NMODL_HELPERS`."""
    if isinstance(node, Num):
        return _number(node.value)
    if isinstance(node, Name):
        return node.name
    if isinstance(node, Unary):
        return f"(-{to_nmodl_expr(node.arg)})"
    if isinstance(node, Binary):
        op = "^" if node.op == "**" else node.op
        return f"({to_nmodl_expr(node.left)} {op} {to_nmodl_expr(node.right)})"
    if isinstance(node, Compare):
        helper = {"<": "bglt", "<=": "bgle", ">": "bggt", ">=": "bgge", "==": "bgeq"}[node.op]
        return f"{helper}({to_nmodl_expr(node.left)}, {to_nmodl_expr(node.right)})"
    args = [to_nmodl_expr(a) for a in node.args]
    if node.func == "pow":
        return f"({args[0]} ^ {args[1]})"
    name = {"abs": "fabs", "min": "bgmin", "max": "bgmax", "where": "bgwhere", "expm1": "bgexpm1"}.get(
        node.func, node.func)
    return f"{name}({', '.join(args)})"


NMODL_HELPERS = {
    "bgmin": "FUNCTION bgmin(a, b) {\n    IF (a < b) { bgmin = a } ELSE { bgmin = b }\n}",
    "bgmax": "FUNCTION bgmax(a, b) {\n    IF (a > b) { bgmax = a } ELSE { bgmax = b }\n}",
    "bgwhere": "FUNCTION bgwhere(c, a, b) {\n    IF (c != 0) { bgwhere = a } ELSE { bgwhere = b }\n}",
    "bglt": "FUNCTION bglt(a, b) {\n    IF (a < b) { bglt = 1 } ELSE { bglt = 0 }\n}",
    "bgle": "FUNCTION bgle(a, b) {\n    IF (a <= b) { bgle = 1 } ELSE { bgle = 0 }\n}",
    "bggt": "FUNCTION bggt(a, b) {\n    IF (a > b) { bggt = 1 } ELSE { bggt = 0 }\n}",
    "bgge": "FUNCTION bgge(a, b) {\n    IF (a >= b) { bgge = 1 } ELSE { bgge = 0 }\n}",
    "bgeq": "FUNCTION bgeq(a, b) {\n    IF (a == b) { bgeq = 1 } ELSE { bgeq = 0 }\n}",
    "bgexpm1": ("FUNCTION bgexpm1(x) {\n    IF (fabs(x) < 1e-5) { bgexpm1 = x + x*x/2 + x*x*x/6 }"
                " ELSE { bgexpm1 = exp(x) - 1 }\n}"),
}


def to_myokit_expr(node: Node, symbol=lambda n: n) -> str:
    """Myokit source of a rate tree (``^`` powers, ``if(cond, a, b)``)."""
    def p(n: Node) -> str:
        return to_myokit_expr(n, symbol)
    if isinstance(node, Num):
        return _number(node.value)
    if isinstance(node, Name):
        return symbol(node.name)
    if isinstance(node, Unary):
        return f"(-{p(node.arg)})"
    if isinstance(node, Binary):
        return f"({p(node.left)} {'^' if node.op == '**' else node.op} {p(node.right)})"
    if isinstance(node, Compare):
        return f"({p(node.left)} {node.op} {p(node.right)})"
    a = [p(x) for x in node.args]
    if node.func == "pow":
        return f"({a[0]} ^ {a[1]})"
    if node.func == "min":
        return f"if({a[0]} < {a[1]}, {a[0]}, {a[1]})"
    if node.func == "max":
        return f"if({a[0]} > {a[1]}, {a[0]}, {a[1]})"
    if node.func == "where":
        return f"if({a[0]}, {a[1]}, {a[2]})"
    if node.func == "expm1":
        return f"(exp({a[0]}) - 1)"
    return f"{node.func}({', '.join(a)})"


def _check_names(model: ChannelModel, reserved: frozenset, target: str) -> None:
    names = list(model.param_names) + [n for n, _ in model.rate_defs] + list(model.states)
    clash = [n for n in names if n in reserved]
    if clash:
        raise ConfigError(f"cannot export to {target}: the name '{clash[0]}' is reserved there; rename it")


def _safe_name(text: str, fallback: str) -> str:
    cleaned = "".join(c if c.isalnum() or c == "_" else "_" for c in text)[:40].strip("_")
    return cleaned if cleaned and not cleaned[0].isdigit() else fallback


# ---- NMODL ---------------------------------------------------------------------------------

def to_nmodl(model: ChannelModel, values: np.ndarray, suffix: str = "fitted_channel") -> str:
    """An NMODL point process: PARAMETER block with the fitted values, a KINETIC scheme with
    CONSERVE, the rates in PROCEDURE rates(v), i (nA) = 1e-3 gmax (nS) O (v - e) (mV)."""
    _check_names(model, NMODL_RESERVED, "NMODL")
    suffix = _safe_name(suffix, "fitted_channel")
    values = np.asarray(values, float)
    g = model.param_names[model.conductance]
    rate_lines = [f"    {name} = {to_nmodl_expr(tree)}" for name, tree in model.rate_defs]
    used = sorted({h for h in NMODL_HELPERS if any(h + "(" in line for line in rate_lines)})
    pairs: dict[tuple[int, int], list[str]] = {}
    for i, j, name in model.transitions:
        a, b = min(i, j), max(i, j)
        slot = pairs.setdefault((a, b), ["0", "0"])
        slot[0 if i == a else 1] = name
    states = model.states
    opened = " + ".join(s for s, o in zip(states, model.open_mask) if o)
    kinetic = [f"    ~ {states[a]} <-> {states[b]} ({f}, {r})" for (a, b), (f, r) in pairs.items()]
    params = [f"    {n} = {_number(x)}" for n, x in zip(model.param_names, values)]
    return "\n".join([
        f"TITLE {suffix}: Markov channel fitted by BioGPU Studio",
        "COMMENT",
        f"States {', '.join(states)}; open {opened}. Rates in 1/ms with v in mV; {g} in nS;",
        "current i (nA) = 1e-3 * " + g + " * open * (v - ech). Generated from the fitted model.",
        "ENDCOMMENT",
        "",
        "NEURON {",
        f"    POINT_PROCESS {suffix}",
        "    NONSPECIFIC_CURRENT ich",
        f"    RANGE {', '.join(model.param_names)}, ech, gch, ich",
        "}",
        "",
        "UNITS {",
        "    (mV) = (millivolt)",
        "    (nA) = (nanoamp)",
        "    (nS) = (nanosiemens)",
        "}",
        "",
        "PARAMETER {",
        *params,
        f"    ech = {_number(model.e_rev)} (mV)",
        "}",
        "",
        "ASSIGNED {",
        "    v (mV)",
        "    ich (nA)",
        "    gch (nS)",
        *[f"    {name}" for name, _ in model.rate_defs],
        "}",
        "",
        f"STATE {{ {' '.join(states)} }}",
        "",
        "INITIAL {",
        "    SOLVE kin STEADYSTATE sparse",
        "}",
        "",
        "BREAKPOINT {",
        "    SOLVE kin METHOD sparse",
        f"    gch = {g} * ({opened})",
        "    ich = (1e-3) * gch * (v - ech)",
        "}",
        "",
        "KINETIC kin {",
        "    rates(v)",
        *kinetic,
        f"    CONSERVE {' + '.join(states)} = 1",
        "}",
        "",
        "PROCEDURE rates(v (mV)) {",
        *rate_lines,
        "}",
        "",
        *[NMODL_HELPERS[h] + "\n" for h in used],
    ])


# ---- Myokit ------------------------------------------------------------------------------

def to_myokit(model: ChannelModel, values: np.ndarray, name: str = "fitted_channel") -> str:
    """A Myokit model: ``engine.pace`` drives ``membrane.V`` (a voltage-clamp protocol sets
    it), the component ``channel`` holds parameters, rates, the states (initial values the
    steady state at -80 mV), the conductance ``g_ch`` (nS) and the current ``I_ch`` (pA)."""
    from app.sims.channel.numerics import steady_state
    _check_names(model, MYOKIT_RESERVED, "Myokit")
    values = np.asarray(values, float)
    initial = steady_state(model.q_matrix(values[None], -80.0))[0]
    transitions_from: dict[int, list[str]] = {}
    transitions_to: dict[int, list[str]] = {}
    for i, j, rate in model.transitions:
        transitions_from.setdefault(i, []).append(f"{rate} * {model.states[i]}")
        transitions_to.setdefault(j, []).append(f"{rate} * {model.states[i]}")
    lines = ["[[model]]", f"name: {_safe_name(name, 'fitted_channel')}",
             "desc: Markov channel fitted by BioGPU Studio (rates in 1/ms, v in mV, g in nS, I in pA)",
             "# Initial values (steady state at -80 mV)"]
    lines += [f"channel.{s} = {_number(x)}" for s, x in zip(model.states, initial)]
    lines += ["", "[engine]", "time = 0 [ms]", "    bind time", "pace = -80", "    bind pace", "",
              "[membrane]", "V = engine.pace", "    in [mV]", "", "[channel]", "use membrane.V as v"]
    lines += [f"{n} = {_number(x)}" for n, x in zip(model.param_names, values)]
    lines += [f"{name} = {to_myokit_expr(tree)}" for name, tree in model.rate_defs]
    for k, s in enumerate(model.states):
        gain = " + ".join(transitions_to.get(k, [])) or "0"
        loss = " + ".join(transitions_from.get(k, [])) or "0"
        lines.append(f"dot({s}) = ({gain}) - ({loss})")
    opened = " + ".join(s for s, o in zip(model.states, model.open_mask) if o)
    g = model.param_names[model.conductance]
    lines += [f"g_ch = {g} * ({opened})", "    in [nS]", f"E_ch = {_number(model.e_rev)}", "    in [mV]",
              "I_ch = g_ch * (v - E_ch)", "    in [pA]", ""]
    return "\n".join(lines)
