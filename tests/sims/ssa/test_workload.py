"""The SSA's work model: expected reaction events per realization."""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.sims.common.simulation import PRESETS, load_run_config
from app.sims.ssa.cpu import CpuEnsemble
from app.sims.ssa.workload import RTOL, mass_action, rate_equations, workload


def _birth_death(*overrides):
    return load_run_config(PRESETS / "ssa" / "birth-death.yaml", overrides=list(overrides))[1]


def _expected_events(k: float, g: float, t: float) -> float:
    """Immigration-death from X = 0: E[births + deaths] = k t + k (t - (1 - e^{-g t}) / g)."""
    return k * t + k * (t - (1.0 - math.exp(-g * t)) / g)


def test_rate_equations_count_a_first_order_networks_expected_events():
    cfg = _birth_death()
    got = rate_equations(cfg.network(), 30.0).events_per_realization
    assert abs(got / _expected_events(10.0, 0.2, 30.0) - 1) < RTOL     # the local error control


def test_rate_equations_agree_with_scipys_stiff_solver_on_a_stiff_network():
    """decay-dimerization's dimerization equilibrates within ~1e-3 time units of a 10-unit run."""
    scipy_integrate = pytest.importorskip("scipy.integrate")
    net = load_run_config(PRESETS / "ssa" / "00-decay-dimerization.yaml")[1].network()

    def rhs(_t, y):
        a, _ = mass_action(net, y[:-1])
        return np.append(net.change.T @ a, a.sum())

    ref = scipy_integrate.solve_ivp(rhs, (0.0, 10.0), np.append(net.x0.astype(float), 0.0),
                                    method="LSODA", rtol=1e-8, atol=1e-6).y[-1, -1]
    assert abs(rate_equations(net, 10.0).events_per_realization / ref - 1) < RTOL


def test_the_count_is_the_mean_of_an_exact_ensembles_firings():
    cfg = _birth_death("ensemble.t_end=5")
    blocks = []
    for seed in range(11, 21):            # ten independent ensembles: a spread of their means
        engine = CpuEnsemble(cfg.network(), 40, seed, "direct", [], 1)
        while not engine.advance(5.0, 4096):
            pass
        blocks.append(engine.reactions_fired / 40)
    firings = np.array(blocks)
    mean, se = firings.mean(), firings.std(ddof=1) / math.sqrt(len(firings))
    assert abs(workload(cfg).events_per_realization - mean) < 4 * se + 1e-9


def test_a_decaying_system_is_not_charged_for_its_idle_time():
    """decay-dimerization fires ~1e7 events per unit time at t = 0 and ends idle: to t = 1e5
    it fires a few times what it fires to t = 10, not 1e4 times."""
    short = load_run_config(PRESETS / "ssa" / "00-decay-dimerization.yaml")[1]
    long = load_run_config(PRESETS / "ssa" / "00-decay-dimerization.yaml", overrides=["ensemble.t_end=100000.0"])[1]
    ratio = workload(long).events_per_realization / workload(short).events_per_realization
    assert 1.0 < ratio < 10.0
