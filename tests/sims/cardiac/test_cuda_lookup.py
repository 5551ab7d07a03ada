"""Voltage lookup tables on the CUDA engine (gpu marker): the printed table program against the
NumPy program of the same plan and table, and O'Hara-Rudy on the level-7 sphere in float32."""

import numpy as np
import pytest

from app.sims.cardiac.model import LookupSpec, load_model

from .helpers import assert_outputs_close, run
from .test_cuda_engine import SHEET
from .test_model import TEN, random_states

pytestmark = pytest.mark.gpu


MAIN = ["ohara_rudy_2011_endo", "courtemanche_ramirez_nattel_1998", "ten_tusscher_model_2006_epi"]
CASES = ([(n, "float64", 1e-9, 0.01, True) for n in TEN] + [(n, "mixed", 2e-3, 0.01, True) for n in MAIN]
         + [(n, "float32", 2e-3, 0.01, True) for n in MAIN[:2]] + [(MAIN[0], "float64", 1e-9, None, True)]
         # Mahajan-Shiferaw in float32 inside the table only: outside it the model is evaluated
         # directly, which in float32 is test_cuda_engine's expected failure (and overflows at
         # V = -200 mV, H100 2026-11-24)
         + [("mahajan_shiferaw_2008", "float32", 2e-3, None, False)])


@pytest.mark.parametrize("name,precision,rtol,rl_step,beyond_table", CASES)
def test_lookup_model_cuda_vs_numpy_on_random_states(cuda_context, name, precision, rtol, rl_step,
                                                     beyond_table):
    """Same tables, same interpolation: CUDA equals the NumPy table program to rounding (the
    float32 model: 2e-3); V spans the table and, with ``beyond_table``, beyond it (direct
    evaluation there). With ``rl_step`` the V-only gates output their RLFE update coefficients
    (what the stage kernel runs)."""
    from app.sims.cardiac.cuda import cuda_rates
    spec = LookupSpec()
    m = load_model(name).with_lookup(spec, rl_step=rl_step)
    y = random_states(4096, seed=12, model=m)
    if beyond_table:
        y[0, :64] = np.linspace(-200.0, 150.0, 64)
    else:
        assert np.all((y[0] >= spec.v_min) & (y[0] <= spec.v_max))
    ist = np.where(np.arange(4096) % 3 == 0, -20.0, 0.0)
    p = m.parameter_vector()
    ref = np.concatenate(m.rates(y, ist, p))
    got = np.concatenate(cuda_rates(m, y, ist, p, precision))
    assert_outputs_close(got, ref, rtol)


def test_lookup_sheet_cuda_matches_cpu_in_float64(cuda_context):
    text = SHEET + "solver: {method: rlfe, dt: 0.02, precision: float64, lookup_tables: true}\n"
    a_cpu, _ = run(text, "cpu")
    a_gpu, _ = run(text, "cuda")
    np.testing.assert_allclose(a_gpu["probe_V"], a_cpu["probe_V"], atol=1e-4)
    np.testing.assert_allclose(a_gpu["activation_time"], a_cpu["activation_time"], atol=1e-4)


def test_mixed_tables_against_float64_direct(cuda_context):
    """What a mixed run evaluates (float32 model, tables) against the float64 model without
    tables: the float32 bound of test_cuda_engine, on O'Hara-Rudy's random states."""
    from app.sims.cardiac.cuda import cuda_rates
    direct = load_model("ohara_rudy_2011_endo")
    y = random_states(4096, seed=13, model=direct)
    p = direct.parameter_vector()
    ref = np.concatenate(direct.rates(y, 0.0, p))
    got = np.concatenate(cuda_rates(direct.with_lookup(LookupSpec()), y, np.zeros(4096), p, "mixed"))
    for q, r in enumerate(ref):
        ok = np.isfinite(r)           # direct evaluation is NaN at the GHK singularity, the table is not
        scale = np.maximum(np.abs(r[ok]), np.abs(r[ok]).max() * 1e-6 + 1e-300)
        assert np.quantile(np.abs(got[q][ok] - r[ok]) / scale, 0.999) < 2e-3, q


def test_mixed_sheet_close_to_float64(cuda_context):
    a64, _ = run(SHEET + "solver: {method: rlfe, dt: 0.02, precision: float64}\n", "cpu")
    mixed, _ = run(SHEET + "solver: {method: rlfe, dt: 0.02, precision: mixed, lookup_tables: true}\n", "cuda")
    ok = np.isfinite(a64["activation_time"])
    np.testing.assert_allclose(mixed["activation_time"][ok], a64["activation_time"][ok], atol=0.05)


@pytest.mark.parametrize("precision", ["float32", "float64", "mixed"])
def test_ohara_rudy_sphere_runs_300_ms_with_tables(cuda_context, precision):
    """The bench case (level-7 sphere, RLFE 0.01 ms, 300 ms): without tables float32 stopped at
    74.4 ms with V NaN; the tables carry the GHK terms' limits at V = 0."""
    text = ("mesh: {kind: sphere, level: 7}\nmodel: {file: ohara_rudy_2011_endo}\n"
            "protocol: {t_end: 300, stimuli: [{start: 1, duration: 1, amplitude: -80, "
            "region: {kind: cap, center: [0, 0, 1], angle_deg: 5}}, {start: 250, duration: 1, "
            "amplitude: -80, region: {kind: cap, center: [0, 0, 1], angle_deg: 5}}]}\n"
            f"solver: {{method: rlfe, dt: 0.01, precision: {precision}, lookup_tables: true}}\n"
            "output: {random_probes: 20, dt_save: 1.0}\n")
    arrays, summary = run(text, "cuda")
    assert summary.get("finished", True) and "stopped" not in summary
    assert np.isfinite(arrays["V_final"]).all()
    assert np.isfinite(arrays["activation_time"]).mean() > 0.9
