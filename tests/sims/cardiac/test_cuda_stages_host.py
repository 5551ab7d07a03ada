"""The CUDA engine's unsplit fixed step (the one-stage kernel ``stage0``: the cell model and the
operator row in one pass) without a GPU, on the host stand-ins of :mod:`.host_cuda`: RLFE on a
sheet with a parameter region (two parameters per cell) in the engine's node order (int16 row
offsets) and in the file's (int32 indices), against the NumPy engine."""

import shutil

import numpy as np
import pytest

from app.sims.cardiac import cuda as cuda_engine
from app.sims.cardiac.engine import CpuTissue, Problem
from app.sims.cardiac.node_order import NodeOrder

from .helpers import config
from .host_cuda import assert_same_run

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="no host C++ compiler")

SHEET = ("model: {file: beeler_reuter_model_1977, regions: [{kind: rect, x1: 0.35, parameters: "
         "{slow_inward_current.g_s: 0.0018, time_independent_outward_current.G_K1: 0.005}}]}\n"
         "mesh: {kind: sheet, nx: 7, ny: 3, dx_mm: 0.1}\n"
         "protocol: {t_end: 6.0, stimuli: [{start: 0.5, duration: 2.0, amplitude: -100, "
         "region: {kind: rect, x1: 0.15}}]}\n"
         "solver: {method: rlfe, dt: 0.02, precision: float64}\n"
         "output: {random_probes: 0, probe_cells: [0, 3, 20], dt_save: 0.2}\n")


def run_to_end(engine):
    while not engine.finished:
        engine.advance(97)
    return engine


@pytest.mark.parametrize("row16", [True, False])
def test_cuda_unsplit_rlfe_steps_match_the_numpy_engine(host_pycuda, monkeypatch, row16):
    """300 steps of 0.02 ms, V kept every 0.5 ms, the parameter field steered after 150: the
    same probe times and V, readouts, end states and activation times as the NumPy engine, to float64 roundings (the same arithmetic
    in another order of operations; measured: V 7e-15 mV, states 3e-17, activation times
    equal)."""
    if not row16:
        monkeypatch.setattr(cuda_engine, "device_order", lambda neighbours: NodeOrder.identity(len(neighbours)))
    cuda = cuda_engine.CudaTissue(Problem.from_config(config(SHEET)))
    assert not cuda.split and not cuda.fused and len(cuda.stages) == 1
    assert cuda.order.row16 == row16 and cuda.order.is_identity != row16
    cpu = CpuTissue(Problem.from_config(config(SHEET)))
    assert cuda.p.varying == cpu.p.varying and len(cpu.p.varying) == 2
    grids = [engine.keep_voltage(0.5) for engine in (cuda, cpu)]
    for engine in (cuda, cpu):      # steering half-way: g_s doubled in the far column's cells
        engine.advance(150)
        field = engine.p.param_field.copy()
        field[engine.p.varying[0], 6::7] *= 2
        engine.set_tissue(engine.p.mesh.inv_d2, field)
    run_to_end(cuda), run_to_end(cpu)
    assert cuda.steps_accepted == cpu.steps_accepted == 300
    assert np.isfinite(cpu.activation()["activation_time"]).all()
    assert_same_run(cuda, cpu)
    kept, expected = grids[0].take(), grids[1].take()
    assert [t for t, _ in kept] == [t for t, _ in expected] and len(kept) == 12
    np.testing.assert_allclose(np.array([v for _, v in kept]), np.array([v for _, v in expected]), atol=1e-11)
