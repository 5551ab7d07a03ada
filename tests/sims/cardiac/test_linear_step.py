"""The linearised one-stage Rush–Larsen step (app/sims/cardiac/linear_step.py): identities of its
matrix that hold exactly, on random Jacobians."""

import numpy as np

from app.sims.cardiac.linear_step import grl1_radius, step_matrix


def test_one_block_of_every_state_is_backward_euler_and_a_diagonal_jacobian_is_exact():
    """With every state in one block, I + h·(I − h·J)⁻¹·J = (I − h·J)⁻¹ (backward Euler); with a
    diagonal J and no block, each state's step is exp(h·J_ii) (Rush–Larsen is exact there)."""
    rng = np.random.default_rng(3)
    h = 0.05
    for n in (2, 5, 9):
        jac = rng.normal(scale=30.0, size=(n, n))
        np.testing.assert_allclose(step_matrix(jac, h, np.diag(jac), [range(n)]),
                                   np.linalg.inv(np.eye(n) - h * jac), rtol=1e-10, atol=1e-12)
        d = -10.0 ** rng.uniform(-2, 3, n)
        np.testing.assert_allclose(step_matrix(np.diag(d), h, d), np.diag(np.exp(h * d)), rtol=1e-12, atol=1e-15)


def test_a_fast_exchange_stepped_apart_is_undamped_and_together_damped():
    """Two states exchanging at 1000/ms (eigenvalues 0 and −2000/ms; the exact step at 0.05 ms
    damps their difference by e^−100): GRL1 stepping them apart, each frozen over the other's
    step, maps the difference to its negative (eigenvalues ±1, to 1e-12): stable but wrong;
    together (backward Euler on the pair) it damps it to 1/(1 + 0.05·2000) = 1/101."""
    jac = np.array([[-1000.0, 1000.0], [1000.0, -1000.0]])
    apart = np.sort(np.linalg.eigvals(step_matrix(jac, 0.05, np.diag(jac))).real)
    together = np.sort(np.linalg.eigvals(step_matrix(jac, 0.05, np.diag(jac), [(0, 1)])).real)
    np.testing.assert_allclose(apart, [-1.0, 1.0], atol=1e-12)
    np.testing.assert_allclose(together, [1.0 / 101.0, 1.0], rtol=1e-12)
    assert abs(grl1_radius(jac, 0.05, [(0, 1)]) - 1.0) < 1e-12
