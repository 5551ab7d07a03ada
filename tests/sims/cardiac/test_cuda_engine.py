"""The CUDA engine against the NumPy engine (gpu marker: runs only where CUDA works)."""

import numpy as np
import pytest

from app.sims.cardiac.model import load_model

from .helpers import assert_outputs_close, run
from .test_model import TEN, random_states

pytestmark = pytest.mark.gpu


FLOAT32_CANCELS = pytest.mark.xfail(
    strict=True, reason="Mahajan-Shiferaw: one output (31) is a difference of nearly equal fluxes; "
                        "float32 keeps 0.27 of it at the 99.9 % point (H100, 2026-11-24): run it in float64")


@pytest.mark.parametrize("name,precision,rtol", [
    pytest.param(n, p, tol, marks=FLOAT32_CANCELS if (n, p) == ("mahajan_shiferaw_2008", "float32") else ())
    for p, tol in (("float64", 1e-9), ("float32", 2e-3)) for n in TEN])
def test_model_cuda_vs_numpy_on_random_states(cuda_context, name, precision, rtol):
    """The printed CUDA model against the NumPy program of the same tree, every output."""
    from app.sims.cardiac.cuda import cuda_rates
    m = load_model(name)
    y = random_states(4096, seed=11, model=m)
    y[m.n_nongating:] = np.clip(y[m.n_nongating:], 0, 1)
    ist = np.where(np.arange(4096) % 3 == 0, -20.0, 0.0)
    p = m.parameter_vector()
    ref = np.concatenate(m.rates(y, ist, p))
    got = np.concatenate(cuda_rates(m, y, ist, p, precision))
    assert_outputs_close(got, ref, rtol)


@pytest.mark.parametrize("name,precision,rtol", [
    (n, p, tol) for p, tol in (("float64", 1e-9), ("float32", 2e-3))
    for n in ("ohara_rudy_2011_endo", "maleckar_model_2009", "courtemanche_ramirez_nattel_1998")])
def test_diagonal_jacobian_cuda_vs_numpy_on_random_states(cuda_context, name, precision, rtol):
    """GRL1's model: the printed CUDA outputs and diagonal Jacobian against the NumPy program."""
    from app.sims.cardiac.cuda import cuda_rates
    m = load_model(name).with_jacobian()
    y = random_states(4096, seed=12, model=m)
    ist = np.where(np.arange(4096) % 3 == 0, -20.0, 0.0)
    p = m.parameter_vector()
    ref = m.rates(y, ist, p)
    got = list(cuda_rates(m, y, ist, p, precision))
    assert len(got) == 4
    if precision == "float32":
        # a steep sigmoid's derivative overflows exp() in float32 (CRN's release gate u:
        # exp(7.3e14·ΔFn), inf/inf) and gives NaN, which the GRL1 step takes as J = 0 (forward
        # Euler for that state, kernels/cardiac.cu); NumPy in float32 does the same. The finite
        # Jacobians are compared
        got[3] = np.where(np.isnan(got[3]), ref[3], got[3])
    assert_outputs_close(np.concatenate(got), np.concatenate(ref), rtol)


NYGREN = "model: {file: nygren_atrial_model_1998}\n"


def test_grl1_stiff_model_cuda_float32_matches_cpu(cuda_context):
    """Nygren 1998 at 0.1 ms, where RLFE blows up (intracellular Ca²⁺, |J| ≈ 22/ms): GRL1 in
    float32 on CUDA (the model in float32) against the compiled CPU engine (the model in
    float64, states rounded to float32) on a sheet: activation within 0.05 ms, V within 0.5 mV
    (the float32-vs-float64 bounds of test_rlfe_float32_close_to_float64)."""
    text = NYGREN + SHEET + "solver: {method: grl1, dt: 0.1, precision: float32}\n"
    a_cpu, s_cpu = run(text, "cpu")
    a_gpu, s_gpu = run(text, "cuda")
    assert s_cpu["finished"] and s_gpu["finished"]
    assert np.isfinite(a_cpu["activation_time"]).all()
    assert np.nanmax(np.abs(a_gpu["activation_time"] - a_cpu["activation_time"])) < 0.05
    assert np.max(np.abs(a_gpu["V_final"] - a_cpu["V_final"])) < 0.5


@pytest.mark.parametrize("precision,atol_ms,atol_mv,atol_apd", [("float64", 1e-4, 1e-5, 1e-3),
                                                                ("float32", 0.05, 0.5, 1.0)])
@pytest.mark.parametrize("tubule", [None, (10.0, 40.0)])
def test_grl1_blocks_cuda_matches_cpu(cuda_context, tmp_path, precision, atol_ms, atol_mv, atol_apd, tubule):
    """GRL1 on a strip of the synthetic cell whose repolarising current flows through a stiff
    chain C ⇌ O ⇌ I (with ``tubule``: and whose V is in a fast group with a t-tubular potential,
    the diffusion current in f_V), each block stepped together (the kernel's model_block_update,
    small_solve.cuh; V from the block for the neighbours' next step) against
    the compiled CPU engine over one beat (6,000 steps): in float64 within
    test_fixed_step_cuda_matches_cpu_in_float64's bounds (CUDA's exp and FMA against the CPU's),
    in float32 within test_grl1_stiff_model_cuda_float32_matches_cpu's, APD90 within 1 ms
    (0.4 %)."""
    from .synthetic import write_markov_model
    path = write_markov_model(tmp_path, tubule=tubule)
    text = (f"model: {{file: '{path}'}}\nmesh: {{kind: sheet, nx: 12, ny: 1, dx_mm: 0.1}}\n"
            "protocol: {t_end: 300.0, stimuli: [{start: 1, duration: 2, amplitude: -80, "
            "region: {kind: rect, x1: 0.35}}]}\n"
            f"solver: {{method: grl1, dt: 0.05, precision: {precision}}}\n")
    a_cpu, s_cpu = run(text, "cpu")
    a_gpu, s_gpu = run(text, "cuda")
    assert s_cpu["finished"] and s_gpu["finished"]
    assert np.isfinite(a_cpu["activation_time"]).all()
    np.testing.assert_allclose(a_gpu["activation_time"], a_cpu["activation_time"], rtol=0, atol=atol_ms)
    np.testing.assert_allclose(a_gpu["V_final"], a_cpu["V_final"], rtol=0, atol=atol_mv)
    np.testing.assert_allclose(a_gpu["apd90"], a_cpu["apd90"], rtol=0, atol=atol_apd)


SHEET = ("mesh: {kind: sheet, nx: 24, ny: 6, dx_mm: 0.2}\n"
         "protocol: {t_end: 40, stimuli: [{start: 1, duration: 2, amplitude: -40, region: {kind: rect, x1: 0.3}},"
         " {start: 20, duration: 2, amplitude: -40, region: {kind: cells, cells: [100]}}]}\n"
         "output: {random_probes: 6, probe_cells: [5, 70], dt_save: 0.5}\n")


@pytest.mark.parametrize("method,dt", [("rlfe", 0.02), ("grl1", 0.02), ("fe", 0.005), ("midpoint", 0.05),
                                       ("trapezoidal", 0.05)])
def test_fixed_step_cuda_matches_cpu_in_float64(cuda_context, method, dt):
    text = SHEET + f"solver: {{method: {method}, dt: {dt}, precision: float64}}\n"
    a_cpu, s_cpu = run(text, "cpu")
    a_gpu, s_gpu = run(text, "cuda")
    assert s_gpu["steps_accepted"] == s_cpu["steps_accepted"]
    np.testing.assert_allclose(a_gpu["probe_t"], a_cpu["probe_t"], atol=1e-4)
    np.testing.assert_allclose(a_gpu["probe_V"], a_cpu["probe_V"], atol=1e-4)
    np.testing.assert_allclose(a_gpu["V_final"], a_cpu["V_final"], atol=1e-6)
    np.testing.assert_allclose(a_gpu["activation_time"], a_cpu["activation_time"], atol=1e-4)


def test_rlfe_float32_close_to_float64(cuda_context):
    a64, _ = run(SHEET + "solver: {method: rlfe, dt: 0.02, precision: float64}\n", "cpu")
    a32, _ = run(SHEET + "solver: {method: rlfe, dt: 0.02, precision: float32}\n", "cuda")
    assert np.nanmax(np.abs(a32["activation_time"] - a64["activation_time"])) < 0.05
    assert np.max(np.abs(a32["V_final"] - a64["V_final"])) < 0.5


@pytest.mark.parametrize("method", ["te21", "bs32", "rkf45"])
def test_adaptive_cuda_matches_cpu_in_float64(cuda_context, method):
    text = SHEET + f"solver: {{method: {method}, dt: 0.01, at: 0.1, rt: 0.01, precision: float64}}\n"
    a_cpu, s_cpu = run(text, "cpu")
    a_gpu, s_gpu = run(text, "cuda")
    # same decisions step by step (float64 on both; the reductions are exact maxima)
    assert s_gpu["steps_accepted"] == s_cpu["steps_accepted"]
    assert s_gpu["steps_rejected"] == s_cpu["steps_rejected"]
    np.testing.assert_allclose(a_gpu["h"], a_cpu["h"], rtol=1e-4)   # history kept in float32 on the device
    # the same steps; V differs only by rounding (CUDA's exp/log and FMA contraction against the
    # CPU's), grown through the upstrokes (dV/dt ~ 100 mV/ms): bs32 measured 4.2e-5 mV on the H100.
    # Bound: 1e-3 of the absolute tolerance (0.1 mV), far below any error of the method
    np.testing.assert_allclose(a_gpu["V_final"], a_cpu["V_final"], atol=1e-4)
    np.testing.assert_allclose(a_gpu["probe_V"], a_cpu["probe_V"], atol=1e-4)


@pytest.mark.parametrize("method", ["bs32", "rkf45"])
def test_one_block_steps_match_a_launch_per_stage(cuda_context, monkeypatch, method):
    """A sheet whose 96 cells fit one block runs whole chunks of steps in one launch
    (``steps_one_block``): the same steps as a launch per stage and the same numbers to
    rounding (the two builds contract and order operations differently: 3.6e-15 mV measured on
    the H100), and the CPU engine's; a checkpoint taken mid-way resumes identically."""
    from app.sims.cardiac import cuda
    from app.sims.cardiac.simulation import CardiacSimulation

    from .helpers import config
    text = (SHEET.replace("ny: 6", "ny: 4").replace("cells: [100]", "cells: [60]")
            + f"solver: {{method: {method}, dt: 0.01, at: 0.1, rt: 0.01, precision: float64}}\n")
    fused, s_fused = run(text, "cuda")
    monkeypatch.setattr(cuda, "FUSED_MAX_CELLS", 0)
    staged, s_staged = run(text, "cuda")
    monkeypatch.undo()
    assert s_fused["steps_accepted"] == s_staged["steps_accepted"] > 100
    assert s_fused["steps_rejected"] == s_staged["steps_rejected"]
    for key in ("V_final", "probe_V", "activation_time"):
        np.testing.assert_allclose(fused[key], staged[key], rtol=0, atol=1e-9, err_msg=key)
    np.testing.assert_array_equal(fused["h"], staged["h"])
    cpu, _ = run(text, "cpu")
    np.testing.assert_allclose(fused["V_final"], cpu["V_final"], atol=1e-4)   # as the test above
    first = CardiacSimulation(config(text), "cuda")
    assert first.engine.fused
    first.engine.advance(150)
    resumed = CardiacSimulation.restore(first.state(), "cuda")
    first.close()
    while not resumed.finished:
        resumed.advance()
    got, _ = resumed.results()
    resumed.close()
    np.testing.assert_array_equal(got["probe_V"], fused["probe_V"])


def test_cuda_blowup_stops_with_time_cell_reason(cuda_context):
    _, s = run("mesh: {kind: sheet, nx: 4, ny: 1, dx_mm: 0.2}\n"
               "protocol: {t_end: 20, stimuli: [{start: 1, region: {kind: cells, cells: [0]}}]}\n"
               "solver: {method: fe, dt: 0.5}\noutput: {random_probes: 0}\n", "cuda")
    assert "stopped" in s and 0 <= s["stopped"]["cell"] < 4
    assert "NaN" in s["stopped"]["reason"] or "exceeds" in s["stopped"]["reason"]


def test_cuda_step_floor(cuda_context):
    _, s = run("mesh: {kind: sheet, nx: 4, ny: 1, dx_mm: 0.2}\n"
               "protocol: {t_end: 20, stimuli: [{start: 1, region: {kind: cells, cells: [0]}}]}\n"
               "solver: {method: bs32, dt: 0.01, at: 1.0e-9, rt: 0, dt_min: 0.005}\noutput: {random_probes: 0}\n",
               "cuda")
    assert "below the floor" in s["stopped"]["reason"] and 0 <= s["stopped"]["cell"] < 4


@pytest.mark.parametrize("method", ["rlfe", "bs32"])
def test_cuda_checkpoint_resume_matches_straight_run(cuda_context, method):
    from app.sims.cardiac.simulation import CardiacSimulation

    from .helpers import config
    text = SHEET + f"solver: {{method: {method}, dt: 0.02, at: 0.1, rt: 0.0}}\n"
    straight = CardiacSimulation(config(text), "cuda")
    while not straight.finished:
        straight.advance()
    want, _ = straight.results()
    straight.close()
    first = CardiacSimulation(config(text), "cuda")
    first.engine.advance(300)
    state = first.state()
    first.close()
    resumed = CardiacSimulation.restore(state, "cuda")
    while not resumed.finished:
        resumed.advance()
    got, summary = resumed.results()
    resumed.close()
    np.testing.assert_array_equal(got["probe_V"], want["probe_V"])
    np.testing.assert_array_equal(got["activation_time"], want["activation_time"])
    with pytest.raises(ValueError, match="CUDA engine"):
        CardiacSimulation.restore(state, "cpu")


def test_single_cell_default_on_cuda_integrates_a_stiff_markov_chain(cuda_context, tmp_path):
    """The single-cell default on CUDA (``auto``: AUTO_SOLVERS["cuda"]) on a cell whose
    repolarising current flows through a stiff Markov chain, against CVODE at 1e-10 on the CPU:
    APD90 within 0.1 % and V within 0.5 mV (test_engine.py's bound for the same method on the
    CPU; Rush-Larsen on the chain's states gave -1.0 % and 5.3 mV)."""
    from .synthetic import markov_run, trace_difference, write_markov_model
    path = write_markov_model(tmp_path)
    ref_arrays, ref = run(markov_run(path, "{method: cvode, at: 1.0e-10, rt: 1.0e-10}"))
    arrays, s = run(markov_run(path, "{}"), "cuda")
    assert s["method"] == "rodas4" and s["finished"], s
    assert abs(s["apd90_ms"] - ref["apd90_ms"]) < 1e-3 * ref["apd90_ms"], (s["apd90_ms"], ref["apd90_ms"])
    assert trace_difference(arrays, ref_arrays) < 0.5


def test_cuda_rodas4_matches_cpu_cvode_and_the_numpy_rodas4(cuda_context):
    """RODAS4 on the GPU (one thread, the whole step in ``steps_one_block``) on two beats of
    O'Hara-Rudy 2011 (41 states, its preset's stimulus): APD90 of the second beat within 0.5 %
    of CVODE at 1e-9 on the CPU (the single-cell bound), and the same run as the NumPy engine's
    rodas4 (the same algorithm in double: APD90 within 1e-4 relative, accepted steps within 1 %)."""
    text = ("model: {file: ohara_rudy_2011_endo}\nmesh: {kind: single}\n"
            "protocol: {t_end: 1500, stimuli: [{start: 50, duration: 0.5, amplitude: -80, period: 1000, count: 2}]}\n"
            "output: {random_probes: 0, dt_save: 0}\n")
    ref = run(text + "solver: {method: cvode, at: 1.0e-9, rt: 1.0e-9}\n")[1]
    cpu = run(text + "solver: {method: rodas4}\n")[1]
    arrays, gpu = run(text + "solver: {method: rodas4}\n", "cuda")
    assert gpu["finished"] and gpu["method"] == "rodas4", gpu
    assert len(arrays["cell_t"]) == gpu["steps_accepted"] + 1
    assert abs(gpu["apd90_ms"] - ref["apd90_ms"]) < 0.005 * ref["apd90_ms"], (gpu["apd90_ms"], ref["apd90_ms"])
    assert abs(gpu["apd90_ms"] - cpu["apd90_ms"]) < 1e-4 * cpu["apd90_ms"], (gpu["apd90_ms"], cpu["apd90_ms"])
    assert abs(gpu["steps_accepted"] - cpu["steps_accepted"]) <= 0.01 * cpu["steps_accepted"]


@pytest.mark.parametrize("method,split", [("rlfe", "godunov"), ("rlfe", "strang"), ("grl1", "strang")])
def test_split_step_cuda_matches_cpu_in_float64(cuda_context, method, split):
    """solver.split_dt: the split step's kernels (substeps, RKC1 stages) against the CPU engine."""
    text = SHEET + f"solver: {{method: {method}, dt: 0.02, split_dt: 0.1, split: {split}, precision: float64}}\n"
    a_cpu, s_cpu = run(text, "cpu")
    a_gpu, s_gpu = run(text, "cuda")
    assert s_gpu["steps_accepted"] == s_cpu["steps_accepted"] == 400
    np.testing.assert_allclose(a_gpu["probe_t"], a_cpu["probe_t"], atol=1e-9)
    np.testing.assert_allclose(a_gpu["probe_V"], a_cpu["probe_V"], atol=1e-4)
    np.testing.assert_allclose(a_gpu["V_final"], a_cpu["V_final"], atol=1e-6)
    np.testing.assert_allclose(a_gpu["activation_time"], a_cpu["activation_time"], atol=1e-4)


@pytest.mark.parametrize("precision,atol_ms", [("float64", 1e-4), ("float32", 0.05)])
def test_split_step_on_a_file_mesh_cuda_matches_cpu(cuda_context, tmp_path, precision, atol_ms):
    """The N-version slab at dx 0.5 mm (a tetrahedral mesh file with fibres), Strang at 0.1 ms:
    the activation time of every node the wave reached by 50 ms on CUDA as on the CPU (float32:
    the device keeps the operator weights in half precision, which alone moves the slab's
    activation times by up to 0.039 ms at this dx (``benchmarks/cpu-2core/cardiac-weights16.json``),
    and the kernels round each RKC stage, the CPU each super-step: 0.05 ms; on the H100 the
    largest difference was 0.021 ms)."""
    from app.sims.cardiac import nversion
    path, points = nversion.write_slab(tmp_path, 0.5)
    text = nversion.config_text(path, points, 0.02, 60.0, precision=precision, split_dt=0.1, split="strang")
    text = text.replace(f"path: {path.name}", f"path: {path}").replace("domain: cardiac\n", "")
    a_cpu, _ = run(text, "cpu")
    a_gpu, _ = run(text, "cuda")
    ref, got = a_cpu["activation_time"], a_gpu["activation_time"]
    early = ref < 50.0                      # the wave is still crossing the far end at 60 ms
    assert early.mean() > 0.3             # (the CPU engine: 45 % of the nodes)
    np.testing.assert_allclose(got[early], ref[early], rtol=0, atol=atol_ms)
    assert not (got[~early] < 50.0 - atol_ms).any()
