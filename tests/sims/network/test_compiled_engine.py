"""The compiled (numba) network engine against the NumPy reference.

Same noise, same update rules, synaptic jumps added in the same order: the spike trains agree
exactly and the state to float64 rounding (math.exp vs NumPy's exp, one ulp at most per call).
"""

import numpy as np

from app.sims.network.compiled import CompiledEngine
from app.sims.network.cpu import CpuEngine
from app.sims.network.model import Constants, build_culture
from app.sims.common.engine import make_engine
from tests.sims.network.helpers import config, engine


def test_spikes_and_state_match_the_reference_with_growth_and_resume():
    cfg = config(culture={"width": 12, "height": 12})
    ref, fast = engine(cfg, radius=2.0), engine(cfg, radius=2.0, cls=CompiledEngine)
    total = 0
    for nsteps in (700, 1500, 2100):            # chunks across noise blocks
        a, b = ref.advance(nsteps), fast.advance(nsteps)
        np.testing.assert_array_equal(a[0], b[0])
        np.testing.assert_array_equal(a[1], b[1])
        total += a[0].size
        ref.grow(0.1)
        fast.grow(0.1)
    assert total > 50                                # the culture was active
    sa, sb = ref.state(), fast.state()
    for key in ("step", "refrac", "counts", "hist", "syn_last"):
        np.testing.assert_array_equal(sa[key], sb[key])
    for key in ("V", "gE", "gI", "syn_u", "syn_r", "radius"):
        np.testing.assert_allclose(sb[key], sa[key], rtol=1e-9, atol=1e-12)
    resumed = engine(cfg, radius=2.0, cls=CompiledEngine)     # the reference's checkpoint
    resumed.restore(sa)
    a, b = ref.advance(500), resumed.advance(500)
    np.testing.assert_array_equal(a[1], b[1])


def test_backend_names_pick_the_engines():
    cfg = config(culture={"width": 4, "height": 4})
    culture, consts = build_culture(cfg), Constants.from_config(cfg)
    args = (culture, consts, cfg.growth, cfg.run.seed, cfg.growth.start_radius)
    assert isinstance(make_engine("network", "cpu", *args), CompiledEngine)
    assert type(make_engine("network", "cpu-reference", *args)) is CpuEngine


def test_compiled_noise_matches_the_numpy_block():
    from app.sims.network.compiled import _noise
    from app.sims.network.engine import noise_block

    for seed, m0 in ((7, 0), (2**40 + 3, 12345)):         # odd start: words 2, 3 first
        ref = noise_block(seed, 37, m0, 64)
        out = np.empty((64, 37))
        _noise(np.uint64(seed & 0xFFFFFFFF), np.uint64(seed >> 32), m0, out)
        np.testing.assert_allclose(out, ref, rtol=1e-13, atol=1e-14)


def test_results_are_bit_identical_for_any_partition_and_thread_count(monkeypatch):
    """Partitions of the culture, taken by 1 or 2 threads (each its own block, then the others'
    leftovers), give the same spikes and the same state to the last bit."""
    from app.compute.cpu_threads import max_threads, threads

    cfg = config(culture={"width": 10, "height": 10})
    states = []
    for parts, n_threads in ((1, 1), (3, 1), (4, 2), (7, 2), (70, 2)):    # 70: a mask bit per 2 parts
        monkeypatch.setattr(CompiledEngine, "_partition_count", lambda self, p=parts: p)
        monkeypatch.setattr(CompiledEngine, "_threads", lambda self, n=n_threads: n)
        with threads(min(n_threads, max_threads())):
            fast = engine(cfg, radius=2.0, cls=CompiledEngine)
            spikes = fast.advance(1200)
            assert fast._parts == parts
        states.append((spikes, fast.state()))
    parts_now = [3]                                # and a change of partitions mid-run
    monkeypatch.setattr(CompiledEngine, "_partition_count", lambda self: parts_now[0])
    with threads(min(2, max_threads())):
        fast = engine(cfg, radius=2.0, cls=CompiledEngine)
        first = fast.advance(750)
        parts_now[0] = 7
        second = fast.advance(450)
    assert first[0].size > 20 and second[0].size > 20
    states.append(((np.r_[first[0], second[0]], np.r_[first[1], second[1]]), fast.state()))
    (s0, st0) = states[0]
    assert s0[0].size > 20
    for spikes, st in states[1:]:
        np.testing.assert_array_equal(spikes[1], s0[1])
        for key in ("V", "gE", "gI", "syn_u", "syn_r", "syn_last"):
            np.testing.assert_array_equal(st[key], st0[key])


def test_chunks_of_one_step_and_the_longest_delay_match_the_reference(monkeypatch):
    """Delays of 1, 4, 6 and 48 steps (chunks of one step; the longest delay the ring allows),
    five partitions on two threads: the NumPy engine's spike trains."""
    import dataclasses

    from app.compute.cpu_threads import max_threads, threads

    base = config(culture={"width": 12, "height": 12})
    types = [dataclasses.replace(t, delay=d) for t, d in zip(base.synapses.types(), (0.0, 0.3e-3, 0.5e-3, 4.7e-3))]
    cfg = dataclasses.replace(base, synapses=dataclasses.replace(
        base.synapses, EE=types[0], EI=types[1], IE=types[2], II=types[3]))
    assert cfg.delay_steps() == (1, 4, 6, 48)
    monkeypatch.setattr(CompiledEngine, "_partition_count", lambda self: 5)
    monkeypatch.setattr(CompiledEngine, "_threads", lambda self: 2)
    with threads(min(2, max_threads())):
        ref, fast = engine(cfg, radius=2.0), engine(cfg, radius=2.0, cls=CompiledEngine)
        a, b = ref.advance(1500), fast.advance(1500)
    assert fast._chunk() == 1 and a[0].size > 100
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
