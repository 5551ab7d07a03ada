"""An independent reference: the same model integrated by an implicit ODE solver (scipy's
Radau at tight tolerances) instead of matrix exponentials. Tests compare the engines' exact
propagation with it, and it generates "recorded" traces from a different integrator for the
fitting tests (what a user's NEURON or Myokit traces are to us).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Callable

import numpy as np

from app.compute.codegen import to_python
from app.sims.channel.model import RATE_MAX, ChannelModel
from app.sims.channel.numerics import steady_state
from app.sims.channel.protocol import Protocol


def q_function(model: ChannelModel, params: np.ndarray) -> Callable[[float], np.ndarray]:
    """Q(v) for one parameter row, from the rate trees printed as Python (no NumPy per call)."""
    names = {n: f"p[{k}]" for k, n in enumerate(model.param_names)}
    names["v"] = "v"
    lines = ["def rates(p, v):", "    r = {}"]
    for name, tree in model.rate_defs:
        lines.append(f"    r[{name!r}] = {to_python(tree, lambda n: names.get(n) or f'r[{n!r}]')}")
    lines.append("    return r")
    scope: dict = {"math": math}
    exec(compile("\n".join(lines), "<channel rates>", "exec"), scope)   # printed code only
    rates, row, n = scope["rates"], [float(x) for x in params], model.n_states

    def q(v: float) -> np.ndarray:
        r = rates(row, float(v))
        out = np.zeros((n, n))
        for i, j, name in model.transitions:
            k = min(max(r[name], 0.0), RATE_MAX)
            out[j, i] += k
            out[i, i] -= k
        return out
    return q


def ivp_currents(model: ChannelModel, protocol: Protocol, params: np.ndarray, rtol: float = 1e-11,
                 atol: float = 1e-13, method: str = "Radau") -> np.ndarray:
    """Currents (n_points,) of one parameter row by ``scipy.integrate.solve_ivp``, one solve
    per op (the voltage has kinks at op ends), sampled where the protocol records."""
    from scipy.integrate import solve_ivp

    params = np.asarray(params, float)
    q = q_function(model, params)
    g = params[model.conductance]
    out = []
    for sweep in protocol.sweeps:
        y = steady_state(q(sweep.holding)[None])[0]
        start = 0.0
        for op in sweep.ops:
            length = op.tau * op.n
            qt = _op_generator(q, op.v, op.v_end, start, length)
            times = start + op.tau * np.arange(1, op.n + 1) if op.record else np.array([start + length])
            sol = solve_ivp(lambda t, x, qt=qt: qt(t) @ x, (start, start + length), y, method=method,
                            rtol=rtol, atol=atol, jac=lambda t, x, qt=qt: qt(t), t_eval=times)
            y = sol.y[:, -1]
            if op.record:
                out.append(g * sol.y[model.open_mask].sum(axis=0) * (op.step_voltages() - model.e_rev))
            start += length
    return np.concatenate(out)


def _op_generator(q, v0: float, v1: float, start: float, length: float) -> Callable[[float], np.ndarray]:
    if v0 == v1:
        fixed = q(v0)
        return lambda t: fixed
    return lambda t: q(v0 + (v1 - v0) * (t - start) / length)


def write_generated_case(folder: Path, act_window: float = 150.0, tail_window: float = 55.72,
                         increment: float = 10.0) -> tuple[str, ChannelModel]:
    """The issue's test case: a known two-state K channel (Model A's true values) on the
    Gurkiewicz & Korngreen (2007) families, activation sampled at 0.1 ms and deactivation at
    0.02 ms, integrated by scipy's Radau (a different integrator from our exponentials) and
    written as recorded: activation as a CSV with its own time column, deactivation as an ABF1
    file (int16 samples) covering the whole sweep. Returns (config text, model).
    Smaller windows and coarser steps give the scaled-down CI case."""
    import pyabf.abfWriter

    from app.sims.channel.data import save_csv_traces
    from app.sims.channel.model import ChannelSpec, compile_model
    from app.sims.channel.protocol import ProtocolSpec, Segment, StepRange, compile_protocols
    from app.sims.common.config import build, load_yaml
    from app.sims.common.simulation import RESOURCES

    model_file = RESOURCES / "models" / "channel" / "model-a.yaml"
    doc = load_yaml(model_file)
    m = compile_model(build(ChannelSpec, doc.data, doc), doc, ())
    folder = Path(folder)
    activation = ProtocolSpec("activation", -110.0, [Segment("step", act_window, True)],
                              steps=StepRange(-40.0, 60.0, increment), dt=0.1)
    full_tail = ProtocolSpec("deactivation", -110.0, [Segment(80.0, 20.0, True), Segment("step", 0.18, True),
                                                       Segment("step", tail_window, True)],
                             steps=StepRange(-120.0, -10.0, increment), dt=0.02)
    act = compile_protocols([activation])
    tail = compile_protocols([full_tail])
    save_csv_traces(folder / "activation.csv", act, ivp_currents(m, act, m.true_values, rtol=1e-10, atol=1e-12))
    currents = ivp_currents(m, tail, m.true_values, rtol=1e-10, atol=1e-12)
    sweeps = currents.reshape(len(tail.sweeps), -1)
    sweeps = np.concatenate([np.zeros((len(sweeps), 1)), sweeps], axis=1)    # the sample at t = 0
    pyabf.abfWriter.writeABF1(sweeps.astype(np.float32), str(folder / "deactivation.abf"), 50_000.0)
    text = f"""domain: channel
name: generated two-state K channel
model: {model_file}
protocols:
  - name: activation
    holding: -110
    dt: 0.1
    segments: [{{voltage: step, duration: {act_window}, record: true}}]
    steps: {{start: -40, stop: 60, increment: {increment}}}
  - name: deactivation
    holding: -110
    dt: 0.02
    segments:
      - {{voltage: 80, duration: 20}}
      - {{voltage: step, duration: 0.18}}
      - {{voltage: step, duration: {tail_window}, record: true}}
    steps: {{start: -120, stop: -10, increment: {increment}}}
data:
  source: recordings
  families:
    - {{family: activation, path: activation.csv}}
    - {{family: deactivation, path: deactivation.abf}}
ga: {{population: 64, generations: 100, seed: 3}}
fit: {{optimizer: cmaes, refine: lm}}
"""
    return text, m
