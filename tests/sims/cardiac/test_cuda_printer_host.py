"""The printed CUDA cell model (``CellModel.cuda_source``) compiled for the host with g++ and run
on random states: no GPU needed to check what the kernel's model function computes (the table
path, the direct path outside the table, the gate-update tables, double and mixed precision)
against the NumPy program of the same tree. CUDA's own compile is checked in
tests/compute/test_kernel_compile_cardiac.py; the GPU tests run the same comparison on a device."""

import ctypes
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from app.sims.cardiac.model import LookupSpec, load_model

from .helpers import assert_outputs_close, run
from .test_model import random_states

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="no host C++ compiler")

# Just enough of CUDA for the model function: qualifiers, vector types, read-only loads.
PRELUDE = """
#include <cmath>
#include <cstddef>
using std::exp; using std::log; using std::sqrt; using std::pow; using std::fabs; using std::expm1;
using std::fmin; using std::fmax; using std::isnan; using std::isfinite;
#define __device__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __constant__ static
#define __restrict__
struct double2 { double x, y; };
struct float2 { float x, y; };
template <class T> static inline T __ldg(const T* p) { return *p; }
#define NPAD 1
#include "small_solve.cuh"
"""
COMMON = Path(__file__).resolve().parents[3] / "kernels" / "common"


def compile_host(code: str, tmp_path: Path) -> ctypes.CDLL:
    """``code`` (C++ with PRELUDE) as a shared library loaded into this process."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    cpp, lib = tmp_path / "model.cpp", tmp_path / "model.so"
    cpp.write_text(code)
    subprocess.run(["g++", "-O1", "-shared", "-fPIC", "-ffp-contract=off", "-w", f"-I{COMMON}", "-o", str(lib),
                    str(cpp)], check=True, capture_output=True, text=True)
    return ctypes.CDLL(str(lib))


def host_rates(model, real: str, compute: str, tmp_path):
    """A callable (y (S, N), i_st (N,), params (P,), table or None) -> outputs (K, N)."""
    src = model.cuda_source(real, (), compute)
    n_params = max(len(model.parameters), 1)
    lut = f"extern \"C\" void set_table(const {compute}2* t) {{ c_lut = t; }}\n" if model.lookup else ""
    code = (PRELUDE + f"static {real} c_params[{n_params}];\n" + src + lut +
            f"extern \"C\" void set_params(const {real}* p) {{ for (int k = 0; k < {n_params}; ++k) c_params[k] = p[k]; }}\n"
            f"extern \"C\" void rates(const {real}* y, const {real}* ist, {real}* out, int n) {{\n"
            f"  {real} yy[{model.n_states}], oo[{len(model.outputs)}];\n"
            "  for (int c = 0; c < n; ++c) {\n"
            f"    for (int q = 0; q < {model.n_states}; ++q) yy[q] = y[q * n + c];\n"
            "    model_rates(yy, ist[c], nullptr, c, oo);\n"
            f"    for (int q = 0; q < {len(model.outputs)}; ++q) out[q * n + c] = oo[q];\n"
            "  }\n}\n")
    dll = compile_host(code, tmp_path)
    rdt, cdt = (np.float64 if real == "double" else np.float32), (np.float64 if compute == "double" else np.float32)
    keep = []

    def call(y, ist, params):
        p = np.ascontiguousarray(params, rdt)
        dll.set_params(p.ctypes.data_as(ctypes.c_void_p))
        if model.lookup:
            table = np.ascontiguousarray(model.table(params), cdt)
            keep.append(table)
            dll.set_table(table.ctypes.data_as(ctypes.c_void_p))
        yy, ii = np.ascontiguousarray(y, rdt), np.ascontiguousarray(ist, rdt)
        out = np.zeros((len(model.outputs), y.shape[1]), rdt)
        dll.rates(yy.ctypes.data_as(ctypes.c_void_p), ii.ctypes.data_as(ctypes.c_void_p),
                  out.ctypes.data_as(ctypes.c_void_p), ctypes.c_int(y.shape[1]))
        return out.astype(np.float64)
    return call


@pytest.mark.parametrize("name", ["ohara_rudy_2011_endo", "courtemanche_ramirez_nattel_1998"])
@pytest.mark.parametrize("real,compute,rtol", [("double", "double", 1e-12), ("double", "float", 2e-3)])
@pytest.mark.parametrize("rl_step", [None, 0.01])
def test_printed_cuda_table_model_matches_numpy(tmp_path, name, real, compute, rtol, rl_step):
    m = load_model(name).with_lookup(LookupSpec(), rl_step=rl_step)
    y = random_states(2000, seed=21, model=m)
    y[0, :40] = np.linspace(-250.0, 150.0, 40)              # outside the table: the direct path
    ist = np.where(np.arange(2000) % 3 == 0, -20.0, 0.0)
    p = m.parameter_vector()
    want = np.concatenate(m.rates(y, ist, p))
    got = host_rates(m, real, compute, tmp_path)(y, ist, p)
    assert_outputs_close(got, want, rtol)


def test_printed_cuda_model_without_tables_matches_numpy(tmp_path):
    m = load_model("ohara_rudy_2011_endo")
    y = random_states(500, seed=22, model=m)
    p = m.parameter_vector()
    assert_outputs_close(host_rates(m, "double", "double", tmp_path)(y, np.zeros(500), p), np.concatenate(m.rates(y, 0.0, p)), 1e-12)


def test_tables_rescue_mahajan_in_float32(tmp_path):
    """Mahajan-Shiferaw's float32 model loses one output (a difference of nearly equal fluxes,
    test_cuda_engine's expected failure); with tables its voltage-only parts come from float64
    evaluation and the float32 program keeps 2e-3 (host float32, IEEE functions)."""
    m = load_model("mahajan_shiferaw_2008")
    y = random_states(4096, seed=11, model=m)
    y[m.n_nongating:] = np.clip(y[m.n_nongating:], 0, 1)
    ist = np.where(np.arange(4096) % 3 == 0, -20.0, 0.0)
    p = m.parameter_vector()
    want = np.concatenate(m.rates(y, ist, p))
    with pytest.raises(AssertionError):
        assert_outputs_close(host_rates(m, "float", "float", tmp_path)(y, ist, p), want, 2e-3)
    tabled = m.with_lookup(LookupSpec())
    assert_outputs_close(host_rates(tabled, "float", "float", tmp_path / "t")(y, ist, p), want, 2e-3)


@pytest.mark.parametrize("which", ["nygren", "tubule"])
def test_printed_block_update_matches_numpy(tmp_path, which):
    """GRL1's block step as the CUDA kernel calls it (``model_block_update`` with
    kernels/common/small_solve.cuh, compiled for the host), from random states and outputs,
    against the NumPy engine's :func:`~app.sims.cardiac.markov.block_step`, in double, at a
    tissue step and a long one: Nygren's two chains (troponin's Mg²⁺/Ca²⁺ sites, the SR
    release's activator and product), and the synthetic cell's fast group of V and a
    t-tubular potential (non-gating states, diagonal and f from the model's outputs)."""
    from app.sims.cardiac.markov import block_step
    from .synthetic import write_markov_model
    if which == "nygren":
        m = load_model("nygren_atrial_model_1998").with_jacobian()
        assert len(m.blocks) == 2
    else:
        m = load_model(str(write_markov_model(tmp_path, tubule=(10.0, 40.0)))).with_jacobian()
        assert m.blocks[-1].states == (0, 1)
    code = (PRELUDE + f"static double c_params[{max(len(m.parameters), 1)}];\n" + m.cuda_source("double")
            + "extern \"C\" void blocks(const double* kk, const double* y0, double* yn, double h) {\n"
            "  model_block_update(kk, y0, yn, 1, 0, h);\n}\n")
    dll = compile_host(code, tmp_path)
    y = random_states(8, seed=4, model=m)
    p = m.parameter_vector()
    outputs = np.concatenate(m.rates(y, np.zeros(8), p))
    dng, a, b, jng = m.rates(y, np.zeros(8), p)
    for h in (0.05, 2.0):
        want = y.copy()
        for block in m.blocks:
            block_step(want, y, h, dng, a, b, jng, m.n_nongating, block)
        for c in range(8):
            kk, y0 = np.ascontiguousarray(outputs[:, c]), np.ascontiguousarray(y[:, c])
            got = y0.copy()
            dll.blocks(kk.ctypes.data_as(ctypes.c_void_p), y0.ctypes.data_as(ctypes.c_void_p),
                       got.ctypes.data_as(ctypes.c_void_p), ctypes.c_double(h))
            np.testing.assert_allclose(got, want[:, c], rtol=1e-10, atol=1e-13)
        assert not np.allclose(want, y)                           # the blocks moved


@pytest.mark.parametrize("name,nan_column", [("ten_tusscher_model_2006_epi", False), ("markov", False),
                                             ("ten_tusscher_model_2006_epi", True)])
def test_cuda_rosenbrock_step_matches_numpy(tmp_path, name, nan_column):
    """One RODAS4 step as the CUDA kernel takes it (the printed ``model_field_and_jacobian`` and
    ``model_derivative``, kernels/common/rosenbrock.cuh with its LU, the tableau as
    ``cuda.rosenbrock_source`` prints it; compiled for the host) against the NumPy engine's
    :func:`~app.sims.cardiac.rosenbrock.rosenbrock_step` (LAPACK) from states along a beat, with
    and without a stimulus, at a short and a long step: y_high and y_low within 1e-9 of the
    NumPy values (the two LU's rounding, amplified by the matrix's conditioning), NaN in the
    same cells. ``nan_column``: the Jacobian's column of V holds a NaN (a symbolic 0·∞) in both,
    and both mend it by the same forward differences."""
    from app.sims.cardiac.cuda import rosenbrock_source
    from app.sims.cardiac.model import CellModel
    from app.sims.cardiac.rosenbrock import ROSENBROCK, dense_jacobian, rosenbrock_step
    from .synthetic import write_markov_model
    path = str(write_markov_model(tmp_path)) if name == "markov" else name
    m = load_model(path).with_full_jacobian()
    plain, ns = CellModel(m.imported), m.n_states
    code = (PRELUDE + f"static double c_params[{max(len(m.parameters), 1)}];\n"
            + rosenbrock_source(ROSENBROCK["rodas4"]) + '#include "rosenbrock.cuh"\n' + m.cuda_source("double")
            + f"extern \"C\" void set_params(const double* p) {{ for (int k = 0; k < {len(m.parameters)}; ++k) "
            "c_params[k] = p[k]; }\n"
            "extern \"C\" void step(const double* y0, double ist, double h, double* hi, double* lo) {\n"
            f"  static double m[{ns * ns}], u[6][{ns}];\n"
            f"  rosenbrock_step<{ns}>(y0, h, hi, lo, m, u,\n"
            "    [&](double* f, double* jac) { model_field_and_jacobian(y0, ist, nullptr, 0, f, jac);"
            + (f" jac[{ns}] = NAN;" if nan_column else "") + " },\n"
            "    [&](const double* y, double* f) { model_derivative(y, ist, nullptr, 0, f); });\n}\n")
    dll = compile_host(code, tmp_path)
    dll.step.argtypes = [ctypes.c_void_p, ctypes.c_double, ctypes.c_double, ctypes.c_void_p, ctypes.c_void_p]
    p = m.parameter_vector()
    dll.set_params(np.ascontiguousarray(p).ctypes.data_as(ctypes.c_void_p))
    text = (f"model: {{file: '{path}'}}\nmesh: {{kind: single}}\nsolver: {{method: rodas4, at: 1.0e-4, rt: 1.0e-4}}\n"
            "protocol: {t_end: 400}\noutput: {random_probes: 0, dt_save: 0}\n")
    states = run(text, "cpu-reference")[0]["cell_states"]
    y = states[np.linspace(0, len(states) - 1, 12).astype(int)].T.copy()     # rest, upstroke, plateau, repolarisation
    for h in (0.01, 0.1):
        for ist in (0.0, -20.0):
            dng, a, b, entries = m.rates(y, ist, p)
            f0 = np.concatenate([dng, a * y[m.n_nongating:] + b])
            jac = dense_jacobian(m.jacobian_pattern, entries, ns)
            if nan_column:
                exact = rosenbrock_step(lambda u, ist=ist: plain.derivative(u, ist, p), y, f0, jac, h,
                                        ROSENBROCK["rodas4"])
                jac[:, 1, 0] = np.nan
            want = rosenbrock_step(lambda u, ist=ist: plain.derivative(u, ist, p), y, f0, jac, h, ROSENBROCK["rodas4"])
            got = np.zeros((2, ns, y.shape[1]))
            for c in range(y.shape[1]):
                hi, lo = np.zeros(ns), np.zeros(ns)
                dll.step(np.ascontiguousarray(y[:, c]).ctypes.data, ist, h, hi.ctypes.data, lo.ctypes.data)
                got[0, :, c], got[1, :, c] = hi, lo
            for g, w in zip(got, want):      # a random state may leave the model's domain in a stage
                assert np.array_equal(np.isfinite(g), np.isfinite(w)) and np.isfinite(w).all(axis=0).mean() > 0.9
                assert_outputs_close(g, w, 1e-9)
            if nan_column:                   # the mended column's step is the exact one's, to the difference's error
                assert np.isfinite(want[0]).all(axis=0).mean() > 0.9
                assert_outputs_close(want[0], exact[0], 1e-5)
