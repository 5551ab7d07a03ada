"""Steering a running fit: GA settings changed between generations take effect from the next
one and the steered fit replays bit for bit from config.yaml."""

from __future__ import annotations

import numpy as np
import pytest

from app.sims.channel.simulation import ChannelSimulation
from app.sims.common.config import ConfigError
from app.sims.common.registry import DOMAINS
from app.sims.common.session import Session
from tests.sims.common.steering_runs import assert_same_arrays, replay, run_steered

from .helpers import preset


def small_fit():
    return DOMAINS["channel"], preset("model-a-surrogate", dt=5.0, population=32, generations=6)


@pytest.mark.parametrize("backend", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_a_steered_fit_replays_bit_for_bit(backend):
    domain, cfg = small_fit()
    plan = [(1, "ga.mutation", 0.3, None), (2, "ga.crossover", 0.9, None), (3, "ga.generations", 5, None)]
    live = run_steered(domain, cfg, backend, plan)
    assert [e.at for e in live.events] == [2, 3, 4]          # one iteration a slice
    assert live.summary["generations"] == 5
    again = replay(live)
    assert again.events == live.events
    assert_same_arrays(live.arrays, again.arrays)
    plain = Session(domain, cfg, backend, handover=False)
    plain.run()
    assert not np.array_equal(plain.arrays["history_best_chi2"][:5], live.arrays["history_best_chi2"][:5])


def test_a_change_made_during_a_generation_shows_in_that_generations_frame(monkeypatch):
    """A change that arrives while a generation runs (here: from inside its slice, as another
    thread's does) takes effect at that generation's end and its frame carries it, not the
    frame of the generation after; the run replays bit for bit."""
    domain, cfg = small_fit()
    session = Session(domain, cfg, "cpu", handover=False)
    advance = ChannelSimulation.advance
    slices = []

    def in_flight(sim, until=None, within=0):
        slices.append(sim.step)
        if len(slices) == 3:
            session.steer("ga.mutation", 0.3)
        return advance(sim, until, within)

    monkeypatch.setattr(ChannelSimulation, "advance", in_flight)
    frames = []
    session.on_frame = frames.append
    session.run()
    (event,) = session.events
    assert [len(f.events) for f in frames[:3]] == [0, 0, 1] and event.at == 3
    monkeypatch.setattr(ChannelSimulation, "advance", advance)
    assert_same_arrays(session.arrays, replay(session).arrays)


def test_the_population_size_needs_a_restart():
    domain, cfg = small_fit()
    with pytest.raises(ConfigError, match=r"'ga\.population' needs a restart"):
        Session(domain, cfg, "cpu").steer("ga.population", 64)


def test_a_fixed_parameter_stays_put_and_a_freed_one_moves_again():
    """Mutation 0.5: about half the genes change each generation, so a free column moves."""
    domain, cfg = DOMAINS["channel"], preset("model-a-surrogate", dt=5.0, population=32, generations=8,
                                             mutation=0.5)
    sim = ChannelSimulation(cfg, "cpu")
    name = sim.model.param_names[0]
    sim.advance()
    sim.steer(f"fixed.{name}", float(sim.model.lower[0]))
    for _ in range(3):
        sim.advance()
        assert np.all(sim.engine.state()["population"][:, 0] == sim.model.lower[0])
    resumed = ChannelSimulation.restore(sim.state(), "cpu")
    assert resumed.engine.model.upper[0] == sim.model.lower[0]
    sim.steer(f"fixed.{name}", None)
    assert sim.steered[-1].old == sim.model.lower[0]
    sim.advance()
    assert np.any(sim.engine.state()["population"][:, 0] != sim.model.lower[0])
    with pytest.raises(ConfigError, match=rf"'fixed\.{name}' = .* is out of range"):
        Session(domain, cfg, "cpu").steer(f"fixed.{name}", float(sim.model.upper[0]) * 2 + 1)
