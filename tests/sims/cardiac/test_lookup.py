"""Voltage lookup tables (solver.lookup_tables): every shipped model's table program against
direct evaluation, the scalar and NumPy table programs against each other, the compiled
engine against the NumPy engine with tables, and the config checks."""

import numpy as np
import pytest

from app.compute.codegen import names_used
from app.sims.cardiac.model import LookupSpec, load_model
from app.sims.common.config import ConfigError

from .helpers import assert_outputs_close, cable, config, run
from .test_model import TEN, random_states


@pytest.mark.parametrize("name", TEN)
def test_tables_match_direct_evaluation(name):
    """Linear interpolation every 0.02 mV: within 1e-3 of direct evaluation at the 99.9th
    percentile of random states (a jump of a where() between grid points is smeared over one
    step; those are the few worse cells), and direct outside the table (to rounding: a quotient
    (f(V)·g)/d(V) is computed as (f/d)·g)."""
    m = load_model(name)
    t = m.with_lookup(LookupSpec())
    y = random_states(3000, seed=5, model=m)
    y[0, :40] = np.linspace(-300.0, -121.0, 20).tolist() + np.linspace(81.0, 200.0, 20).tolist()
    p = m.parameter_vector()
    direct, tabled = np.concatenate(m.rates(y, -5.0, p)), np.concatenate(t.rates(y, -5.0, p))
    assert_outputs_close(tabled, direct, 1e-3)
    np.testing.assert_allclose(tabled[:, :40], direct[:, :40], rtol=1e-12, atol=1e-300)
    assert t.lookup_plan.n_entries > 0


@pytest.mark.parametrize("name", ["ohara_rudy_2011_endo", "courtemanche_ramirez_nattel_1998"])
def test_scalar_and_numpy_table_programs_agree(name):
    t = load_model(name).with_lookup(LookupSpec())
    y = random_states(20, seed=6, model=t)
    p = t.parameter_vector()
    many = np.concatenate(t.rates(y, 0.0, p))
    for c in range(20):
        one = np.concatenate(t.rates(y[:, c:c + 1], 0.0, p))[:, 0]
        np.testing.assert_allclose(one, many[:, c], rtol=1e-12, atol=1e-300)


def test_ghk_removable_singularity_is_the_limit_at_zero():
    """O'Hara-Rudy's GHK fluxes divide by exp(2VF/RT) - 1: direct evaluation is NaN at V = 0 and
    cancels next to it; the table holds the limit (what float32 runs hit: issue 18)."""
    m = load_model("ohara_rudy_2011_endo")
    t = m.with_lookup(LookupSpec())
    y = np.repeat(m.initial_state()[:, None], 3, axis=1)
    y[0] = [0.0, 1e-3, -1e-3]
    p = m.parameter_vector()
    direct, tabled = np.concatenate(m.rates(y, 0.0, p)), np.concatenate(t.rates(y, 0.0, p))
    assert np.isnan(direct[:, 0]).any() and np.isfinite(tabled).all()
    np.testing.assert_allclose(tabled[:, 0], 0.5 * (tabled[:, 1] + tabled[:, 2]), rtol=1e-4, atol=1e-12)


@pytest.mark.parametrize("method,atol", [("rlfe", 1e-6), ("grl1", 1e-6), ("midpoint", 1e-9)])
def test_compiled_engine_with_tables_matches_numpy_engine(method, atol):
    """midpoint: the same tables, the same arithmetic (to rounding). rlfe and grl1: the compiled step
    also reads the V-only gates' update coefficients exp(h a), b expm1(h a)/a from tables,
    where the NumPy engine interpolates a and b: within interpolation error of each other."""
    text = cable(0.1, t_end=8.0, method=method).replace("precision: float64}", "precision: float64, lookup_tables: true}")
    fast, _ = run(text, "cpu")
    ref, _ = run(text, "cpu-reference")
    plain, _ = run(cable(0.1, t_end=8.0, method=method), "cpu")
    assert np.isfinite(ref["activation_time"]).sum() > 10
    np.testing.assert_allclose(fast["activation_time"], ref["activation_time"], rtol=0, atol=atol)
    np.testing.assert_allclose(fast["probe_V"], ref["probe_V"], rtol=0, atol=10 * atol)
    # and the tables change the wave by far less than the step does
    np.testing.assert_allclose(fast["activation_time"], plain["activation_time"], rtol=0, atol=1e-3)


def test_rl_step_tables_only_the_voltage_only_gates():
    m = load_model("ohara_rudy_2011_endo")
    fused = m.with_lookup(LookupSpec(), rl_step=0.01)
    gates = [m.gates[g].split(".")[-1] for g in fused.table_gates]
    assert {"m", "hf", "j", "xs1", "xk1", "d", "ff"} <= set(gates)
    assert not {"nca", "Jrelnp", "Jrelp"} & set(gates)             # read Ca: updated as before
    y = random_states(50, seed=8, model=m)
    p = m.parameter_vector()
    _, a, b = m.rates(y, 0.0, p)
    _, e, f = fused.rates(y, 0.0, p)
    g = list(fused.table_gates)
    np.testing.assert_allclose(e[g], np.exp(0.01 * a[g]), rtol=1e-5)
    np.testing.assert_allclose(f[g], b[g] * np.expm1(0.01 * a[g]) / a[g], rtol=1e-3, atol=1e-9)
    with pytest.raises(ValueError, match="derivative"):
        fused.derivative(y, 0.0, p)


@pytest.mark.parametrize("solver,words", [
    ("{lookup_tables: true, lookup_v_min: 50, lookup_v_max: 40}", "lookup_v_min"),
    ("{lookup_tables: true, lookup_step: 0.0001, lookup_v_min: -1000, lookup_v_max: 1000}", "rows"),
    ("{lookup_step: 5}", "lookup_step"),
])
def test_bad_table_settings_are_refused(solver, words):
    with pytest.raises(ConfigError, match=words):
        config(f"mesh: {{kind: single}}\nsolver: {solver}\n")


def test_parameters_that_vary_between_cells_stay_out_of_the_tables():
    """A region with other Na_o and g_K1: those two are per-cell inputs, the tables hold only
    the rest (the compiled engine = the NumPy engine; both near the run without tables)."""
    region = ("model: {regions: [{kind: rect, x1: 2.0, parameters: "
              "{standard_ionic_concentrations.Na_o: 120.0, time_independent_potassium_current.g_K1: 0.2}}]}\n")
    text = cable(0.1, t_end=8.0, method="midpoint", extra=region)
    tabled = text.replace("precision: float64}", "precision: float64, lookup_tables: true}")
    fast, _ = run(tabled, "cpu")
    ref, _ = run(tabled, "cpu-reference")
    plain, _ = run(text, "cpu")
    np.testing.assert_allclose(fast["activation_time"], ref["activation_time"], rtol=0, atol=1e-9)
    np.testing.assert_allclose(fast["activation_time"], plain["activation_time"], rtol=0, atol=1e-3)
    from app.sims.cardiac.engine import Problem
    problem = Problem.from_config(config(tabled))
    names = [problem.model.parameters[k].qname for k in problem.model.varying]
    assert sorted(names) == ["standard_ionic_concentrations.Na_o", "time_independent_potassium_current.g_K1"]
    used = set().union(*(names_used(e) for e in problem.model.lookup_plan.entries))
    assert not used & {problem.model.parameters[k].name for k in problem.model.varying}


def test_a_model_name_that_starts_like_an_entry_is_not_read_as_one():
    """A CellML component named ``lut`` gives names such as ``lut_gate``; only ``lut_<k>`` is an entry."""
    from app.compute.codegen import Binary, Name
    from app.sims.cardiac.model import _entries_read
    assert _entries_read(Binary("*", Name("lut_3"), Name("lut_gate"))) == {3}
