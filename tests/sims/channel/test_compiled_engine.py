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


def test_scores_do_not_depend_on_the_threads_the_chunks_or_the_batch(monkeypatch):
    import numba
    from app.compute.cpu_threads import threads
    cfg = preset(dt=0.5)
    m = model("model-b")
    protocol = cfg.protocol()
    rng = np.random.default_rng(4)
    params = m.lower + (m.upper - m.lower) * rng.random((2 * compiled.LANES + 22, m.n_params))
    target = cpu.simulate(m, protocol, params[:1])[0]
    with threads(1):
        whole, _ = compiled.evaluate(m, protocol, params, target)
    for k in (1, 5, 9):                   # narrower blocks for small batches: the same numbers
        np.testing.assert_array_equal(compiled.evaluate(m, protocol, params[:k], target)[0], whole[:k])
    monkeypatch.setattr(compiled, "CHUNK", compiled.LANES)     # 3 blocks, one a chunk
    with threads(min(2, numba.config.NUMBA_NUM_THREADS)):
        chunked, _ = compiled.evaluate(m, protocol, params, target)
    np.testing.assert_array_equal(chunked, whole)


def test_compiled_rates_and_q_equal_the_reference_printer_at_singular_points_and_nan():
    """The generated q_into against ChannelModel.q_matrix: the removable singularity at
    v = -40 (taken at v + SINGULAR_DV), min/max of a NaN (NumPy's fmin/fmax ignore it), the
    clamp to [0, RATE_MAX] and a NaN rate (sqrt of a negative) that fails the individual."""
    from app.sims.channel.model import RATE_MAX, ChannelSpec, ParameterSpec, compile_model
    spec = ChannelSpec(states=["C", "O", "I"], open_states=["O"],
                       parameters=[ParameterSpec("a", -1.0, 1.0), ParameterSpec("b", 0.0, 1e5),
                                   ParameterSpec("gmax", 0.0, 10.0)],
                       rates=["x = (v + 40) / (1 - exp(-(v + 40) / 10))",
                              "k12 = b * x", "k21 = max(0.0 / (v + 40), 0.5) + min(sqrt(a), 2)",
                              "k23 = where(v > 0, b * exp(v), -1)", "k32 = 0.1", "k31 = sqrt(a)"])
    m = compile_model(spec)
    params = np.array([[0.5, 3.0, 1.0], [-0.5, 3.0, 1.0], [0.5, 1e5, 1.0], [0.0, 0.0, 1.0]])
    volts = np.array([-40.0, -39.0, 0.0, 30.0, 1e3])
    module = compiled.model_module(m)
    r, shifted = np.empty(len(m.rate_defs)), np.empty(len(m.rate_defs))
    got = np.empty((len(volts), len(params), 3, 3))
    for i in range(len(params)):
        q = np.empty((len(volts), 3, 3))
        for k, v in enumerate(volts):
            module.q_into(params, i, v, r, shifted, q, k)
        got[:, i] = q
    np.testing.assert_allclose(got, m.q_matrix(params, volts), rtol=1e-14, atol=0)
    finite = np.isfinite(got).all(axis=(2, 3))          # (volts, rows)
    assert finite[:4, [0, 2, 3]].all() and not finite[:, 1].any()     # row 1: sqrt(-0.5)
    assert not finite[4, 0] and got[3, 2, 2, 1] == RATE_MAX           # exp(1000) fails, clamp


@pytest.mark.parametrize("size, n_params", [(64, 9), (7, 5), (2, 1)])
def test_compiled_ga_operators_make_the_numpy_operators_decisions(size, n_params):
    """Same Philox words, same tournaments, crossover points and mutations: equal populations
    (ties in the scores, an odd population, probabilities 0 and 1, creep)."""
    from app.sims.channel import ga, ga_compiled
    rng = np.random.default_rng(size)
    lower, upper = -rng.random(n_params), 1 + rng.random(n_params)
    population = ga.initial_population(3, size, lower, upper)
    scores = rng.random(size)
    scores[::3] = scores[1]
    for settings in [(0.5, 0.2, 0.05, 0.5), (1.0, 1.0, 0.1, 1.0), (0.0, 0.0, 0.0, 0.0), (0.1, 0.01, 0.0, 0.0)]:
        for generation in (0, 11):
            expected = ga.breed(population, scores, 1, generation, 2**40 + 9, lower, upper, *settings)
            got = ga_compiled.breed(population, scores, 1, generation, 2**40 + 9, lower, upper, *settings)
            np.testing.assert_array_equal(got, expected)
