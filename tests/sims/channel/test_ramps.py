"""Ramps (piecewise-linear voltage) against a fine implicit integration, and the NaN rules."""

import numpy as np
import pytest

from app.sims.channel import compiled, cpu
from app.sims.channel.reference import ivp_currents
from app.sims.channel.protocol import ProtocolSpec, Segment, compile_protocols

from .helpers import model

RAMPS = [ProtocolSpec(name="ramps", holding=-100.0, dt=0.1, segments=[
    Segment(-100.0, 5.0), Segment(-100.0, 3.05, to=-60.0),           # unrecorded ramp, 31 steps
    Segment(-60.0, 20.0, True, to=40.0), Segment(40.0, 10.0, True, to=-120.0),
    Segment(-120.0, 5.0, True)])]


def test_ramps_match_a_fine_implicit_integration():
    m = model("model-b")
    protocol = compile_protocols(RAMPS)
    assert protocol.has_ramps() and protocol.n_points == 200 + 100 + 50
    pytest.importorskip("scipy")
    reference = ivp_currents(m, protocol, m.true_values, rtol=1e-12, atol=1e-14)
    got = cpu.simulate(m, protocol, m.true_values[None])[0]
    # Magnus-4 at dt = 0.1 ms: local error O(dt^5 |dQ/dt|^2); measured ~1e-9 of the scale,
    # Radau's own error at rtol 1e-12 is below that
    assert np.abs(got - reference).max() < 1e-7 * np.abs(reference).max()


def test_compiled_engine_propagates_ramps_as_the_reference():
    m = model("model-b")
    protocol = compile_protocols(RAMPS)
    rng = np.random.default_rng(1)
    params = m.lower + (m.upper - m.lower) * rng.uniform(0.02, 0.3, (20, m.n_params))
    reference = cpu.simulate(m, protocol, params)
    weights = rng.uniform(0, 2, protocol.n_points)
    target = reference[0] + rng.normal(0, 1, protocol.n_points)
    scores, traces = compiled.evaluate(m, protocol, params, target, keep_traces=True, weights=weights)
    np.testing.assert_allclose(traces, reference, atol=1e-10 * np.abs(reference).max())
    np.testing.assert_allclose(scores, cpu.chi2(reference, target, weights), rtol=1e-10)
    assert scores[0] == pytest.approx(np.sum(weights * (target - reference[0]) ** 2) / weights.sum())


def test_a_nan_rate_fails_the_individual_and_a_dead_rate_names_itself():
    from app.sims.channel.model import ChannelSpec, ParameterSpec, compile_model, undefined_rate
    spec = ChannelSpec(states=["C", "O"], open_states=["O"],
                       parameters=[ParameterSpec("a", -1.0, 1.0), ParameterSpec("gmax", 0.0, 10.0)],
                       rates=["k12 = sqrt(a)*exp(v/50)", "k21 = 0.1"])
    m = compile_model(spec)
    protocol = compile_protocols(RAMPS)
    params = np.array([[0.2, 5.0], [-0.2, 5.0]])      # sqrt of a negative: NaN at every v
    scores, _ = compiled.evaluate(m, protocol, params, np.zeros(protocol.n_points))
    assert scores[1] == cpu.BAD_SCORE and scores[0] < cpu.BAD_SCORE
    assert cpu.evaluate(m, protocol, params, np.zeros(protocol.n_points))[1] == cpu.BAD_SCORE
    assert undefined_rate(m, params, [-100.0, 40.0]) is None      # fine: one row is valid
    dead = compile_model(ChannelSpec(states=["C", "O"], open_states=["O"],
                                     parameters=[ParameterSpec("a", 0.0, 1.0), ParameterSpec("gmax", 0.0, 10.0)],
                                     rates=["k12 = a*log(-v - 200)", "k21 = 0.1"]))
    assert undefined_rate(dead, params, [-100.0, 40.0]) == ("k12", -100.0)
