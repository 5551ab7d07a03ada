"""The Rosenbrock method RODAS4 (solver.method rodas4): its tableau against the order
conditions, its order and stability on scalar problems, the full symbolic Jacobian against
differences, and single cells on the NumPy engine against CVODE."""

import numpy as np
import pytest

from app.sims.cardiac.model import load_model
from app.sims.cardiac.rosenbrock import ROSENBROCK, classical_form, dense_jacobian, rosenbrock_step
from app.sims.common.config import ConfigError
from tests.sims.cardiac.helpers import config, run
from tests.sims.cardiac.synthetic import markov_run, trace_difference, write_markov_model

RODAS4 = ROSENBROCK["rodas4"]
REFERENCE = "cpu-reference"    # the NumPy engine (the compiled one: test_compiled_engine.py)


def _conditions(b: np.ndarray, alpha: np.ndarray, gamma_matrix: np.ndarray, g: float) -> np.ndarray:
    """Residuals of the order conditions 1-4 of a Rosenbrock method (Hairer & Wanner II,
    Table IV.7.1: β = α + Γ below the diagonal, β' its row sums, α_i the stage times)."""
    beta = np.tril(alpha + gamma_matrix, -1)
    bp, a = beta.sum(1), alpha.sum(1)
    return np.array([b.sum() - 1, b @ bp - (0.5 - g),
                     b @ a ** 2 - 1 / 3, b @ beta @ bp - (1 / 6 - g + g * g),
                     b @ a ** 3 - 0.25, b @ (a * (alpha @ bp)) - (1 / 8 - g / 3),
                     b @ beta @ a ** 2 - (1 / 12 - g / 3),
                     b @ beta @ beta @ bp - (1 / 24 - g / 2 + 1.5 * g * g - g ** 3)])


def test_rodas4_tableau_meets_the_order_conditions():
    """Order 4 (eight conditions), the embedded solution order 3 and not 4, the stage times of
    Hairer-Wanner's table; residuals at the rounding of the 16-digit published coefficients."""
    alpha, gamma_matrix, b, b_low = classical_form(RODAS4)
    np.testing.assert_allclose(np.diag(gamma_matrix), RODAS4.gamma, atol=1e-14)
    np.testing.assert_allclose(alpha.sum(1), RODAS4.alpha, atol=1e-13)
    assert np.max(np.abs(_conditions(b, alpha, gamma_matrix, RODAS4.gamma))) < 1e-13
    low = _conditions(b_low, alpha, gamma_matrix, RODAS4.gamma)
    assert np.max(np.abs(low[:4])) < 1e-13 and np.max(np.abs(low[4:])) > 1e-3
    np.testing.assert_allclose(b, alpha[-1] + gamma_matrix[-1], atol=1e-13)    # stiffly accurate
    assert (RODAS4.order, RODAS4.order_low) == (4, 3)


def _scalar_step(lam, h: float):
    """One step of y' = λy from 1: the stability function R(hλ) and its embedded one."""
    lam = np.asarray(lam, float)
    y0 = np.ones((1, lam.size))
    high, low = rosenbrock_step(lambda y: lam * y, y0, lam * y0, lam.reshape(-1, 1, 1), h, RODAS4)
    return high[0], low[0]


def test_rodas4_is_l_stable_and_fourth_order_on_the_linear_problem():
    """R(z) → 0 as z → −∞ (L-stable, both solutions: stiffly accurate), |R| ≤ 1 on the
    negative axis, and R(z) − e^z = O(z^5)."""
    high, low = _scalar_step(np.array([-1e12]), 1.0)
    assert abs(high[0]) < 1e-9 and abs(low[0]) < 1e-9
    z = -np.logspace(-2, 8, 60)
    assert np.all(np.abs(_scalar_step(z, 1.0)[0]) <= 1.0)
    e1 = abs(_scalar_step(np.array([-0.02]), 1.0)[0][0] - np.exp(-0.02))
    e2 = abs(_scalar_step(np.array([-0.01]), 1.0)[0][0] - np.exp(-0.01))
    assert 25 < e1 / e2 < 40                                   # local error O(h^5): ratio 32


def test_rodas4_converges_at_order_four_on_a_nonlinear_problem():
    """y' = −y² from 1 to t = 1 (exact 1/2) in fixed steps: halving h divides the error by
    ~16 (order 4) and the embedded solution's by ~8."""
    def solve(n: int, which: int) -> float:
        y, h = np.ones((1, 1)), 1.0 / n
        for _ in range(n):
            y = rosenbrock_step(lambda u: -u * u, y, -y * y, (-2 * y).reshape(1, 1, 1), h, RODAS4)[which]
        return abs(float(y[0, 0]) - 0.5)
    assert 13 < solve(8, 0) / solve(16, 0) < 19
    assert 6.5 < solve(8, 1) / solve(16, 1) < 9.5


@pytest.mark.parametrize("name", ["ten_tusscher_model_2006_epi", "ohara_rudy_2011_endo"])
def test_full_jacobian_matches_central_differences_on_random_states(name):
    """The symbolic Jacobian of the y-form against Richardson-extrapolated central differences
    (truncation O(δ⁴), rounding ~1e-16·|f|/δ with δ = 1e-4·|y|) on states around the initial
    one: each row within 1e-6 of its largest entry, and no entry outside the structural pattern."""
    model = load_model(name)
    full = model.with_full_jacobian()
    rng = np.random.default_rng(3)
    params = model.parameter_vector()
    n = model.n_states
    for _ in range(2):
        y = model.initial_state() * (1 + 0.02 * rng.standard_normal(n))
        jac = dense_jacobian(full.jacobian_pattern, full.rates(y[:, None], 0.0, params)[3], n)[0]
        ref = np.empty((n, n))
        for j in range(n):
            def diff(step: float, j: int = j, y: np.ndarray = y) -> np.ndarray:
                up, down = y.copy(), y.copy()
                up[j] += step
                down[j] -= step
                return (model.derivative(up[:, None], 0.0, params)[:, 0]
                        - model.derivative(down[:, None], 0.0, params)[:, 0]) / (2 * step)
            step = 1e-4 * max(abs(y[j]), 1e-3)
            ref[:, j] = (4 * diff(step / 2) - diff(step)) / 3
        scale = np.abs(ref).max(axis=1, keepdims=True) + 1e-300
        assert np.max(np.abs(jac - ref) / scale) < 1e-6
        pattern = np.zeros((n, n), bool)
        pattern[tuple(np.array(full.jacobian_pattern).T)] = True
        assert not np.any((np.abs(ref) > 1e-9 * scale) & ~pattern)



def test_rodas4_matches_cvode_on_the_stiff_markov_cell(tmp_path):
    """The synthetic cell with a stiff three-state Markov chain (|λ| ≈ 37/ms at rest) against
    CVODE at 1e-10: at 1e-6 APD90 within 0.1 % and V within 0.5 mV (the bounds bs32 meets in
    test_engine.py), and the error of the final state (a step ends there) falls with the
    tolerance (APD90's is the linear interpolation between steps as much as the solver's)."""
    path = write_markov_model(tmp_path)
    ref_arrays, ref = run(markov_run(path, "{method: cvode, at: 1.0e-10, rt: 1.0e-10}"), REFERENCE)
    errors = []
    for tol in ("1.0e-4", "1.0e-6"):
        arrays, summary = run(markov_run(path, f"{{method: rodas4, at: {tol}, rt: {tol}}}"), REFERENCE)
        assert summary["finished"] and summary["method"] == "rodas4"
        errors.append(np.max(np.abs(arrays["cell_states"][-1] - ref_arrays["cell_states"][-1])))
    assert errors[1] < errors[0] / 5, errors
    assert abs(summary["apd90_ms"] - ref["apd90_ms"]) < 1e-3 * ref["apd90_ms"]
    assert trace_difference(arrays, ref_arrays) < 0.5


def test_rodas4_matches_cvode_on_ten_tusscher():
    """Two beats of the shipped ten Tusscher 2006 cell (its preset stimulus): APD90 of the
    second beat within 0.5 % of CVODE at 1e-9 at tolerance 1e-4 (measured 0.005 %), the error
    falling at 1e-6 (measured 7 times smaller: the interpolation of the crossing between
    steps is part of it)."""
    text = ("model: {file: ten_tusscher_model_2006_epi}\nmesh: {kind: single}\n"
            "protocol: {t_end: 1600, stimuli: [{start: 50, duration: 1, amplitude: -52, period: 1000, count: 2}]}\n"
            "output: {random_probes: 0, dt_save: 0}\n")
    ref = run(text + "solver: {method: cvode, at: 1.0e-9, rt: 1.0e-9}\n", REFERENCE)[1]["apd90_ms"]
    errors = [abs(run(text + f"solver: {{method: rodas4, at: {tol}, rt: {tol}}}\n", REFERENCE)[1]["apd90_ms"] - ref) / ref
              for tol in ("1.0e-4", "1.0e-6")]
    assert errors[0] < 0.005 and errors[1] < errors[0] / 4, errors


def test_no_rodas4_step_crosses_a_pulse_edge(tmp_path):
    """The model is autonomous only between stimulus edges: every accepted step lies between two."""
    from app.sims.cardiac.simulation import CardiacSimulation
    path = write_markov_model(tmp_path)
    sim = CardiacSimulation(config(markov_run(path, "{method: rodas4, at: 1.0e-5, rt: 1.0e-5}", t_end=40.0)), REFERENCE)
    while not sim.finished:
        sim.advance()
    ends = np.array([t for t, _ in sim.engine.h_history])
    starts = ends - np.array([h for _, h in sim.engine.h_history])
    for edge in (10.0, 12.0):
        assert not np.any((starts < edge - 1e-9) & (ends > edge + 1e-9))
        assert np.any(np.isclose(ends, edge))
    sim.close()


def test_rodas4_is_for_single_cells_in_float64_without_tables():
    s = config("mesh: {kind: single}\nsolver: {method: rodas4}\n").solver
    assert (s.method, s.precision, s.at, s.rt) == ("rodas4", "float64", 1e-6, 1e-6)
    with pytest.raises(ConfigError, match="for single cells"):
        config("mesh: {kind: sheet, nx: 3, ny: 3}\nsolver: {method: rodas4}\n")
    with pytest.raises(ConfigError, match="float64 only"):
        config("mesh: {kind: single}\nsolver: {method: rodas4, precision: float32}\n")
    with pytest.raises(ConfigError, match="lookup_tables must be false"):
        config("mesh: {kind: single}\nsolver: {method: rodas4, lookup_tables: true}\n")


def test_a_non_finite_jacobian_column_is_mended_by_forward_differences():
    """Columns holding NaN or inf, of some cells, are replaced by forward differences of the
    right-hand side; finite columns and other cells are left as they are."""
    from app.sims.cardiac.rosenbrock import mend_jacobian
    a = np.array([[-2.0, 1.0, 0.0], [0.5, -3.0, 0.2], [0.0, 4.0, -1.0]])
    rhs = lambda y: a @ y + 0.1 * y ** 2             # noqa: E731 (S, N) -> (S, N)
    y0 = np.array([[1.0, -2.0], [0.5, 3.0], [2.0, 0.1]])
    exact = np.stack([a + np.diag(0.2 * y0[:, c]) for c in range(2)])
    jac = exact.copy()
    jac[0, 2, 1] = np.nan                            # cell 0, column 1
    jac[1, 0, 2] = np.inf                            # cell 1, column 2
    mended = mend_jacobian(rhs, y0, rhs(y0), jac)
    assert np.allclose(mended, exact, rtol=0, atol=1e-6) and np.isfinite(mended).all()
    assert mended[0, 0, 2] == exact[0, 0, 2] and mended[1, 2, 1] == exact[1, 2, 1]    # untouched
    assert mend_jacobian(rhs, y0, rhs(y0), exact) is exact
