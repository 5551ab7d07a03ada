"""A fitted channel as a NeuroML2 ``ionChannelHH`` or ``ionChannelKS`` (through libNeuroML).

A scheme that is one Hodgkin–Huxley gate written out as its Markov chain (:func:`hh_gate`: N + 1
states in a line, the open state at one end, forward rates (N - i)·alpha and reverse rates
(i + 1)·beta, as the 5-state HH potassium scheme, or a two-state C-O) goes out as an
``ionChannelHH`` with one ``gateHHrates`` (``instances="N"``, ``forwardRate`` alpha,
``reverseRate`` beta): the same open probability, q^N. Any other scheme is an ``ionChannelKS``:
one ``gateKS`` (``instances="1"``) holds every state of the scheme (``openState`` for the open
states, ``closedState`` for the others), so the gate's ``fcond`` is the summed occupancy of the
open states, as in our engines. Each pair of states I < J joined by a transition is a
``forwardTransition`` (rate ``kIJ``, I to J) followed by a ``reverseTransition`` (rate ``kJI``,
J to I), as the schema pairs them; a direction the model lacks has the rate 0. Each rate is a
LEMS ``ComponentType`` extending ``baseHHRate`` whose ``r`` is the
fitted rate expression with the helper rates inlined and the parameters written as numbers:
``r = rate * f(V)`` with ``V = (v - midpoint) / scale``, written with ``rate = 1per_ms``,
``midpoint = 0mV``, ``scale = 1mV`` (so ``V`` is v in mV and ``f`` is in 1/ms, our units).
The channel's ``conductance`` is the fitted maximal conductance (nS); the reversal potential,
which NeuroML puts on the ``channelDensity`` or ``channelPopulation`` using the channel, is in
the notes (``Reversal potential X mV``; jLEMS refuses a ``property`` inside a channel).

Not written: our engines' clamp of every rate to [0, 1e4] 1/ms and their evaluation beside a
removable singularity (the exported rates are evaluated as written), and the start from the
steady state at the holding potential (a simulator initialises the gate). Refused, by name:
rates using ``min``, ``max``, ``where``, a comparison or ``log`` (this exporter writes plain
LEMS expressions), a scheme without a closed state, names that are not NeuroML ids. A product
of several gates (such as HH sodium, m^3·h) goes out as the equivalent ``ionChannelKS``.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from app.compute.codegen import Binary, Call, Compare, Name, Node, Num, Unary
from app.sims.channel.model import IDENTIFIER, ChannelModel
from app.sims.common.config import ConfigError

LEMS_FUNCTIONS = {"exp": "exp", "sqrt": "sqrt", "abs": "abs"}   # ours -> LEMS (same meaning)


GATE_CHECK_VOLTAGES = np.arange(-150.0, 150.25, 0.5)    # mV: where the HH form is checked
GATE_CHECK_RTOL = 1e-12        # the multiples are exact up to rounding of one product


def _refuse(message: str) -> ConfigError:
    return ConfigError(f"cannot export to NeuroML2: {message}")


def _number(x: float) -> str:
    if not np.isfinite(x):
        raise _refuse(f"the number {x} is not finite")
    return repr(float(x)) if x >= 0 else f"(0 - {float(-x)!r})"    # no '- -' for LEMS parsers


def to_lems_expr(node: Node, env: dict[str, str], rate: str) -> str:
    """LEMS text of ``node`` with each name replaced by ``env[name]`` (already LEMS text)."""
    def p(n: Node) -> str:
        return to_lems_expr(n, env, rate)
    if isinstance(node, Num):
        return _number(node.value)
    if isinstance(node, Name):
        return env[node.name]
    if isinstance(node, Unary):
        return f"(0 - {p(node.arg)})"
    if isinstance(node, Binary):
        return f"({p(node.left)} {'^' if node.op == '**' else node.op} {p(node.right)})"
    if isinstance(node, Compare):
        raise _refuse(f"rate {rate} uses a comparison ('{node.op}'), which these plain expressions do not carry")
    assert isinstance(node, Call)
    args = [p(a) for a in node.args]
    if node.func == "pow":
        return f"({args[0]} ^ {args[1]})"
    if node.func == "expm1":
        return f"(exp({args[0]}) - 1)"
    if node.func not in LEMS_FUNCTIONS:
        raise _refuse(f"rate {rate} uses '{node.func}', which these plain LEMS expressions do not carry")
    return f"{LEMS_FUNCTIONS[node.func]}({args[0]})"


def transition_expressions(model: ChannelModel, values: np.ndarray) -> dict[str, str]:
    """LEMS expression of each transition rate in ``V`` (v in mV), 1/ms: helper rates
    inlined, parameters as the fitted numbers."""
    env = {n: _number(x) for n, x in zip(model.param_names, np.asarray(values, float))}
    env["v"] = "V"
    out: dict[str, str] = {}
    for name, tree in model.rate_defs:
        env[name] = to_lems_expr(tree, env, name)
        out[name] = env[name]
    return {name: out[name] for _, _, name in model.transitions}


def _check_ids(model: ChannelModel, channel_id: str) -> None:
    for what, names in (("channel id", [channel_id]), ("state", model.states)):
        bad = [n for n in names if not IDENTIFIER.fullmatch(n)]
        if bad:
            raise _refuse(f"the {what} name {bad[0][:40]!r} is not a NeuroML id (letters, digits, '_')")
    if model.open_mask.all():
        raise _refuse("every state is open; a gateKS needs at least one closed state")


def _chain(model: ChannelModel) -> list[int] | None:
    """The states in a line from the closed end to the only open state, or None when the
    scheme is not a line of states joined both ways with one open state at an end."""
    n = model.n_states
    edges = {(i, j) for i, j, _ in model.transitions}
    pairs = {(min(i, j), max(i, j)) for i, j in edges}
    if n < 2 or model.open_mask.sum() != 1 or len(edges) != 2 * (n - 1) or len(pairs) != n - 1:
        return None
    neighbours: dict[int, list[int]] = {k: [] for k in range(n)}
    for a, b in pairs:
        neighbours[a].append(b)
        neighbours[b].append(a)
    is_open = int(np.flatnonzero(model.open_mask)[0])
    if len(neighbours[is_open]) != 1:
        return None
    line, previous = [is_open], -1
    while len(line) < n:
        step = [k for k in neighbours[line[-1]] if k != previous]
        if len(step) != 1:
            return None
        previous = line[-1]
        line.append(step[0])
    return line[::-1]


def hh_gate(model: ChannelModel, values: np.ndarray) -> tuple[int, str, str] | None:
    """(instances N, alpha rate name, beta rate name) when the fitted scheme is one
    Hodgkin–Huxley gate of N instances written as its Markov chain C0-...-CN(open): forward
    rates (N - i)·alpha from Ci, reverse rates (i + 1)·beta into Ci, alpha the last forward
    rate and beta the first reverse one. Checked on the fitted rates at every 0.5 mV from
    -150 to +150 mV to GATE_CHECK_RTOL; None when any multiple differs."""
    line = _chain(model)
    if line is None:
        return None
    names = {(i, j): name for i, j, name in model.transitions}
    n = len(line) - 1
    forward = [names[line[k], line[k + 1]] for k in range(n)]
    reverse = [names[line[k + 1], line[k]] for k in range(n)]
    with np.errstate(all="ignore"):
        rates = model._rates(np.asarray(values, float)[None], GATE_CHECK_VOLTAGES)
    alpha, beta = rates[forward[-1]][:, 0], rates[reverse[0]][:, 0]
    for k in range(n):
        for name, expected in ((forward[k], (n - k) * alpha), (reverse[k], (k + 1) * beta)):
            if not np.allclose(rates[name][:, 0], expected, rtol=GATE_CHECK_RTOL, atol=0.0, equal_nan=True):
                return None
    return n, forward[-1], reverse[0]


def _notes(model: ChannelModel, form: str, notes: str) -> str:
    opened = ", ".join(s for s, o in zip(model.states, model.open_mask) if o)
    text = (f"{form} fitted by BioGPU Studio as the Markov scheme of states {', '.join(model.states)}; "
            f"open {opened}. Reversal potential {float(model.e_rev)!r} mV (set erev on the "
            "channelDensity or channelPopulation). Each sweep of the fit started from the steady "
            "state at its holding potential.")
    return text + (" " + notes if notes else "")


def _rate(type_name: str):
    import neuroml
    return neuroml.HHRate(type=type_name, rate="1per_ms", midpoint="0mV", scale="1mV")


def to_neuroml(model: ChannelModel, values: np.ndarray, channel_id: str = "fitted_channel",
               notes: str = "") -> str:
    """The NeuroML2 document (XML text) holding the fitted channel ``channel_id``: an
    ``ionChannelHH`` when :func:`hh_gate` finds one gate, an ``ionChannelKS`` otherwise."""
    import neuroml
    from neuroml.writers import NeuroMLWriter

    _check_ids(model, channel_id)
    values = np.asarray(values, float)
    rates = transition_expressions(model, values)
    gmax = f"{float(values[model.conductance])!r}nS"
    doc = neuroml.NeuroMLDocument(id=channel_id, notes="Ion channel fitted by BioGPU Studio.")
    gate = hh_gate(model, values)
    # no <property> for erev: jLEMS's ion channels have no such child and refuse to load the file
    if gate is not None:
        instances, alpha, beta = gate
        channel = neuroml.IonChannelHH(id=channel_id, conductance=gmax, notes=_notes(
            model, f"Hodgkin–Huxley gate (q^{instances})", notes))
        channel.gate_hh_rates.append(neuroml.GateHHRates(
            id="q", instances=instances, forward_rate=_rate(f"{channel_id}_alpha_rate"),
            reverse_rate=_rate(f"{channel_id}_beta_rate")))
        doc.ComponentType.append(_rate_type(f"{channel_id}_alpha_rate", rates[alpha],
                                            f"opening rate of one gate ({alpha} of the scheme)"))
        doc.ComponentType.append(_rate_type(f"{channel_id}_beta_rate", rates[beta],
                                            f"closing rate of one gate ({beta} of the scheme)"))
        doc.ion_channel_hhs.append(channel)
    else:
        doc.ion_channel_kses.append(_ks_channel(model, rates, channel_id, gmax, doc, notes))
    buf = _Buffer()
    NeuroMLWriter.write(doc, buf)
    return _interleave(buf.getvalue())


def _ks_channel(model: ChannelModel, rates: dict[str, str], channel_id: str, gmax: str, doc, notes: str):
    import neuroml
    channel = neuroml.IonChannelKS(id=channel_id, conductance=gmax, notes=_notes(model, "Markov scheme", notes))
    gate = neuroml.GateKS(id="gate", instances=1)
    for state, is_open in zip(model.states, model.open_mask):
        (gate.open_states if is_open else gate.closed_states).append(
            (neuroml.OpenState if is_open else neuroml.ClosedState)(id=state))
    pairs: dict[tuple[int, int], list[str | None]] = {}
    for i, j, name in model.transitions:       # the schema pairs transitions: forward a->b, reverse b->a
        a, b = min(i, j), max(i, j)
        pairs.setdefault((a, b), [None, None])[0 if i == a else 1] = name
    zero = f"{channel_id}_zero_rate"
    for (a, b), names in pairs.items():
        for cls, name in zip((neuroml.ForwardTransition, neuroml.ReverseTransition), names):
            rate = _rate(f"{channel_id}_{name}_rate" if name else zero)
            rate.original_tagname_ = "rate"          # the element is <rate type=...>
            forward = cls is neuroml.ForwardTransition
            transition = cls(id=name or f"none_{a + 1}{b + 1}_{'f' if forward else 'r'}",
                             from_=model.states[a], to=model.states[b])
            transition.anytypeobjs_ = [rate]
            (gate.forward_transition if forward else gate.reverse_transition).append(transition)
    for i, j, name in model.transitions:
        doc.ComponentType.append(_rate_type(f"{channel_id}_{name}_rate", rates[name],
                                            f"transition {name}: {model.states[i]} -> {model.states[j]}"))
    if any(None in names for names in pairs.values()):
        doc.ComponentType.append(_rate_type(zero, "0", "no transition in this direction"))
    channel.gate_kses.append(gate)
    return channel


def _rate_type(name: str, expression: str, description: str):
    import neuroml
    component = neuroml.ComponentType(name=name, extends="baseHHRate", description=description)
    component.Dynamics.append(neuroml.Dynamics(DerivedVariable=[
        neuroml.DerivedVariable(name="V", dimension="none", value="(v - midpoint) / scale"),
        neuroml.DerivedVariable(name="r", dimension="per_time", exposure="r", value=f"rate * {expression}")]))
    return component


def _interleave(text: str) -> str:
    """libNeuroML writes every forwardTransition, then every reverseTransition; the schema
    wants each pair together (forward, reverse, forward, reverse...)."""
    from lxml import etree
    root = etree.fromstring(text.encode(), etree.XMLParser(remove_blank_text=True, resolve_entities=False))
    for gate in root.iter("{*}gateKS"):
        forward = [e for e in gate if etree.QName(e).localname == "forwardTransition"]
        reverse = [e for e in gate if etree.QName(e).localname == "reverseTransition"]
        for e in forward + reverse:
            gate.remove(e)
        for f, r in zip(forward, reverse):
            gate.extend([f, r])
    etree.indent(root, "    ")
    return etree.tostring(root, xml_declaration=True, encoding="UTF-8").decode()


class _Buffer(io.StringIO):
    """A StringIO the writer may close (it does) and that we still read."""

    def close(self) -> None:
        pass


def validate(path: str) -> None:
    """Validate a written file against the NeuroML2 schema; ConfigError if not."""
    from app.sims.common.export import validate_neuroml
    validate_neuroml(path)


def export_run(folder: Path, out: Path) -> list[Path]:
    """``biogpu export RUN --to neuroml``: the run's best parameters as an ionChannelHH or KS."""
    from app.sims.channel.export import _safe_name
    from app.sims.common.export import load_results, load_run
    from app.sims.common.output import save_text
    cfg = load_run(folder)
    model, results = cfg.model_(), load_results(folder)
    channel_id = _safe_name(cfg.name or model.name, "fitted_channel")
    save_text(out, to_neuroml(model, results["best_params"], channel_id, notes=f"Run: {folder.name}."))
    validate(str(out))
    return [out]
