"""The CUDA engine's Rosenbrock path without a GPU: ``kernels/cardiac.cu`` as the engine fills
it for a single cell with ``solver.method: rodas4`` (``steps_one_block``: ``rosenbrock_body``
then ``control_body`` per step), compiled for the host with g++ over a one-thread stand-in for
CUDA's intrinsics (thread 0 of the block is the cell's; the block's other threads carry no cell
and an error of 0, so their part of the reductions changes nothing), run from the state and
control block ``cuda.CudaTissue`` sets up, against the NumPy engine's run of the same config:
the same accepted and rejected steps at the same times, the same V and end state."""

import ctypes
import shutil

import numpy as np
import pytest

from app.sims.cardiac import cuda as cuda_engine
from app.sims.cardiac.config import MAX_STIMULI
from app.sims.cardiac.cuda import CD_H, CD_N, CD_NEXTSAVE, CD_PAUSE, CI_ACC, CI_DONE, CI_N, CI_NREC, CI_REJ, CI_STATUS
from app.sims.cardiac.cuda import kernel_source, recorded_rows
from app.sims.cardiac.engine import Problem

from .helpers import config, run
from .host_cuda import compile_for_host
from .synthetic import markov_run, write_markov_model

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="no host C++ compiler")


def host_kernel(problem: Problem, tmp_path):
    src, defines = kernel_source(problem)
    assert defines["FUSED_STEPS"] == 1 and defines["NCELLS"] == 1
    wrapper = """
extern "C" void set_constants(const double* params, int n_params, const double* stim, const double* solver)
{
    for (int k = 0; k < n_params; ++k) c_params[k] = params[k];
    for (int k = 0; k < 32 * 5; ++k) c_stim[k] = stim[k];
    for (int k = 0; k < CS_N; ++k) c_solver[k] = solver[k];
}
extern "C" void launch(double* YA, double* YB, double* K, double* V0, double* V1, const int* nbr, const double* w,
    const unsigned* mask, double* maps, const double* pfield, const double* bp, int n_bp, const int* probes,
    double* rec_t, double* rec_v, int rec_cap, float* h_hist, int h_cap, double* cd, int* ci, int n_steps)
{
    steps_one_block(YA, YB, K, V0, V1, nbr, w, mask, maps, pfield, bp, n_bp, probes, rec_t, rec_v, rec_cap,
                    h_hist, h_cap, cd, ci, n_steps);
}
"""
    return compile_for_host(src, defines, wrapper, tmp_path)


def _ptr(array: np.ndarray):
    return array.ctypes.data_as(ctypes.c_void_p)


def test_cuda_rosenbrock_steps_match_the_numpy_engine(tmp_path):
    text = markov_run(write_markov_model(tmp_path), "{method: rodas4, at: 1.0e-6, rt: 1.0e-6}")
    problem = Problem.from_config(config(text))
    dll = host_kernel(problem, tmp_path)
    s, out, ns, npad = problem.cfg.solver, problem.cfg.output, problem.model.n_states, cuda_engine.padded(1)
    stim = np.zeros(MAX_STIMULI * 5)
    stim[:problem.stim_table.size] = problem.stim_table.ravel()
    solver = np.array([s.at, s.rt, s.dt_min, s.dt_max, s.safety, s.fac_min, s.fac_max, problem.t_end, problem.D,
                       out.dt_save, out.activation_threshold, s.dt])
    dll.set_constants(_ptr(np.ascontiguousarray(problem.params, np.float64)), ctypes.c_int(len(problem.params)),
                      _ptr(stim), _ptr(solver))
    # the device arrays as CudaTissue sets them up
    ya = np.zeros((ns, npad))
    ya[:, :] = problem.y0[:, :1]
    yb, k_scratch = np.zeros(ns * npad), np.zeros(ns * (ns + problem.tableau.stages))
    v0, v1, nbr, w = np.zeros(npad), np.zeros(npad), np.zeros(npad, np.int32), np.zeros(npad)
    mask = np.zeros(npad, np.uint32)
    mask[0] = problem.stim_mask[0]
    maps = np.full((6, npad), np.nan)
    maps[0, 0], maps[3], maps[5, 0] = problem.y0[0, 0], -np.inf, problem.y0[0, 0]
    pfield = np.zeros(npad)
    cd, ci = np.zeros(CD_N), np.zeros(CI_N, np.int32)
    cd[CD_H] = min(s.dt, s.dt_max, problem.next_breakpoint(0.0))
    cd[CD_NEXTSAVE], cd[CD_PAUSE] = out.dt_save, np.inf
    bp = np.concatenate([problem.breakpoints, [np.inf]])
    probes = recorded_rows(problem).astype(np.int32)
    cap = 20000
    rec_t, rec_v, h_hist = np.zeros(cap), np.zeros(cap * len(probes)), np.zeros(2 * cap, np.float32)
    ya = np.ascontiguousarray(ya.ravel())
    dll.launch(_ptr(ya), _ptr(yb), _ptr(k_scratch), _ptr(v0), _ptr(v1), _ptr(nbr), _ptr(w), _ptr(mask), _ptr(maps),
               _ptr(pfield), _ptr(bp), ctypes.c_int(len(problem.breakpoints)), _ptr(probes), _ptr(rec_t), _ptr(rec_v),
               ctypes.c_int(cap), _ptr(h_hist), ctypes.c_int(cap), _ptr(cd), _ptr(ci), ctypes.c_int(cap))
    assert ci[CI_DONE] == 1 and ci[CI_STATUS] == 0 and ci[CI_NREC] == ci[CI_ACC]

    arrays, summary = run(text, "cpu-reference")
    assert (ci[CI_ACC], ci[CI_REJ]) == (summary["steps_accepted"], summary["steps_rejected"])
    n = ci[CI_NREC]
    # the control kernel's error ratio is a float32 (packed with the cell for one atomic): the
    # steps differ from the NumPy engine's in the ratio's rounding (measured: times 2.5e-9 apart
    # relative, V 1e-7 mV, the end state 2e-13)
    np.testing.assert_allclose(rec_t[:n], arrays["cell_t"][1:], rtol=1e-8, atol=0)
    # V of every step (the stand-in's one thread records the first state row only) and the end state
    np.testing.assert_allclose(rec_v[:n * ns].reshape(n, ns)[:, 0], arrays["cell_states"][1:, 0], rtol=0, atol=1e-6)
    end = (yb if ci[cuda_engine.CI_PARITY] else ya).reshape(ns, npad)[:, 0]
    np.testing.assert_allclose(end, arrays["cell_states"][-1], rtol=1e-9, atol=1e-12)
