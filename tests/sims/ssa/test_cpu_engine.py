"""The CPU engine against exact laws, against itself, and across a checkpoint."""

import numpy as np
import pytest

from app.sims.common.simulation import PRESETS, default_preset, load_run_config
from app.sims.ssa.simulation import SSASimulation
from app.sims.ssa.stats import common_histograms, distance, null_band

from .helpers import BIRTH_DEATH, DECAY, assert_law, birth_death_pmf, config, decay_pmf


def run(cfg, backend="cpu", keep_all=True):
    from dataclasses import replace
    if keep_all:
        cfg = replace(cfg, ensemble=replace(cfg.ensemble, snapshot_times=list(cfg.sample_times())))
    sim = SSASimulation.from_config(cfg, backend)
    while not sim.finished:
        sim.advance()
    return sim


@pytest.mark.parametrize("algorithm", ["direct", "logdirect"])
def test_pure_decay_is_binomial(algorithm):
    sim = run(config(DECAY, seed=3, algorithm=algorithm))
    for k in (1, 2, 4):                     # t = 0.5, 1, 2
        assert_law(sim.snapshots[k][:, 0], decay_pmf(sim.times[k]))


@pytest.mark.parametrize("algorithm", ["direct", "logdirect"])
def test_birth_death_is_poisson(algorithm):
    sim = run(config(BIRTH_DEATH, seed=5, algorithm=algorithm))
    for k in (1, 2, 4):                     # t = 5, 10, 20
        assert_law(sim.snapshots[k][:, 0], birth_death_pmf(sim.times[k]))


def test_law_check_can_fail():
    """The check rejects a sample from a slightly different law (here the decay at t = 0.6)."""
    sim = run(config(DECAY, seed=3))
    with pytest.raises(AssertionError):
        assert_law(sim.snapshots[1][:, 0], decay_pmf(0.6))


def test_device_side_statistics_match_states():
    sim = run(config(DECAY, seed=9))
    for k, states in sim.snapshots.items():
        assert np.allclose(sim.mean[k], states.mean(axis=0))
        assert np.allclose(sim.var[k], states.var(axis=0))
        h = sim.frame().histogram(k, 0)
        assert h.total == len(states)


def dimer(seed, realizations=128):
    _, cfg = load_run_config(default_preset("ssa"), overrides=[
        f"ensemble.realizations={realizations}", "ensemble.t_end=0.05", "ensemble.samples=6",
        f"ensemble.seed={seed}"])
    return run(cfg, keep_all=False)


def test_dimer_cpu_vs_cpu_within_self_distance_band():
    a, b = dimer(1), dimer(2)
    for s in range(3):
        ha, hb = common_histograms(a.final[:, s], b.final[:, s], 10)
        pooled = (ha.counts + hb.counts) / (ha.total + hb.total)
        assert distance(ha.counts, hb.counts) < null_band(pooled, ha.total, hb.total, quantile=0.999)
    assert a.engine.reactions_fired != b.engine.reactions_fired   # the seeds did differ


def test_checkpoint_resume_continues_identically():
    _, cfg = load_run_config(PRESETS / "ssa" / "toggle-switch.yaml", overrides=[
        "ensemble.realizations=64", "ensemble.t_end=20", "ensemble.samples=5"])
    whole = run(cfg, keep_all=False)
    first = SSASimulation.from_config(cfg, "cpu")
    while first.k < 3:
        first.advance()
    state = first.state()
    second = SSASimulation.restore(state, "cpu")
    while not second.finished:
        second.advance()
    assert np.array_equal(second.final, whole.final)
    assert second.engine.reactions_fired == whole.engine.reactions_fired


def test_rate_change_between_slices():
    sim = SSASimulation.from_config(config(DECAY, seed=1), "cpu")
    sim.advance()
    while not sim.at_boundary:
        sim.advance()
    sim.steer(f"rates.{sim.net.reaction_names[0]}", 0.0)
    before = sim.engine.states().copy()
    while not sim.finished:
        sim.advance()
    assert np.array_equal(sim.engine.states(), before)    # no decay once the rate is zero
