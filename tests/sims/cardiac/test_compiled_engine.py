"""The compiled (numba) cardiac engine against the NumPy reference.

Same solver code; only the cell model is evaluated per cell by compiled code printed from the same
equation trees. In float64 the two agree to rounding (math vs NumPy exp/log differ by an ulp at
most): activation times within 1e-9 ms, voltages within 1e-8 mV after a full upstroke.
"""

import numpy as np
import pytest

from app.sims.cardiac.compiled import CompiledTissue
from app.sims.cardiac.engine import CpuTissue
from app.sims.cardiac.simulation import CardiacSimulation
from tests.sims.cardiac.helpers import cable, config


def finished(text: str, backend: str):
    sim = CardiacSimulation(config(text), backend)
    while not sim.finished:
        sim.advance()
    return sim


def matches_reference(text: str, atol_ms: float, atol_mv: float):
    """``text`` run on the compiled and on the NumPy engine: activation times within
    ``atol_ms``, final voltages within ``atol_mv``; returns both simulations and results."""
    fast, ref = finished(text, "cpu"), finished(text, "cpu-reference")
    assert isinstance(fast.engine, CompiledTissue) and type(ref.engine) is CpuTissue
    a, _ = fast.results()
    b, _ = ref.results()
    assert np.isfinite(b["activation_time"]).sum() > 10          # the wave crossed the cable
    np.testing.assert_allclose(a["activation_time"], b["activation_time"], rtol=0, atol=atol_ms)
    np.testing.assert_allclose(a["V_final"], b["V_final"], rtol=0, atol=atol_mv)
    return fast, ref, a, b


@pytest.mark.parametrize("method,fused", [("rlfe", True), ("grl1", True), ("midpoint", False)])
def test_compiled_cable_matches_reference_in_float64(method, fused):
    """rlfe and grl1 run the fused model + (generalized) Rush-Larsen update; midpoint the NumPy
    solver around the model."""
    fast, _, a, b = matches_reference(cable(0.1, t_end=8.0, method=method), 1e-9, 1e-8)
    assert fast.engine._fused is fused
    np.testing.assert_allclose(a["probe_V"], b["probe_V"], rtol=0, atol=1e-8)


def test_compiled_cable_in_float32_matches_reference():
    """The GUI's precision: float32 states, widened to float64 for the vectorised model (the
    reference evaluates them with its float64 parameters too) and rounded on the way out; both
    engines round the states to float32 every step. Agreement measured: 6e-7 ms and 1e-6 mV
    (a quarter of a float32 ulp at 40 mV); the bounds allow ~250 ulp of V."""
    text = cable(0.1, t_end=8.0).replace("precision: float64", "precision: float32")
    fast, ref, _, _ = matches_reference(text, 1e-4, 1e-3)
    assert fast.engine.y.dtype == np.float32 and ref.engine.y.dtype == np.float32


def test_compiled_rates_match_reference_on_random_states():
    sim = CardiacSimulation(config(cable(0.5, t_end=1.0)), "cpu")
    engine, model, params = sim.engine, sim.problem.model, sim.problem.params
    rng = np.random.default_rng(4)
    y = model.initial_state()[:, None] * rng.uniform(0.8, 1.2, (model.n_states, 12))
    y[0] = rng.uniform(-90.0, 40.0, 12)                           # voltages across the range
    stim = rng.uniform(-40.0, 0.0, 12)
    fast = tuple(np.empty((o.shape[0], 12)) for o in engine._out)
    engine._rates(y, stim, *fast)
    ref = model.rates(y, stim, params)
    for got, want in zip(fast, ref):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_compiled_rlfe_with_parameters_varying_between_cells_matches_reference():
    """A region with other Na_o and g_K1: the vectorised step reads those two per cell
    (``pfield``), the rest once (``pconst``)."""
    region = ("model: {regions: [{kind: rect, x1: 2.0, parameters: "
              "{standard_ionic_concentrations.Na_o: 120.0, time_independent_potassium_current.g_K1: 0.2}}]}\n")
    fast, *_ = matches_reference(cable(0.1, t_end=8.0, extra=region), 1e-9, 1e-8)
    assert fast.problem.varying and fast.engine._pfield.shape == (2, fast.problem.n_cells)


def test_vectorised_rates_of_a_model_with_powers_match_the_reference():
    """Maleckar 2009 (three non-integer powers: jit_math's pow), on random states across the
    voltage range: every output within float64 rounding, inf and nan where NumPy has them."""
    from app.sims.cardiac.compiled import _compile
    from app.sims.cardiac.model import load_model
    model = load_model("maleckar_model_2009")
    assert "vm.pow(" in "".join(model.simd_statements(str, str, "i_st")[1])
    module = _compile(model, np.float64, (), fused=False)
    rng = np.random.default_rng(9)
    n = 203                                                       # three blocks and a partial one
    y = model.initial_state()[:, None] * rng.uniform(0.8, 1.2, (model.n_states, n))
    y[0] = rng.uniform(-100.0, 60.0, n)
    stim = rng.uniform(-40.0, 0.0, n)
    params = model.parameter_vector()
    got = tuple(np.empty((k, n)) for k in (model.n_nongating, model.n_gates, model.n_gates))
    module.rates_cells(y, stim, params, np.zeros((0, n)), *got, 0, n)
    for fast, want in zip(got, model.rates(y, stim, params)):
        np.testing.assert_array_equal(np.isfinite(fast), np.isfinite(want))
        np.testing.assert_allclose(fast, want, rtol=1e-10, atol=1e-12)
    # other pieces (as other thread counts give): a cell's result does not depend on whether
    # the vector loop or its scalar remainder took it
    split = tuple(np.empty_like(o) for o in got)
    for first, last in ((0, 77), (77, 150), (150, n)):
        module.rates_cells(y, stim, params, np.zeros((0, n)), *split, first, last)
    for whole, pieces in zip(got, split):
        np.testing.assert_array_equal(whole, pieces)


def test_the_generated_step_is_vectorised():
    """The fused RLFE step's loop over cells compiles to SIMD code (<N x double>); compiled
    afresh from the generated source (a function loaded from numba's cache has no IR)."""
    from numba import njit

    from app.sims.cardiac.compiled import _module
    from app.sims.cardiac.model import load_model
    step = _module(load_model("hodgkin_huxley_squid_axon_model_1952_modified")).rl_euler_cells
    fresh = njit(nogil=True, error_model="numpy", fastmath={"contract"})(step.py_func)
    y = np.ones((4, 3))
    fresh(y, np.zeros(3), np.ones(20), np.zeros((0, 3)), np.zeros((3, 1), np.int64), np.zeros((3, 1)), 0.0, 0.01,
          np.empty_like(y), 0, 3)
    ir = fresh.inspect_llvm(fresh.signatures[0])
    assert " x double>" in ir and "@llvm.exp" not in ir and "@exp" not in ir


def test_compiled_rodas4_matches_the_numpy_engine(tmp_path):
    """A single cell by RODAS4 (its whole step compiled: app/sims/cardiac/rosenbrock_jit.py)
    against the NumPy engine's step, on the stiff Markov-chain cell: the same steps, accepted and
    rejected, and the same trace to 1e-9 of each state's size (rounding: one LU per stage against
    LAPACK's per step, numba's math against Python's)."""
    from .synthetic import markov_run, write_markov_model
    text = markov_run(write_markov_model(tmp_path), "{method: rodas4, at: 1.0e-6, rt: 1.0e-6}")
    fast, ref = finished(text, "cpu"), finished(text, "cpu-reference")
    assert isinstance(fast.engine, CompiledTissue) and type(ref.engine) is CpuTissue
    (a, s), (b, r) = fast.results(), ref.results()
    assert (s["steps_accepted"], s["steps_rejected"]) == (r["steps_accepted"], r["steps_rejected"])
    scale = np.abs(b["cell_states"]).max(axis=0)      # each state's size (V: tens of mV)
    assert np.max(np.abs(a["cell_states"] - b["cell_states"]) / scale) < 1e-9
    assert s["apd90_ms"] == pytest.approx(r["apd90_ms"], rel=1e-9)


def test_compiled_rodas4_mends_a_non_finite_jacobian_column_as_numpy_does():
    """A Jacobian column holding NaN (a symbolic 0·∞ where the derivative is finite, as in
    Lindblad 1996 and Hund-Rudy 2004) is replaced by forward differences in the compiled step as
    in the NumPy one: the two steps agree, and both are the exact Jacobian's step to the
    difference's error. The NaN is planted in the generated module's Jacobian."""
    from app.compute.jit import generated_module
    from app.sims.cardiac.compiled import _block_import
    from app.sims.cardiac.model import CellModel, load_model
    from app.sims.cardiac.rosenbrock import ROSENBROCK, dense_jacobian, rosenbrock_step
    from app.sims.cardiac.rosenbrock_jit import rosenbrock_source
    m = load_model("ten_tusscher_model_2006_epi").with_full_jacobian()
    plain, tab, n = CellModel(m.imported), ROSENBROCK["rodas4"], m.n_states
    source = rosenbrock_source(m, _block_import("solve")[0]).replace(
        "\n\nDIFF_STEP", "\n    jac[1, 0] = math.nan\n\nDIFF_STEP", 1)
    module = generated_module("cardiac_rosenbrock_nan_test", source)
    y, p, h = m.initial_state().astype(float), m.parameter_vector(), 0.05
    y[0] = -20.0                                                  # mid-upstroke
    high, low = np.empty(n), np.empty(n)
    module.step(y, -30.0, p, h, float(tab.gamma), np.array(tab.a), np.array(tab.c), np.array(tab.m),
                np.array(tab.m_low), high, low, np.empty((n, n)), np.empty((n, n)), np.empty((tab.stages, n)),
                np.empty(n), np.empty(n))
    dng, a, b, entries = m.rates(y[:, None], -30.0, p)
    f0 = np.concatenate([dng, a * y[m.n_nongating:, None] + b])
    jac = dense_jacobian(m.jacobian_pattern, entries, n)
    rhs = lambda u: plain.derivative(u, -30.0, p)   # noqa: E731
    exact = rosenbrock_step(rhs, y[:, None], f0, jac, h, tab)[0][:, 0]
    jac[:, 1, 0] = np.nan
    mended = rosenbrock_step(rhs, y[:, None], f0, jac, h, tab)[0][:, 0]
    scale = np.maximum(np.abs(exact), 1e-3)
    assert np.isfinite(high).all() and np.max(np.abs(high - mended) / scale) < 1e-9
    assert np.max(np.abs(mended - exact) / scale) < 1e-5 and not np.allclose(mended, y)
