"""The exported NMODL and Myokit models evaluate like ours."""

import math
import re

import numpy as np
import pytest

from app.sims.channel import cpu
from app.sims.channel.export import to_myokit, to_nmodl, to_yaml
from app.sims.channel.model import ChannelSpec, ParameterSpec, compile_model
from app.sims.channel.protocol import ProtocolSpec, Segment, compile_protocols
from app.sims.common.config import ConfigError, build, parse_yaml

from .helpers import model

HELPERS = ChannelSpec(   # every printer path: pow, min, max, where, expm1, abs, log, sqrt
    states=["C", "I", "O"], open_states=["O"],
    parameters=[ParameterSpec("a", 0.0, 1.0, 0.2), ParameterSpec("z", 0.0, 1.0, 0.04),
                ParameterSpec("gmax", 0.0, 10.0, 3.0)],
    rates=["half = 0.5*a", "k13 = min(a*exp(z*v), 3) + pow(abs(v/100), 1.5)",
           "k31 = max(half*exp(-z*v), 0.01) * where(v < -30, 2, 1)",
           "k12 = 0.1*v/expm1(v/10 + 1e-3) + sqrt(a) * log(2 + a)", "k21 = 0.05"])

TOKENS = re.compile(r"\s*(?:(\d+\.?\d*(?:[eE][+-]?\d+)?)|([A-Za-z_]\w*)|(\^|[-+*/(),]))")


def checked_python(expr: str, names: set[str]) -> str:
    """An NMODL expression as Python, token by token: numbers, known names, the NMODL
    functions we emit, operators; anything else fails the test."""
    out, pos = [], 0
    allowed = names | {"exp", "log", "sqrt", "fabs", "bgmin", "bgmax", "bgwhere", "bglt", "bgle",
                       "bggt", "bgge", "bgeq", "bgexpm1"}
    while pos < len(expr):
        m = TOKENS.match(expr, pos)
        assert m and m.end() > pos, f"unexpected text at {pos}: {expr[pos:pos + 20]!r}"
        num, name, op = m.groups()
        if name is not None:
            assert name in allowed, f"unknown name {name}"
        out.append(num or name or ("**" if op == "^" else op))
        pos = m.end()
    return " ".join(out)


NMODL_FUNCTIONS = {"exp": math.exp, "log": math.log, "sqrt": math.sqrt, "fabs": abs,
                   "bgmin": min, "bgmax": max, "bgwhere": lambda c, a, b: a if c != 0 else b,
                   "bglt": lambda a, b: float(a < b), "bgle": lambda a, b: float(a <= b),
                   "bggt": lambda a, b: float(a > b), "bgge": lambda a, b: float(a >= b),
                   "bgeq": lambda a, b: float(a == b), "bgexpm1": math.expm1}


def nmodl_rates(text: str, v: float) -> dict[str, float]:
    """Evaluate the PARAMETER block and PROCEDURE rates of an emitted .mod at v."""
    params = dict(re.findall(r"^\s+(\w+) = ([-0-9.e+]+)(?: \(mV\))?$",
                             text.split("PARAMETER {")[1].split("}")[0], re.M))
    env = {k: float(x) for k, x in params.items()} | {"v": v}
    body = text.split("PROCEDURE rates(v (mV)) {")[1].split("\n}")[0]
    for name, expr in re.findall(r"^\s+(\w+) = (.+)$", body, re.M):
        env[name] = eval(checked_python(expr, set(env)), {"__builtins__": {}}, {**NMODL_FUNCTIONS, **env})
    return env


@pytest.mark.parametrize("name", ["model-a", "model-b", "model-c", "hh-potassium", "helpers"])
def test_nmodl_rates_and_scheme_evaluate_like_ours(name):
    m = compile_model(HELPERS) if name == "helpers" else model(name)
    values = m.true_values
    text = to_nmodl(m, values, suffix=name)
    pairs = re.findall(r"~ (\w+) <-> (\w+) \((\w+), (\w+)\)", text)
    index = {s: k for k, s in enumerate(m.states)}
    for v in (-117.3, -80.0, -33.3, 0.7, 42.0):       # away from HH's removable singularity
        ours = m.rate_values(values[None], v)
        theirs = nmodl_rates(text, v)
        for rate, _tree in m.rate_defs:
            assert theirs[rate] == pytest.approx(float(ours[rate][0]), rel=1e-12), (rate, v)
        q = np.zeros((m.n_states, m.n_states))
        for a, b, forward, backward in pairs:
            for (i, j, k) in ((index[a], index[b], forward), (index[b], index[a], backward)):
                rate = 0.0 if k == "0" else theirs[k]
                q[j, i] += rate
                q[i, i] -= rate
        np.testing.assert_allclose(q, m.q_matrix(values[None], v)[0], rtol=1e-12, atol=1e-300)
    assert f"CONSERVE {' + '.join(m.states)} = 1" in text


def test_myokit_model_simulates_like_ours():
    myokit = pytest.importorskip("myokit")
    from myokit.lib import markov
    m = model("model-b")
    values = m.true_values * np.linspace(0.8, 1.2, m.n_params)
    mm = myokit.parse_model(to_myokit(m, values))
    linear = markov.LinearModel.from_component(mm.get("channel"), current="channel.I_ch", vm="membrane.V")
    sim = markov.AnalyticalSimulation(linear)
    sim.set_membrane_potential(20.0)
    protocol = compile_protocols([ProtocolSpec("step", -80.0, [Segment(20.0, 20.0, True)], dt=0.1)])
    times = protocol.sweeps[0].times()
    log = sim.run(20.0 + 1e-9, log_times=times)
    ours = cpu.simulate(m, protocol, values[None])[0]
    np.testing.assert_allclose(np.array(log["channel.I_ch"]), ours, rtol=1e-9, atol=1e-9 * np.abs(ours).max())
    for v in (-100.0, 0.0, 35.0):
        mm.get("engine.pace").set_rhs(v)
        for name in ("k12", "k21", "k23", "k32"):
            assert mm.get(f"channel.{name}").eval() == pytest.approx(float(m.rate_values(values[None], v)[name][0]),
                                                                      rel=1e-12)
    helpers = myokit.parse_model(to_myokit(compile_model(HELPERS), compile_model(HELPERS).true_values))
    hm = compile_model(HELPERS)
    for v in (-50.0, 12.0):
        helpers.get("engine.pace").set_rhs(v)
        for name, _ in hm.rate_defs:
            assert helpers.get(f"channel.{name}").eval() == pytest.approx(
                float(hm.rate_values(hm.true_values[None], v)[name][0]), rel=1e-9)


def test_yaml_round_trip_and_reserved_names():
    m = model("model-a")
    from tests.sims.channel.helpers import MODELS
    from app.sims.common.config import load_yaml
    doc = load_yaml(MODELS / "model-a.yaml")
    spec = build(ChannelSpec, doc.data, doc)
    fitted = np.array([0.06, 0.04, 0.05, 0.05, 4.0])
    text = to_yaml(spec, fitted, chi2=1.5)
    back = parse_yaml(text, "<export>")
    again = compile_model(build(ChannelSpec, back.data, back))
    np.testing.assert_array_equal(again.true_values, fitted)
    assert again.rate_defs == m.rate_defs
    clash = compile_model(ChannelSpec(states=["C", "O"], open_states=["O"],
                                      parameters=[ParameterSpec("area", 0, 1, 0.5), ParameterSpec("gmax", 0, 1, 1)],
                                      rates=["k12 = area", "k21 = 1"]))
    with pytest.raises(ConfigError, match="'area' is reserved"):
        to_nmodl(clash, clash.true_values)
