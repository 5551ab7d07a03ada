"""CellML import (Myokit + oxmeta + Rush-Larsen detection) and the programs printed from the
imported tree: each checked against Myokit's own evaluation of the same file."""

import numpy as np
import pytest

from app.compute.codegen import names_used
from app.sims.cardiac.cellml import CellMLImportError, import_cellml
from app.sims.cardiac.model import CellModel, crn_model, load_model, shipped_models

ACH = "acetylcholine_dependent_K_current.ACh"
TEN = ["beeler_reuter_model_1977", "courtemanche_ramirez_nattel_1998",
       "hodgkin_huxley_squid_axon_model_1952_modified", "luo_rudy_1991", "mahajan_shiferaw_2008",
       "maleckar_model_2009", "noble_model_1962", "nygren_atrial_model_1998", "ohara_rudy_2011_endo",
       "ten_tusscher_model_2006_epi"]


def random_states(n, seed=0, model=None):
    """States around the initial state, V across -100..60 mV, gates in 0..1."""
    m = model or crn_model()
    rng = np.random.default_rng(seed)
    y0 = m.initial_state()
    y = np.repeat(y0[:, None], n, axis=1) * rng.uniform(0.7, 1.3, (len(y0), n))
    y[0] = rng.uniform(-100, 60, n)
    y[m.n_nongating:] = rng.uniform(0, 1, (m.n_gates, n))
    return y


def test_every_shipped_model_is_there():
    assert set(TEN) <= set(shipped_models())


def _myokit_derivatives(model, y, params):
    """dy/dt from Myokit's own evaluation of the file, stimulus off, V in mV, time in ms."""
    import myokit.formats.cellml as mc
    m = mc.CellMLImporter().model(model.imported.source)
    m.time().convert_unit("ms")
    m.get(model.states[0]).convert_unit("mV")
    m.get(model.imported.annotations["membrane_stimulus_current"]).set_rhs(0)
    for p, value in zip(model.parameters, params):
        m.get(p.qname).set_rhs(float(value))
    state = dict(zip(model.states, y))
    order = [v.qname() for v in m.states()]
    d = dict(zip(order, m.evaluate_derivatives([state[q] for q in order])))
    return np.array([d[q] for q in model.states])


@pytest.mark.parametrize("name", TEN)
def test_imported_derivatives_match_myokit(name):
    """At the initial state and with every parameter changed by 10 %, our tree gives Myokit's
    dy/dt (both float64: only summation order differs)."""
    model = load_model(name)
    y = model.initial_state()
    for params in (model.parameter_vector(), model.parameter_vector() * 1.1):
        ours = model.derivative(y[:, None], np.zeros(1), params)[:, 0]
        ref = _myokit_derivatives(model, y, params)
        np.testing.assert_allclose(ours, ref, rtol=1e-7, atol=1e-12 * np.abs(ref).max())


def test_rush_larsen_gates_are_detected_from_the_equations():
    crn = crn_model()
    gates = {q.split(".")[-1] for q in crn.gates}
    # m, h, j, oa, oi, ua, ui, xr, xs, d, f, f_Ca, w are gates; u and v are not (their steady
    # state depends on Fn, which reads i_rel = K_rel u^2 v w (Ca_rel - Ca_i)); Ca_up is linear
    assert {"m", "h", "j", "oa", "oi", "ua", "ui", "xr", "xs", "d", "f", "f_Ca", "w"} <= gates
    assert not {"u", "v", "V", "Na_i", "Ca_i"} & gates
    assert crn.states[0] == "membrane.V" and crn.n_states == 21
    hh = load_model("hodgkin_huxley_squid_axon_model_1952_modified")
    assert hh.n_gates == 3 and hh.n_nongating == 1


def test_gate_coefficients_reproduce_the_derivative_and_are_free_of_the_gate():
    model = load_model("ten_tusscher_model_2006_epi")
    y = random_states(30, seed=2, model=model)
    p = model.parameter_vector()
    dng, a, b = model.rates(y, 0.0, p)
    for shift in (0.0, 0.3):     # a, b do not change when the gate changes
        y2 = y.copy()
        y2[model.n_nongating:] += shift
        _, a2, b2 = model.rates(y2, 0.0, p)
        np.testing.assert_allclose(a2, a)
        np.testing.assert_allclose(b2, b)
    assert np.all(a < 0)


def test_stimulus_enters_dv_dt_as_minus_i_st_in_every_model():
    for name in TEN:
        m = load_model(name)
        y = m.initial_state()[:, None]
        d0 = m.rates(y, np.zeros(1), m.parameter_vector())[0][0, 0]
        d1 = m.rates(y, np.full(1, -10.0), m.parameter_vector())[0][0, 0]
        assert d1 - d0 == pytest.approx(10.0, rel=1e-9), name


def test_scalar_and_numpy_programs_agree_on_random_states():
    m = load_model("ohara_rudy_2011_endo")
    y = random_states(20, seed=3, model=m)
    p = m.parameter_vector()
    vec = m.rates(y, -20.0, p)
    for k in range(0, 20, 7):
        one = m.rates(y[:, k:k + 1], -20.0, p)
        for u, v in zip(vec, one):
            np.testing.assert_allclose(u[:, k], v[:, 0], rtol=1e-12, atol=1e-300)


def test_a_parameter_changes_the_model_and_extra_constants_can_be_made_parameters():
    m = load_model("courtemanche_1998_ikach", parameters=(ACH,))
    assert ACH in m.parameter_names
    y = random_states(20, seed=5, model=m)
    y[0] = np.linspace(-70, 20, 20)
    d0 = m.rates(y, 0.0, m.parameter_vector())[0][0]
    d1 = m.rates(y, 0.0, m.parameter_vector({ACH: 0.1}))[0][0]
    e_k = 8.3143 * 310.0 / 96.4867 * np.log(5.4 / y[m.states.index("intracellular_ion_concentrations.K_i")])
    assert np.all(d1[y[0] > e_k + 1] < d0[y[0] > e_k + 1])      # outward K+ current above E_K
    with pytest.raises(ValueError, match="unknown parameters"):
        m.parameter_vector({"membrane.nothing": 1.0})
    with pytest.raises(CellMLImportError, match="not a constant"):
        load_model("courtemanche_1998_ikach", parameters=("membrane.V",))


def test_cuda_source_is_printed_from_the_tree():
    m = crn_model()
    src = m.cuda_source("float")
    assert src.count("out[") == m.n_nongating + 2 * m.n_gates
    assert "np." not in src and "expf(" in src and "c_params[" in src
    assert "pfield[0 * NPAD + cell]" in m.cuda_source("double", varying=(0,))
    for eq in m.imported.equations:      # every name in the tree is declared before use
        assert all(isinstance(n, str) for n in names_used(eq.tree))


def test_import_errors_name_the_file(tmp_path):
    bad = tmp_path / "bad.cellml"
    bad.write_text("<model>not cellml")
    with pytest.raises(CellMLImportError, match="bad.cellml"):
        import_cellml(bad)
    evil = tmp_path / "evil.cellml"
    evil.write_text('<?xml version="1.0"?><!DOCTYPE m [<!ENTITY x SYSTEM "file:///etc/passwd">]><m>&x;</m>')
    with pytest.raises(CellMLImportError, match="entity"):
        import_cellml(evil)
    with pytest.raises(CellMLImportError, match="neither a shipped model"):
        load_model("no_such_model")
    src = shipped_models()["hodgkin_huxley_squid_axon_model_1952_modified"].read_text()
    unannotated = tmp_path / "hh.cellml"       # no oxmeta: V found by name, stimulus by name
    unannotated.write_text(src.replace("oxford-metadata#", "other#"))
    m = CellModel(import_cellml(unannotated))
    assert m.states[0] == "membrane.V" and not m.parameters and m.imported.stimulus_scale == 1.0
    y = m.initial_state()[:, None]
    assert m.rates(y, np.full(1, -1.0), m.parameter_vector())[0][0, 0] == pytest.approx(
        m.rates(y, np.zeros(1), m.parameter_vector())[0][0, 0] + 1.0)


@pytest.mark.parametrize("name", ["ohara_rudy_2011_endo", "maleckar_model_2009", "mahajan_shiferaw_2008"])
def test_diagonal_jacobian_matches_central_differences(name):
    """``with_jacobian``'s jng (symbolic, for GRL1) against (f(y + δ) − f(y − δ))/2δ per
    non-gating state on random states; δ = 1e-5·max(|y|, 1e-3) keeps the difference's
    truncation (δ²·f''') and rounding (ε·|f|/δ) error near 1e-8 of the scale."""
    m = load_model(name)
    mj = m.with_jacobian()
    y = random_states(16, seed=5, model=m)
    p = m.parameter_vector()
    dng, a, b, jng = mj.rates(y, 0.0, p)
    for got, want in zip((dng, a, b), m.rates(y, 0.0, p)):
        np.testing.assert_array_equal(got, want)
    for k in range(m.n_nongating):
        step = 1e-5 * np.maximum(np.abs(y[k]), 1e-3)
        up, down = y.copy(), y.copy()
        up[k] += step
        down[k] -= step
        numeric = (m.rates(up, 0.0, p)[0][k] - m.rates(down, 0.0, p)[0][k]) / (2 * step)
        scale = np.abs(numeric) + np.abs(dng[k]) / np.maximum(np.abs(y[k]), 1e-3) + 1e-12
        assert np.all(np.abs(jng[k] - numeric) <= 1e-5 * scale), (m.nongating[k], jng[k], numeric)
