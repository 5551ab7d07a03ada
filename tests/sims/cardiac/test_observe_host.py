"""The CUDA stage kernel's activation / APD90 bookkeeping (``observe`` in kernels/cardiac.cu:
maps loaded up front, decisions as selects, stores only where a value changes) compiled for
the host with g++ and run on random action-potential traces against the NumPy twin
(``engine.Maps``) in double: the same activation and repolarisation times, exactly."""

import ctypes
import re
import shutil
import subprocess

import numpy as np
import pytest

from app.compute.kernels import read_kernel
from app.sims.cardiac.engine import Maps

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="no host C++ compiler")

PRELUDE = """
#include <cmath>
using std::isnan; using std::fmax; using std::fabs;
#define __device__
#define __forceinline__ inline
#define __restrict__
typedef double real;
static int npad;
#define NPAD npad
static double c_solver[64];
"""


def host_observe(tmp_path):
    src = read_kernel("cardiac.cu")
    solver_enum = re.search(r"enum \{ CS_AT = 0.*?\};", src, re.S).group(0)
    observe = src[src.index("enum { MAP_V_LAST"):src.index("struct StepControl")]
    code = PRELUDE + solver_enum + "\n" + observe + """
extern "C" void run(int n, int steps, const double* t, const double* v, double thr, double* maps)
{
    npad = n;
    c_solver[CS_THRESH] = thr;
    for (int s = 1; s < steps; ++s)
        for (int k = 0; k < n; ++k)
            observe(k, t[s], t[s - 1], v[s * n + k], load_marks(maps, k), maps);
}
"""
    cpp, lib = tmp_path / "observe.cpp", tmp_path / "observe.so"
    cpp.write_text(code)
    subprocess.run(["g++", "-O1", "-shared", "-fPIC", "-ffp-contract=off", "-o", str(lib), str(cpp)],
                   check=True, capture_output=True, text=True)
    return ctypes.CDLL(str(lib))


def traces(n: int, steps: int, seed: int):
    """Beats of random onset, amplitude and duration on a resting level, with noise: each cell
    crosses the threshold upwards and repolarises zero to several times; some never fire.
    Plateau beats and spikes (peak on the step that crosses the threshold, then decay)."""
    rng = np.random.default_rng(seed)
    t = np.cumsum(np.concatenate([[0.0], rng.uniform(0.05, 0.5, steps - 1)]))
    v = np.full((steps, n), -85.0) + rng.normal(0, 0.3, (steps, n))
    for k in range(n):
        for _ in range(rng.integers(0, 4)):
            t0, amp = rng.uniform(0, t[-1]), rng.uniform(60, 130)
            if rng.random() < 0.5:
                rise = np.clip((t - t0) / rng.uniform(0.2, 3.0), 0, 1)
                fall = np.clip(1 - (t - t0 - rng.uniform(5, 120)) / rng.uniform(5, 60), 0, 1)
                v[:, k] += amp * rise * fall
            else:
                v[:, k] += np.where(t >= t0, amp * np.exp(-np.maximum(t - t0, 0) / rng.uniform(2, 50)), 0)
    return t, v


def test_observe_matches_numpy_twin(tmp_path):
    n, steps, thr = 300, 1500, -30.0
    t, v = traces(n, steps, seed=5)
    dll = host_observe(tmp_path)
    maps = np.full((6, n), np.nan)
    maps[0] = v[0]                 # v_last
    maps[3] = -np.inf              # vmax
    maps[5] = v[0]                 # v_rest
    dll.run(ctypes.c_int(n), ctypes.c_int(steps), t.ctypes.data_as(ctypes.c_void_p),
            np.ascontiguousarray(v).ctypes.data_as(ctypes.c_void_p), ctypes.c_double(thr),
            maps.ctypes.data_as(ctypes.c_void_p))
    twin = Maps(v[0], thr)
    for s in range(1, steps):
        twin.observe(t[s - 1], v[s - 1], t[s], v[s])
    fired = ~np.isnan(twin.act_first)
    assert 0.3 * n < fired.sum() < n and np.isfinite(twin.t_rep).sum() > 0.2 * n   # the traces test both
    np.testing.assert_array_equal(maps[0], v[-1])
    np.testing.assert_array_equal(maps[1], twin.act_first)
    np.testing.assert_array_equal(maps[2], twin.act_last)
    np.testing.assert_array_equal(maps[3], twin.vmax)
    np.testing.assert_array_equal(maps[4], twin.t_rep)
