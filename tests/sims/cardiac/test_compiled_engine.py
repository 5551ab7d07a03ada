"""The compiled (numba) cardiac engine against the NumPy reference.

Same solver code; only the cell model is evaluated per cell by compiled code printed from the same
equation trees. In float64 the two agree to rounding (math vs NumPy exp/log differ by an ulp at
most): activation times within 1e-9 ms, voltages within 1e-8 mV after a full upstroke.
"""

import numpy as np
import pytest

from app.sims.cardiac.compiled import CompiledTissue
from app.sims.cardiac.engine import CpuTissue
from app.sims.cardiac.simulation import CardiacSimulation
from tests.sims.cardiac.helpers import cable, config


def finished(text: str, backend: str):
    sim = CardiacSimulation(config(text), backend)
    while not sim.finished:
        sim.advance()
    return sim


@pytest.mark.parametrize("method,fused", [("rlfe", True), ("midpoint", False)])
def test_compiled_cable_matches_reference_in_float64(method, fused):
    """rlfe runs the fused model + Rush-Larsen update; midpoint the NumPy solver around the model."""
    text = cable(0.1, t_end=8.0, method=method)
    fast, ref = finished(text, "cpu"), finished(text, "cpu-reference")
    assert isinstance(fast.engine, CompiledTissue) and type(ref.engine) is CpuTissue
    assert fast.engine._fused is fused
    a, _ = fast.results()
    b, _ = ref.results()
    assert np.isfinite(b["activation_time"]).sum() > 10          # the wave crossed the cable
    np.testing.assert_allclose(a["activation_time"], b["activation_time"], rtol=0, atol=1e-9)
    np.testing.assert_allclose(a["V_final"], b["V_final"], rtol=0, atol=1e-8)
    np.testing.assert_allclose(a["probe_V"], b["probe_V"], rtol=0, atol=1e-8)


def test_compiled_rates_match_reference_on_random_states():
    sim = CardiacSimulation(config(cable(0.5, t_end=1.0)), "cpu")
    engine, model, params = sim.engine, sim.problem.model, sim.problem.params
    rng = np.random.default_rng(4)
    y = model.initial_state()[:, None] * rng.uniform(0.8, 1.2, (model.n_states, 12))
    y[0] = rng.uniform(-90.0, 40.0, 12)                           # voltages across the range
    stim = rng.uniform(-40.0, 0.0, 12)
    fast = tuple(np.empty((o.shape[0], 12)) for o in engine._out)
    engine._rates(y, stim, *fast)
    ref = model.rates(y, stim, params)
    for got, want in zip(fast, ref):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
