"""exp of small matrices (app/compute/small_expm.py) against SciPy's expm (a Padé approximant
with its own scaling): the NumPy batch and the loops the compiled engine jits, on random
matrices from norms below the scaling threshold to ones that need a dozen squarings. The
truncation error is below 2e-11 relative per scaled exponential; the bound 1e-9 of the
result's norm leaves room for the squarings' rounding (a dozen products of 21 terms)."""

import numpy as np
import pytest
from scipy.linalg import expm

from app.compute.small_expm import THETA, expm_in_place, expm_taylor, squarings


def random_matrices(n: int, count: int, norm: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(count, n, n))
    return x * (norm / np.abs(x).sum(axis=-1).max(axis=-1))[:, None, None]


def rate_matrices(n: int, count: int, seed: int) -> np.ndarray:
    """Markov-chain generators times a step: rates from 1e-3 to 1e3 (log-uniform), columns
    summing to 0 (what a chain's h·A is: the case with many squarings)."""
    rng = np.random.default_rng(seed)
    q = 10.0 ** rng.uniform(-3, 3, (count, n, n))
    q[:, np.arange(n), np.arange(n)] = 0.0
    q[:, np.arange(n), np.arange(n)] = -q.sum(axis=1)
    return q


def cases(n: int, seed: int):
    return [*random_matrices(n, 6, 0.1, seed), *random_matrices(n, 6, 3.0, seed + 1), *rate_matrices(n, 6, seed + 2)]


def close(got: np.ndarray, want: np.ndarray) -> bool:
    return bool(np.max(np.abs(got - want)) <= 1e-9 * max(1.0, np.abs(want).max()))


@pytest.mark.parametrize("n", [1, 4, 13])
def test_batch_matches_scipy(n):
    x = np.array(cases(n, seed=n))
    for k, (g, xi) in enumerate(zip(expm_taylor(x), x)):
        assert close(g, expm(xi)), k


def test_loops_match_scipy():
    """The plain loops (what numba compiles for the CPU engine), run here as Python."""
    for k, x in enumerate(cases(6, seed=7)):
        m, work, power = x.copy(), np.empty_like(x), np.empty_like(x)
        expm_in_place(m, work, power)
        assert close(m, expm(x)), k


def test_scaling_stops_at_the_threshold():
    assert squarings(THETA) == 0 and squarings(THETA * 1.01) == 1 and squarings(THETA * 2 ** 10) == 10
    assert squarings(float("nan")) == 0
