"""The CUDA engine against exact laws and against the CPU engine (GPU machine only)."""

import numpy as np
import pytest

from app.compute import philox
from app.compute.kernels import load_module
from app.sims.common.simulation import default_preset, load_run_config
from app.sims.ssa import codegen
from app.sims.ssa.simulation import SSASimulation
from app.sims.ssa.stats import common_histograms, distance, histogram, null_band

from .helpers import BIRTH_DEATH, DECAY, assert_law, birth_death_pmf, config, decay_pmf
from .test_cpu_engine import run

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_context")]

PHILOX_PROBE = r'''
#include "philox.cuh"
extern "C" __global__ void probe(const unsigned long long* seed, const unsigned long long* stream,
                                 const unsigned long long* n, unsigned int* out, unsigned int* keyed,
                                 float* u, int count)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= count) return;
    const philox_u4 w = philox_draw(seed[i], stream[i], n[i]);
    const philox_u4 v = philox_draw(philox_schedule(seed[i]), stream[i], n[i]);   // held keys
    out[4 * i] = w.x; out[4 * i + 1] = w.y; out[4 * i + 2] = w.z; out[4 * i + 3] = w.w;
    keyed[4 * i] = v.x; keyed[4 * i + 1] = v.y; keyed[4 * i + 2] = v.z; keyed[4 * i + 3] = v.w;
    u[i] = philox_uniform_f32(w.x);
}
'''


def test_device_philox_is_bit_identical_to_numpy():
    import pycuda.gpuarray as ga
    rng = np.random.default_rng()
    count = 4096
    seed = rng.integers(0, 2**64, count, dtype=np.uint64)
    stream = rng.integers(0, 2**64, count, dtype=np.uint64)
    n = rng.integers(0, 2**64, count, dtype=np.uint64)
    out = ga.to_gpu(np.full(4 * count, 0xDEADBEEF, np.uint32))
    keyed = ga.to_gpu(np.full(4 * count, 0xDEADBEEF, np.uint32))
    u = ga.to_gpu(np.full(count, np.nan, np.float32))
    fn = load_module(PHILOX_PROBE, "probe.cu").get_function("probe")
    fn(ga.to_gpu(seed), ga.to_gpu(stream), ga.to_gpu(n), out, keyed, u, np.int32(count),
       block=(128, 1, 1), grid=(count // 128, 1))
    words = out.get().reshape(count, 4).T
    expected = np.stack([philox.draw(int(s), np.array([st]), np.array([k]))[:, 0]
                         for s, st, k in zip(seed, stream, n)], axis=1)
    assert np.array_equal(words, expected)
    assert np.array_equal(keyed.get().reshape(count, 4).T, expected)
    assert np.array_equal(u.get(), philox.to_unit_float32(expected[0]))


def test_device_byte_selector_moves_by_the_signed_byte():
    """The straight-line firing's prmt (``codegen.SIGNED_BYTE``) on the device: byte j of the
    eight bytes (hi:lo), sign-extended, for every j and random words."""
    import pycuda.gpuarray as ga
    source = codegen.SIGNED_BYTE + r'''
extern "C" __global__ void probe(const unsigned* lo, const unsigned* hi, const int* j, int* out, int count)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) out[i] = ssa_signed_byte(lo[i], hi[i], SSA_PICK_BASE + j[i] * SSA_PICK_STEP);
}
'''
    rng = np.random.default_rng()
    count = 8192
    lo, hi = (rng.integers(0, 2**32, count, dtype=np.uint64).astype(np.uint32) for _ in range(2))
    j = np.arange(count, dtype=np.int32) % 8
    out = ga.to_gpu(np.zeros(count, np.int32))
    fn = load_module(source, "probe.cu", {"SSA_PICK_BASE": codegen.PICK_BASE,
                                          "SSA_PICK_STEP": codegen.PICK_STEP}).get_function("probe")
    fn(ga.to_gpu(lo), ga.to_gpu(hi), ga.to_gpu(j), out, np.int32(count), block=(128, 1, 1), grid=(count // 128, 1))
    words = (hi.astype(np.uint64) << np.uint64(32)) | lo.astype(np.uint64)
    expected = ((words >> (8 * j).astype(np.uint64)) & np.uint64(0xFF)).astype(np.uint8).view(np.int8)
    assert np.array_equal(out.get(), expected.astype(np.int32))


@pytest.mark.parametrize("algorithm", ["direct", "logdirect"])
def test_pure_decay_is_binomial(algorithm):
    sim = run(config(DECAY, seed=3, algorithm=algorithm, realizations=20000), backend="cuda")
    for k in (1, 2, 4):
        assert_law(sim.snapshots[k][:, 0], decay_pmf(sim.times[k]))


@pytest.mark.parametrize("algorithm", ["direct", "logdirect"])
def test_birth_death_is_poisson(algorithm):
    sim = run(config(BIRTH_DEATH, seed=5, algorithm=algorithm, realizations=20000), backend="cuda")
    for k in (1, 2, 4):
        assert_law(sim.snapshots[k][:, 0], birth_death_pmf(sim.times[k]))


def test_device_statistics_match_the_states():
    sim = run(config(BIRTH_DEATH, seed=8, realizations=30000), backend="cuda")
    for k, states in sim.snapshots.items():
        assert np.allclose(sim.mean[k], states.mean(axis=0), rtol=1e-12, atol=1e-9)
        assert np.allclose(sim.var[k], states.var(axis=0), rtol=1e-9, atol=1e-9)
        h = sim.frame().histogram(k, 0)
        if k:
            assert np.array_equal(h.counts, histogram(states[:, 0], len(h.counts)).counts)


def test_dimer_cuda_vs_cpu_within_self_distance_band():
    _, cfg = load_run_config(default_preset("ssa"), overrides=[
        "ensemble.t_end=0.5", "ensemble.samples=6", "ensemble.realizations=512"])
    cpu = run(cfg, keep_all=False)
    from dataclasses import replace
    gpu_cfg = replace(cfg, ensemble=replace(cfg.ensemble, realizations=1 << 16, seed=77))
    gpu = run(gpu_cfg, backend="cuda", keep_all=False)
    for s in range(3):
        ha, hb = common_histograms(gpu.final[:, s], cpu.final[:, s], 10)
        pooled = (ha.counts + hb.counts) / (ha.total + hb.total)
        assert distance(ha.counts, hb.counts) < null_band(pooled, ha.total, hb.total, quantile=0.999)
    # mass balance S1 + 2 S2 + 2 S3 + decayed = X1(0): S1 + 2 S2 + 2 S3 never grows
    assert (gpu.final[:, 0] + 2 * gpu.final[:, 1] + 2 * gpu.final[:, 2] <= 100000).all()


def test_cuda_checkpoint_resume_continues_identically():
    cfg = config(BIRTH_DEATH, seed=4, realizations=5000)
    whole = run(cfg, backend="cuda", keep_all=False)
    first = SSASimulation.from_config(cfg, "cuda")
    first.advance()
    first.advance()
    state = first.state()
    first.close()
    second = SSASimulation.restore(state, "cuda")
    while not second.finished:
        second.advance()
    assert np.array_equal(second.final, whole.final)


def test_spatial_grid_cuda_vs_cpu_within_self_distance_band():
    path = default_preset("ssa").parent / "spatial-grid.yaml"
    settings = ["ensemble.t_end=2", "ensemble.samples=3"]
    _, cpu_cfg = load_run_config(path, overrides=[*settings, "ensemble.realizations=1000"])
    _, gpu_cfg = load_run_config(path, overrides=[*settings, "ensemble.realizations=65536",
                                                  "ensemble.seed=31"])
    cpu = run(cpu_cfg, keep_all=False)
    gpu = run(gpu_cfg, backend="cuda", keep_all=False)
    n = cpu.net.grid_shape[0]
    centre = int(cpu.net.grid_index[n // 2, n // 2])
    columns = {"total A": lambda f: f[:, cpu.net.grid_index.ravel()].sum(axis=1),
               "A at the centre": lambda f: f[:, centre]}
    for name, column in columns.items():
        ha, hb = common_histograms(column(gpu.final), column(cpu.final), 10)
        pooled = (ha.counts + hb.counts) / (ha.total + hb.total)
        d = distance(ha.counts, hb.counts)
        assert d < null_band(pooled, ha.total, hb.total, quantile=0.999), name
