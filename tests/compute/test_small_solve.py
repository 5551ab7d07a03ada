"""Small dense linear solves (app/compute/small_solve.py): the loops the compiled engines jit
(and CUDA's small_solve.cuh, the same algorithm) against NumPy's LAPACK solve, on random
matrices and on the matrices GRL1's Markov-chain step solves (I − h·A, A a rate matrix with
rates from 1e-3 to 1e3 per ms: condition numbers up to ~10^4). Partial pivoting keeps the
residual at rounding: the bound 1e-12 of the solution's size is 10^4 ulp."""

import numpy as np
import pytest

from app.compute.small_solve import solve_batch, solve_in_place


def chain_matrices(n: int, count: int, seed: int, h: float = 0.05) -> np.ndarray:
    rng = np.random.default_rng(seed)
    q = 10.0 ** rng.uniform(-3, 3, (count, n, n))
    q[:, np.arange(n), np.arange(n)] = 0.0
    q[:, np.arange(n), np.arange(n)] = -q.sum(axis=1)
    return np.eye(n) - h * q


@pytest.mark.parametrize("n", [1, 3, 9, 15])
def test_loops_match_lapack(n):
    rng = np.random.default_rng(n)
    for m in [*rng.normal(size=(6, n, n)), *chain_matrices(n, 6, seed=n)]:
        rhs = rng.normal(size=n)
        want = np.linalg.solve(m, rhs)
        work, x = m.copy(), rhs.copy()
        solve_in_place(work, x)
        assert np.max(np.abs(x - want)) <= 1e-12 * max(1.0, np.abs(want).max())


def test_pivoting_is_needed_and_done():
    """A zero on the diagonal: elimination without row exchanges would divide by it."""
    m, rhs = np.array([[0.0, 1.0], [2.0, 3.0]]), np.array([1.0, 8.0])
    x = rhs.copy()
    solve_in_place(m.copy(), x)
    np.testing.assert_allclose(x, [2.5, 1.0], rtol=1e-15)


def test_batch_gives_nan_where_a_matrix_is_singular():
    m = np.stack([np.eye(2), np.zeros((2, 2))])
    out = solve_batch(m, np.ones((2, 2)))
    np.testing.assert_array_equal(out[0], [1.0, 1.0])
    assert np.isnan(out[1]).all()
