"""Steering a developing culture while it runs: blocking the excitatory synapses silences the
neurons that only fire through them, and a steered run replays bit for bit from config.yaml."""

from __future__ import annotations

import numpy as np
import pytest

from app.sims.common.config import ConfigError, dump_yaml
from app.sims.common.session import Session
from app.sims.common.simulation import load_run_config
from app.sims.network.config import steerables
from app.sims.network.model import build_culture
from app.sims.network.simulation import NetworkSimulation
from tests.sims.common.steering_runs import assert_continue_alike, assert_same_arrays, replay, run_steered

from .helpers import config


def bursting(epochs: int = 1):
    """10 x 10 neurons whose radii (2.3) overlap from the start: recurrent excitation makes the
    non-starter neurons fire from the first second (tests/sims/network/test_cuda_engine.py)."""
    cfg = config(culture={"width": 10, "height": 10}, growth={"start_radius": 2.3},
                 run={"epochs": epochs, "epoch_seconds": 0.6, "slice_seconds": 0.02})
    return load_run_config(dump_yaml(cfg), text=True)


def non_starter_spikes_after(session: Session, step: int) -> int:
    culture = build_culture(session.cfg)
    times, neurons = session.arrays["spike_times"], session.arrays["spike_neurons"]
    late = times >= (step + 1) * session.cfg.run.dt
    return int((~culture.starter[neurons[late]]).sum())


def test_blocking_the_excitatory_synapses_silences_the_driven_neurons():
    """Non-starter neurons sit below threshold without input (their injected current holds
    them at 13.5 mV < 15 mV): with EE and EI weights at 0 none of them fires after the block,
    while the same culture unblocked fires them hundreds of times."""
    domain, cfg = bursting()
    blocked = run_steered(domain, cfg, "cpu-reference", [(0, "scale.EE", 0.0, None), (0, "scale.EI", 0.0, None)])
    at = blocked.events[-1].at
    assert non_starter_spikes_after(blocked, at + 48) == 0        # deliveries in flight: the longest delay
    free = Session(domain, cfg, "cpu-reference", handover=False)
    free.run()
    assert non_starter_spikes_after(free, at + 48) > 100
    rate = lambda s: s.arrays["spike_neurons"].size
    assert rate(blocked) < rate(free) / 2


@pytest.mark.parametrize("backend", ["cpu-reference", "cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_a_steered_culture_replays_bit_for_bit(backend):
    domain, cfg = bursting(epochs=2)
    plan = [(0, "stimulate", None, {"kind": "brush", "centre": [5.0, 5.0], "radius": 2.0}),
            (1, "scale.IE", 3.0, None), (1, "growth.target_rate", 5.0, None),
            (2, "stimulate", None, {"kind": "indices", "indices": [0, 1, 2]})]
    live = run_steered(domain, cfg, backend, plan)
    assert live.events[1].old == 1.0 and live.events[2].old == cfg.growth.target_rate
    again = replay(live)
    assert again.events == live.events
    assert_same_arrays(live.arrays, again.arrays)


def test_the_factors_survive_a_checkpoint():
    domain, cfg = bursting(epochs=2)
    sim = NetworkSimulation.from_config(cfg, "cpu-reference")
    sim.advance()
    sim.steer("scale.EE", 0.5)
    sim.steer("growth.target_rate", 3.0)
    sim.advance()
    resumed = NetworkSimulation.restore(sim.state(), "cpu-reference")
    assert resumed.steered == sim.steered
    assert list(resumed.engine.k.w_scale) == [0.5, 1.0, 1.0, 1.0] and resumed.engine.growth.target_rate == 3.0
    assert_continue_alike(sim, resumed)


def test_synapse_kinetics_need_a_restart():
    domain, cfg = bursting()
    session = Session(domain, cfg, "cpu-reference")
    with pytest.raises(ConfigError, match=r"'synapses\.EE\.U' needs a restart"):
        session.steer("synapses.EE.U", 0.2)
    with pytest.raises(ConfigError, match=r"'scale\.EE' = -1\.0 is out of range"):
        session.steer("scale.EE", -1.0)
    assert "stimulate" in {s.key for s in steerables(cfg)}
    assert np.isfinite(cfg.growth.target_rate)
