"""The compiled (numba) channel engine against the NumPy reference.

Same float64 numerics per individual; the sample loop applies exp(Q dt) step by step where the
reference doubles blocks, so chi^2 agrees to accumulated float64 rounding: 12,500 dependent
steps of ~1e-16 each (fastmath contraction included) bound the relative difference near 1e-12;
the tolerance is 1e-10.
"""

import numpy as np
import pytest

from app.sims.channel import compiled, cpu
from app.sims.channel.compiled import CompiledGA
from app.sims.channel.engine import CpuGA
from app.sims.channel.simulation import ChannelSimulation
from tests.sims.channel.helpers import model, preset


@pytest.mark.parametrize("name", ["model-a", "model-b", "model-c", "hh-potassium"])
def test_chi2_and_currents_agree_with_reference(name):
    cfg = preset(dt=0.5)
    m = model(name)
    protocol = cfg.protocol()
    rng = np.random.default_rng(3)
    params = m.lower + (m.upper - m.lower) * rng.random((40, m.n_params))
    target = cpu.simulate(m, protocol, params[:1])[0] + rng.normal(0, 1.0, protocol.n_points)
    scores, traces = compiled.evaluate(m, protocol, params, target, keep_traces=True)
    reference = cpu.simulate(m, protocol, params)
    np.testing.assert_allclose(scores, cpu.chi2(reference, target), rtol=1e-10)
    np.testing.assert_allclose(traces, reference, rtol=0, atol=1e-10 * np.abs(reference).max())


def test_ga_on_cpu_backend_makes_the_reference_decisions():
    cfg = preset(dt=0.5, population=64, generations=3, seed=5)
    fast = ChannelSimulation.from_config(cfg, "cpu")
    ref = ChannelSimulation.from_config(cfg, "cpu-reference")
    assert isinstance(fast.engine, CompiledGA) and type(ref.engine) is CpuGA
    for _ in range(3):
        fast.advance()
        ref.advance()
    np.testing.assert_allclose(fast.best_history, ref.best_history, rtol=1e-10)
    np.testing.assert_array_equal(fast.engine.state()["population"], ref.engine.state()["population"])
    assert fast.results()[1]["compile_seconds"] >= 0


def test_chunks_scored_while_the_next_chunks_rates_are_evaluated_give_the_same_scores(monkeypatch):
    cfg = preset(dt=0.5)
    m = model("model-b")
    protocol = cfg.protocol()
    rng = np.random.default_rng(4)
    params = m.lower + (m.upper - m.lower) * rng.random((100, m.n_params))
    target = cpu.simulate(m, protocol, params[:1])[0]
    whole, _ = compiled.evaluate(m, protocol, params, target)
    monkeypatch.setattr(compiled, "CHUNK", 32)          # 100 individuals in chunks of 16
    chunked, _ = compiled.evaluate(m, protocol, params, target)
    np.testing.assert_array_equal(chunked, whole)

