"""Tau-leaping on CUDA against the compiled CPU tau-leaping engine and the exact law (GPU only)."""

import dataclasses

import numpy as np
import pytest

from app.sims.common.simulation import PRESETS, load_run_config
from app.sims.ssa.simulation import SSASimulation
from app.sims.ssa.stats import common_histograms, distance, null_band

from .test_tauleap import IMMIGRATION_DEATH, load_config, parse_yaml

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_context")]


def finish(cfg, backend):
    sim = SSASimulation.from_config(cfg, backend)
    while not sim.finished:
        sim.advance()
    sim.close()
    return sim


def test_cuda_tau_leap_matches_the_cpu_engine():
    """Dimer to t = 10, eps 0.03: CUDA (2^16) vs compiled CPU (2048) histograms inside the
    99.9 % band (same algorithm; float32 propensities on the device)."""
    _, cfg = load_run_config(PRESETS / "ssa" / "00-decay-dimerization.yaml")
    ens = dataclasses.replace(cfg.ensemble, algorithm="tau-leap", epsilon=0.03, samples=11)
    gpu = finish(dataclasses.replace(cfg, ensemble=dataclasses.replace(ens, realizations=1 << 16, seed=1)), "cuda")
    cpu = finish(dataclasses.replace(cfg, ensemble=dataclasses.replace(ens, realizations=2048, seed=2)), "cpu")
    for s in range(3):
        ha, hb = common_histograms(gpu.final[:, s], cpu.final[:, s], 12)
        pooled = (ha.counts + hb.counts) / (ha.total + hb.total)
        assert distance(ha.counts, hb.counts) <= null_band(pooled, ha.total, hb.total, 0.999)


def test_cuda_tau_leap_converges_to_the_exact_law():
    """Immigration-death (exact law Poisson(k/g (1 - e^{-g t}))): the leaps' mean bias is first
    order in the step, so it shrinks about 4x from eps = 0.012 to 0.003 and stays inside the leap
    condition's bound eps/2 of the mean; at 2^18 realizations the standard error is 0.12."""
    exact = 1000.0 / 0.1 * (1 - np.exp(-0.1 * 5.0))
    bias, se = {}, {}
    for eps in (0.012, 0.003):
        cfg = load_config(parse_yaml(IMMIGRATION_DEATH % eps))
        sim = finish(dataclasses.replace(cfg, ensemble=dataclasses.replace(cfg.ensemble, realizations=1 << 18)),
                     "cuda")
        x = sim.final[:, 0].astype(float)
        bias[eps], se[eps] = x.mean() - exact, x.std() / np.sqrt(x.size)
        assert abs(bias[eps]) <= eps / 2 * exact + 4 * se[eps], (eps, bias[eps])
        assert abs(x.var() / exact - 1) < 0.02 + eps          # Poisson: variance = mean
    assert abs(bias[0.003]) < abs(bias[0.012]) / 2 + 4 * se[0.003], bias


@pytest.mark.parametrize("lam", [0.7, 6.5, 25.0, 42.0, 75.0, 1234.5, 70000.0])
def test_cuda_poisson_sampler_follows_the_law(lam):
    """The device sampler (float32 inversion below cuda.INVERSION_BELOW from pooled Philox
    words, float32 PTRS with two trials per draw and a Stirling log-pmf up to 2^16, float64
    PTRS above): 2^18 draws, 8 in turn per stream, against the exact pmf of the float32 mean
    (assert_law: 4 standard errors, 99.9 % distance band), and successive draws of a stream
    uncorrelated."""
    import pycuda.gpuarray as gpuarray

    from app.compute.kernels import load_module
    from app.sims.ssa.codegen import kernel_source
    from app.sims.ssa.cuda import INVERSION_BELOW

    from .helpers import assert_poisson_streams

    net = load_config(parse_yaml(IMMIGRATION_DEATH % 0.03)).network()
    module = load_module(kernel_source(net, [0], "tau-leap"), "ssa.cu",
                         {"SSA_BINS": 16, "SSA_INVERSION_BELOW": f"{INVERSION_BELOW!r}f"})
    threads, per = 1 << 15, 8
    out = gpuarray.zeros(threads * per, np.int32)
    module.get_function("ssa_poisson_draws")(out.gpudata, np.int32(threads), np.int32(per), np.float32(lam),
                                             np.uint64(11), block=(256, 1, 1), grid=(threads // 256, 1))
    samples = out.get().astype(np.int64)
    assert_poisson_streams(samples, lam, threads, per)


def test_cuda_tau_leap_against_the_direct_method():
    """Dimer to t = 10 at 2^16 realizations each: eps = 0.01 is inside the direct method's
    99.9 % self-distance band for every species, and the same test rejects eps = 0.06, whose
    leaps (about 0.1, longer than the fast dimerization's relaxation time of about 0.08) widen
    the law of S1 (explicit leaps inflate the variance by about a_relax tau / 2), so the
    comparison can fail."""
    _, cfg = load_run_config(PRESETS / "ssa" / "00-decay-dimerization.yaml")

    def final(algorithm, eps, seed):
        ens = dataclasses.replace(cfg.ensemble, algorithm=algorithm, epsilon=eps, realizations=1 << 16,
                                  seed=seed)
        return finish(dataclasses.replace(cfg, ensemble=ens), "cuda").final

    direct = final("direct", 0.03, 41)

    def outside(eps):
        tau = final("tau-leap", eps, 42)
        flags = []
        for s in range(3):
            ha, hb = common_histograms(tau[:, s], direct[:, s], 10)
            pooled = (ha.counts + hb.counts) / (ha.total + hb.total)
            flags.append(distance(ha.counts, hb.counts) > null_band(pooled, ha.total, hb.total, 0.999))
        return flags

    assert not any(outside(0.01))
    assert any(outside(0.06))
