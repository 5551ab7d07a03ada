"""The Schlögl lesson's steering claim: dragging the production rate (0 -> X) across the
bistable range moves the ensemble from the low peak to the high one.

Where the model is bistable the claim is about the committor, the exact probability that a
realization from X = 250 reaches the low stable state before the high one (a 1-D birth-death
chain, ``committor``); past the range the deterministic drift is positive everywhere below the
high state. A steered replay of the lesson then shows it on the engine (Hoeffding's bound,
false alarm 1e-4 per fraction).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from app.sims.common.session import Session
from app.sims.common.simulation import PRESETS, load_run_config
from app.sims.common.steering import SteeringEvent
from tests.sims.ssa.test_presets import committor, hoeffding

LESSON = PRESETS / "ssa" / "lesson-schlogl-bistable.yaml"
PRODUCTION = 2                       # the reaction 0 -> X


def with_production(net, k3: float):
    rates = net.rates.copy()
    rates[PRODUCTION] = k3
    return net.with_values(rates=rates)


def stable_states(net) -> list[int]:
    """Counts where the mean drift (births - deaths) turns from positive to negative."""
    x = np.arange(0, 1500)
    a = net.propensities(x[:, None].astype(float))
    up = net.change[:, 0] > 0
    drift = a[:, up].sum(axis=1) - a[:, ~up].sum(axis=1)
    return [int(x[i]) for i in np.flatnonzero((drift[:-1] > 0) & (drift[1:] <= 0))]


def test_the_production_rate_moves_the_split_across_the_bistable_range():
    """'At 100 almost every realization falls to the low peak (near 33); around 200 they split
    about evenly; past about 250 the low state is gone and every one climbs to the high peak
    (near 590)'."""
    _, cfg = load_run_config(LESSON)
    net = cfg.network()
    assert net.reaction_names[PRODUCTION] == "production" and net.rates[PRODUCTION] == 200.0
    low, high = stable_states(with_production(net, 100.0))
    assert abs(low - 33) <= 2 and committor(with_production(net, 100.0), 250, low, high) > 0.99
    low, high = stable_states(with_production(net, 200.0))
    assert 0.35 < committor(with_production(net, 200.0), 250, low, high) < 0.65
    (only,) = stable_states(with_production(net, 250.0))
    assert abs(only - 590) <= 10


@pytest.mark.slow
def test_a_steered_replay_of_the_lesson_shows_both_ends():
    """The lesson with the production rate steered at t = 0 (as a config.yaml of explore mode
    carries it): at 100 the realizations end low, at 250 high, each in at least 0.95 - d of
    them."""
    shorter = ["ensemble.realizations=256", "ensemble.t_end=6", "ensemble.samples=7"]
    domain, cfg = load_run_config(LESSON, overrides=shorter)
    d = hoeffding(256)
    for k3, ends_low in ((100.0, True), (250.0, False)):
        steering = (SteeringEvent(0, "mode", "explore"), SteeringEvent(0, "rates.production", k3))
        session = Session(domain, replace(cfg, steering=steering), "cpu", handover=False)
        session.run()
        final = session.arrays["final"][:, 0]
        fraction = (final < 250).mean() if ends_low else (final > 400).mean()
        assert fraction > 0.95 - d, (k3, fraction)
