"""Both SSA engines against the exact law (finite state projection) of four small networks:
birth-death, the dimerisation 2P <-> P2, the two-state gene and a small Schlogl.

One family per run (model, engine, seed): at three times and every species, the mean's Z, the
variance's Z and a chi-square of the histogram against the exact marginal; the run fails with
probability at most 1e-4 when the engine is right (Sidak / Bonferroni, see
``app.sims.ssa.stats``). CI: the CPU engine at 2^14 realizations (a 3 % change of one rate is
caught); ``BIOGPU_SSA_FULL=1``: 2^18 realizations for three seeds; CUDA (gpu): 2^22.
"""

import os

import pytest

from .exact import MODELS, PERTURBED, engine_vs_exact, run_engine, solve_exact

FULL = pytest.mark.skipif(not os.environ.get("BIOGPU_SSA_FULL"), reason="set BIOGPU_SSA_FULL=1 (minutes)")
_SOLVED: dict = {}


def exact(name):
    if name not in _SOLVED:
        _SOLVED[name] = solve_exact(name)
        # L1 error of the exact law <= 2e-10: under 1e-3 expected counts misplaced at 2^22 samples
        assert _SOLVED[name].error_bound.max() <= 2e-10
    return _SOLVED[name]


@pytest.mark.parametrize("name", list(MODELS))
def test_cpu_engine_matches_the_exact_law(name):
    verdict = engine_vs_exact(run_engine(name, "cpu", 1 << 14, seed=101), exact(name))
    assert verdict.passed, verdict.describe()


@pytest.mark.parametrize("name", ["birth-death", "telegraph"])
def test_the_comparison_catches_a_three_percent_rate_error(name):
    verdict = engine_vs_exact(run_engine(name, "cpu", 1 << 14, seed=101, scale=PERTURBED[name]), exact(name))
    assert not verdict.passed, verdict.describe()


@FULL
@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3], ids=lambda s: f"seed{s}")
@pytest.mark.parametrize("name", list(MODELS))
def test_cpu_engine_matches_the_exact_law_at_2_18(name, seed):
    verdict = engine_vs_exact(run_engine(name, "cpu", 1 << 18, seed=seed), exact(name))
    assert verdict.passed, verdict.describe()


@pytest.mark.gpu
@pytest.mark.parametrize("seed", [1, 2, 3], ids=lambda s: f"seed{s}")
@pytest.mark.parametrize("name", list(MODELS))
def test_cuda_engine_matches_the_exact_law_at_2_22(name, seed, cuda_context):
    verdict = engine_vs_exact(run_engine(name, "cuda", 1 << 22, seed=seed), exact(name))
    assert verdict.passed, verdict.describe()


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(MODELS))
def test_cuda_comparison_catches_a_three_percent_rate_error(name, cuda_context):
    verdict = engine_vs_exact(run_engine(name, "cuda", 1 << 22, seed=7, scale=PERTURBED[name]), exact(name))
    assert not verdict.passed, verdict.describe()
