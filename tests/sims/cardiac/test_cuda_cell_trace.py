"""A single cell on CUDA (gpu marker) writes its trace (``cell_t``, every state in
``cell_states``, ``cell_dVdt``) and the beat's metrics, like the CPU engines."""

import numpy as np
import pytest

from .test_references import first_beat, preset, reference

pytestmark = pytest.mark.gpu


def results(backend, cfg):
    """The run's arrays and summary."""
    from app.sims.cardiac.simulation import CardiacSimulation
    sim = CardiacSimulation(cfg, backend)
    while not sim.finished:
        sim.advance()
    out = sim.results()
    sim.close()
    return out


@pytest.mark.parametrize("name", ["courtemanche_ramirez_nattel_1998", "ohara_rudy_2011_endo"])
def test_cuda_single_cell_writes_every_state_and_the_beat(cuda_context, name):
    from app.sims.cardiac.config import for_backend
    cfg = for_backend(first_beat(preset(name)), "cuda")   # auto on CUDA: RODAS4 in float64, on both engines
    arrays, s = results("cuda", cfg)
    t, ys = arrays["cell_t"], arrays["cell_states"]
    from app.sims.cardiac.model import load_model
    assert ys.shape == (len(t), load_model(name).n_states) and np.all(np.isfinite(ys))
    np.testing.assert_array_equal(ys[:, 0], arrays["probe_V"][:, 0])
    assert len(arrays["cell_dVdt"]) == len(t) and np.all(np.diff(t) > 0)
    ref = reference(name)["beats"][0]
    assert abs(s["apd90_ms"] - ref["apd90_ms"]) < 0.01 * ref["apd90_ms"]
    assert abs(s["peak_mV"] - ref["peak_mV"]) < 1.0 and abs(s["rest_mV"] - ref["rest_mV"]) < 0.5
    cpu, _ = results("cpu", cfg)                 # the same method on the CPU: the same states at the end
    np.testing.assert_allclose(ys[-1], cpu["cell_states"][-1], rtol=1e-3, atol=1e-6)


def test_cuda_fixed_step_single_cell_writes_every_state(cuda_context):
    """Rush-Larsen forward Euler (the tissue solver) on one cell records every state at each
    saved step, as the adaptive methods do: the same trace as the CPU engine's, and its beat."""
    from dataclasses import replace

    from app.sims.cardiac.model import load_model
    name = "courtemanche_ramirez_nattel_1998"
    cfg = first_beat(preset(name))
    cfg = replace(cfg, solver=replace(cfg.solver, method="rlfe", dt=0.01, precision="float64"))
    arrays, s = results("cuda", cfg)
    t, ys = arrays["cell_t"], arrays["cell_states"]
    assert ys.shape == (len(t), load_model(name).n_states) and np.all(np.isfinite(ys))
    np.testing.assert_array_equal(ys[:, 0], arrays["probe_V"][:, 0])
    np.testing.assert_allclose(np.diff(t), 0.01, rtol=1e-9)        # dt_save 0: every step
    ref = reference(name)["beats"][0]
    assert abs(s["apd90_ms"] - ref["apd90_ms"]) < 0.02 * ref["apd90_ms"]
    cpu, _ = results("cpu", cfg)
    assert cpu["cell_states"].shape == ys.shape
    np.testing.assert_allclose(ys, cpu["cell_states"], rtol=1e-6, atol=1e-9)
