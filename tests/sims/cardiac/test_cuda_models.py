"""Every shipped model on the CUDA engine (gpu marker): the single-cell preset in full (ten
beats at 1 Hz; Noble's spontaneous beat) against the CVODE reference, and a sheet against
the compiled CPU engine."""

import numpy as np
import pytest

from app.sims.cardiac.model import load_model

from .helpers import run
from .test_model import TEN
from .test_references import preset, reference

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("name", TEN)
def test_single_cell_preset_on_cuda_matches_cvode(cuda_context, name):
    """The whole preset on the device, float64; the metrics come from the probe trace (every
    accepted step), so max dV/dt is a difference quotient: 5 %."""
    from app.sims.cardiac.simulation import CardiacSimulation
    sim = CardiacSimulation(preset(name), "cuda")
    sim.engine.run_to_end()
    _, s = sim.results()
    sim.close()
    ref = reference(name)["last"]
    assert abs(s["apd90_ms"] - ref["apd90_ms"]) < 0.01 * ref["apd90_ms"]
    assert abs(s["peak_mV"] - ref["peak_mV"]) < 1.0
    assert abs(s["rest_mV"] - ref["rest_mV"]) < 0.5
    assert abs(s["max_dvdt"] - ref["max_dvdt"]) < 0.05 * abs(ref["max_dvdt"])


def sheet(name: str, precision: str) -> str:
    stim = load_model(name).imported.default_stimulus
    # 2x the cell's stimulus excites every sheet but Nygren's (4x); 4x over-drives O'Hara-Rudy's
    # stimulated cells so that the wave fails to leave them
    amplitude = (4 if name.startswith("nygren") else 2) * (stim.get("amplitude") or -20.0)
    duration = max(1.0, stim.get("duration", 2.0))
    return (f"model: {{file: {name}}}\n"
            "mesh: {kind: sheet, nx: 24, ny: 4, dx_mm: 0.2}\n"
            f"protocol: {{t_end: 30, stimuli: [{{start: 1, duration: {duration}, amplitude: {amplitude}, "
            "region: {kind: rect, x1: 0.3}}]}\n"
            f"solver: {{method: rlfe, dt: 0.01, precision: {precision}}}\n"
            "output: {random_probes: 4, probe_cells: [0, 95], dt_save: 0.5}\n")


@pytest.mark.parametrize("name", TEN)
def test_sheet_on_cuda_matches_cpu(cuda_context, name):
    """A wave crosses a 24x4 sheet; float64 on the device gives the CPU engine's activation
    times and voltages to rounding, float32 within 0.1 ms."""
    a_cpu, s_cpu = run(sheet(name, "float64"), "cpu")
    a_gpu, _ = run(sheet(name, "float64"), "cuda")
    a_32, _ = run(sheet(name, "float32"), "cuda")
    act = a_cpu["activation_time"]
    assert np.isfinite(act).all() and act.max() > act.min() + 1.0, "the wave crossed the sheet"
    np.testing.assert_allclose(a_gpu["activation_time"], act, atol=1e-4)
    np.testing.assert_allclose(a_gpu["V_final"], a_cpu["V_final"], atol=1e-4)
    assert np.max(np.abs(a_32["activation_time"] - act)) < 0.1
