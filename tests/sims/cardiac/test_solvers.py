"""Every method's error falls at its order as h halves, on a smooth test problem."""

import numpy as np
import pytest

from app.sims.cardiac.solvers import METHODS, error_ratio, grl_euler, next_step, phi1, rk_step, with_rl

RK = [n for n, t in METHODS.items() if not t.grl]      # GRL1 needs the diagonal Jacobian: below


def f(t, y):
    """y = [u, w]: u' = -u + w·cos t (non-gating); w' = a(u)·w + b(u) (gating)."""
    u, w = y[0:1], y[1:2]
    a = -(1.5 + 0.5 * np.sin(u))
    b = 0.75 + 0.25 * np.cos(t + u)
    return -u + w * np.cos(t), a, b


def f_jacobian(t, y):
    """``f`` with the non-gating state's diagonal Jacobian, d(-u + w·cos t)/du = -1 (GRL1)."""
    return (*f(t, y), np.full((1, 1), -1.0))


Y0 = np.array([[0.8], [0.3]])
T = 2.0


def solve(tab, n, low=False):
    y, h = Y0.copy(), T / n
    for i in range(n):
        high, lo = rk_step(f_jacobian if tab.grl else f, i * h, y, h, tab, 1)
        y = lo if low else high
    return y


def reference():
    return solve(METHODS["rkf45"].__class__(**{**METHODS["rkf45"].__dict__, "rl": False}), 4096)


REF = None


def observed_order(tab, low=False, ns=(40, 80, 160)):
    global REF
    if REF is None:
        REF = reference()
    errs = [np.max(np.abs(solve(tab, n, low) - REF)) for n in ns]
    return np.log2(errs[-2] / errs[-1]), errs


@pytest.mark.parametrize("name", RK)
def test_classical_order_without_rush_larsen(name):
    tab = with_rl(METHODS[name], False)
    p, _ = observed_order(tab, ns=(10, 20, 40) if tab.order == 5 else (40, 80, 160))
    assert abs(p - tab.order) < 0.25, (name, p)
    if tab.adaptive:
        q, _ = observed_order(tab, low=True)
        assert abs(q - tab.order_low) < 0.25, (name, q)


@pytest.mark.parametrize("name", [n for n in METHODS if n != "fe"])
def test_order_with_rush_larsen_in_every_stage(name):
    """RL in the stages keeps order 1 (RLFE) and 2 (every other method; the gates cap it)."""
    tab = METHODS[name]
    p, _ = observed_order(tab)
    assert p > min(tab.order, 2) - 0.25, (name, p)


def test_rush_larsen_is_exact_for_frozen_linear_gates():
    def g(t, y):
        return np.zeros((1, 1)), np.full((1, 1), -50.0), np.full((1, 1), 10.0)   # w' = -50 w + 10
    y = np.array([[0.0], [1.0]])
    for name in ("rlfe", "midpoint", "trapezoidal", "bs32", "rkf45"):
        high, _ = rk_step(g, 0.0, y, 0.3, METHODS[name], 1)    # h·|a| = 15: far beyond FE stability
        assert np.isclose(high[1, 0], 0.2 + 0.8 * np.exp(-15.0)), name


def test_grl1_is_first_order_and_exact_for_frozen_linear_states():
    """GRL1 converges at order 1, and steps a linear non-gating state u' = -50 u + 10 exactly
    at h·|J| = 15, where forward Euler (RLFE's update of u) grows by |1 - 15| a step."""
    p, _ = observed_order(METHODS["grl1"])
    assert abs(p - 1.0) < 0.25, p

    def g(t, y):
        return 10.0 - 50.0 * y[:1], np.full((1, 1), -50.0), np.full((1, 1), 10.0), np.full((1, 1), -50.0)
    y = np.array([[1.0], [1.0]])
    high, _ = rk_step(g, 0.0, y, 0.3, METHODS["grl1"], 1)
    assert np.allclose(high[:, 0], 0.2 + 0.8 * np.exp(-15.0))
    assert grl_euler(np.ones(1), 0.3, np.array([2.0]), np.array([np.nan]))[0] == pytest.approx(1.6)   # NaN J: FE


def test_phi1_and_step_control():
    z = np.array([-1e-9, 0.0, 1e-3, -2.0])
    assert np.allclose(phi1(z), [1.0, 1.0, np.expm1(1e-3) / 1e-3, np.expm1(-2.0) / -2.0])
    assert next_step(0.1, 1.0, 2) == pytest.approx(0.1 * 0.9)
    assert next_step(0.1, 0.0, 2) == pytest.approx(0.5)         # growth capped
    assert next_step(0.1, float("inf"), 2) == pytest.approx(0.02)
    assert next_step(0.1, 8.0, 2) == pytest.approx(0.1 * max(0.2, 0.9 * 8 ** (-1 / 3)))
    hi, lo, y0 = np.array([[1.0], [2.0]]), np.array([[1.5], [2.0]]), np.array([[10.0], [0.0]])
    assert error_ratio(hi, lo, y0, 0.1, 0.01) == pytest.approx(0.5 / 0.2)
    assert error_ratio(np.array([[np.nan]]), lo[:1], y0[:1], 1.0, 0.0) == float("inf")
