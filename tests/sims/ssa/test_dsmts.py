"""DSMTS conformance (cases 00001-00027 from ../shared/reference/ssa/dsmts) through the SBML
importer.

CPU: the compiled engine with N = 1000 realizations per case (250 for 00005 and 00023, whose
10^4 molecules make them 10x the work of the others; the whole suite in about 25 s on 2 cores). The suite's rule is |Z| < 3 and |Y| < 5 at every output time; with 1500 tests a
correct engine has 4.05 Z excursions on average, so a case fails when it has more than
``excursion_bound`` of its expected count (Poisson tail below 1e-5 per case, about 3e-4 for the
suite), and likewise for Y with its kurtosis-corrected expectation. At N = 1000 the Z test
detects a mean off by 0.1 sigma and Y a variance off by about 25 %; the GPU test runs 16384
realizations per case (0.025 sigma, 6 %).
"""

import pytest

from app.sims.ssa import dsmts

CASES = dsmts.cases()
LARGE = {"00005", "00023"}
pytestmark = pytest.mark.skipif(not CASES, reason=f"DSMTS suite not found at {dsmts.suite_dir()}")


def check(result: dsmts.Result) -> None:
    z_bound = dsmts.excursion_bound(result.expected_z)
    y_bound = dsmts.excursion_bound(result.expected_y)
    assert result.z_out <= z_bound, (result.case.name, result.z_out, z_bound)
    assert result.y_out <= y_bound, (result.case.name, result.y_out, y_bound)


def test_suite_is_complete():
    assert CASES == [f"{i:05d}" for i in range(1, 28)]


@pytest.mark.parametrize("name", CASES)
def test_dsmts_case_cpu(name):
    n = 250 if name in LARGE else 1000
    check(dsmts.run_case(dsmts.load_case(name), "cpu", realizations=n, seed=11000 + int(name)))


@pytest.mark.gpu
@pytest.mark.parametrize("name", CASES)
def test_dsmts_case_cuda(name, cuda_context):
    result = dsmts.run_case(dsmts.load_case(name), "cuda", realizations=1 << 14, seed=12000 + int(name))
    check(result)


def test_excursion_bound():
    """The bound is the first k whose Poisson upper tail is below alpha."""
    import math

    def tail(mean, k):   # P(X > k)
        return 1.0 - sum(math.exp(-mean) * mean**i / math.factorial(i) for i in range(k + 1))

    for mean in (0.0, 0.135, 0.27, 4.05, 19.4):
        k = dsmts.excursion_bound(mean, 1e-5)
        assert tail(mean, k) < 1e-5 and (k == 0 or tail(mean, k - 1) >= 1e-5)
