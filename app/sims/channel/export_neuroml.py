"""A fitted channel as a NeuroML2 ``ionChannelKS`` (through libNeuroML).

One ``gateKS`` (``instances="1"``) holds every state of the scheme (``openState`` for the open
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
LEMS expressions), a scheme without a closed state, names that are not NeuroML ids.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from app.compute.codegen import Binary, Call, Compare, Name, Node, Num, Unary
from app.sims.channel.model import IDENTIFIER, ChannelModel
from app.sims.common.config import ConfigError

LEMS_FUNCTIONS = {"exp": "exp", "sqrt": "sqrt", "abs": "abs"}   # ours -> LEMS (same meaning)


def _refuse(message: str) -> ConfigError:
    return ConfigError(f"cannot export to NeuroML2 ionChannelKS: {message}")


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


def to_neuroml(model: ChannelModel, values: np.ndarray, channel_id: str = "fitted_channel",
               notes: str = "") -> str:
    """The NeuroML2 document (XML text) holding the fitted channel ``channel_id``."""
    import neuroml
    from neuroml.writers import NeuroMLWriter

    _check_ids(model, channel_id)
    values = np.asarray(values, float)
    rates = transition_expressions(model, values)
    gmax = float(values[model.conductance])
    doc = neuroml.NeuroMLDocument(id=channel_id, notes="Ion channel fitted by BioGPU Studio.")
    text = (f"Markov scheme fitted by BioGPU Studio: states {', '.join(model.states)}; open "
            f"{', '.join(s for s, o in zip(model.states, model.open_mask) if o)}. Reversal potential "
            f"{float(model.e_rev)!r} mV (set erev on the channelDensity or channelPopulation). "
            "Each sweep of the fit started from the steady state at its holding potential.")
    # no <property> for erev: jLEMS's ionChannelKS has no such child and refuses to load the file
    channel = neuroml.IonChannelKS(id=channel_id, conductance=f"{gmax!r}nS",
                                   notes=text + (" " + notes if notes else ""))
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
            rate = neuroml.HHRate(type=f"{channel_id}_{name}_rate" if name else zero,
                                  rate="1per_ms", midpoint="0mV", scale="1mV")
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
    doc.ion_channel_kses.append(channel)
    buf = _Buffer()
    NeuroMLWriter.write(doc, buf)
    return _interleave(buf.getvalue())


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
    """``biogpu export RUN --to neuroml``: the run's best parameters as an ionChannelKS."""
    from app.sims.channel.export import _safe_name
    from app.sims.common.export import load_results, load_run
    from app.sims.common.output import save_text
    cfg = load_run(folder)
    model, results = cfg.model_(), load_results(folder)
    channel_id = _safe_name(cfg.name or model.name, "fitted_channel")
    save_text(out, to_neuroml(model, results["best_params"], channel_id, notes=f"Run: {folder.name}."))
    validate(str(out))
    return [out]
