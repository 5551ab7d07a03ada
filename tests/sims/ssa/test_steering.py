"""Steering an SSA ensemble while it runs: a changed rate moves the mean to its new law, a
steered run replays bit for bit from its config.yaml, explore mode re-runs from t = 0, and the
events survive a checkpoint."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from app.sims.common.config import ConfigError
from app.sims.common.session import Session
from app.sims.common.simulation import PRESETS, load_run_config
from app.sims.common.steering import SteeringEvent
from app.sims.ssa.simulation import PREVIEW_FRACTION, PREVIEW_MIN, SSASimulation
from tests.sims.common.steering_runs import assert_continue_alike, assert_same_arrays, replay, run_steered

BIRTH_DEATH = PRESETS / "ssa" / "birth-death.yaml"     # 0 -> X at k = 10, X -> 0 at g X, g = 0.2


def birth_death(*overrides: str):
    return load_run_config(BIRTH_DEATH, overrides=["ensemble.realizations=400", "ensemble.samples=31",
                                                   "ensemble.t_end=30", *overrides])


def test_a_changed_rate_moves_the_mean_to_its_new_law():
    """From X(0) = 0 the count is Poisson at every time, its mean following dm/dt = k - g m;
    after k -> 30 at t_a the mean at t_end is 150 + (m(t_a) - 150) exp(-g (t_end - t_a)),
    and the ensemble mean of R realizations is within 5 standard errors sqrt(m / R) of it."""
    domain, cfg = birth_death("ensemble.realizations=2000", "ensemble.t_end=40", "ensemble.samples=41")
    session = run_steered(domain, cfg, "cpu-reference", [(8, "rates.birth", 30.0, None)])
    (event,) = session.events
    assert event.old == 10.0 and event.value == 30.0 and event.at >= 8
    k, g, r = 10.0, 0.2, 2000
    t_a, t_end = session.arrays["times"][event.at], 40.0
    assert event.t == t_a                                  # the time axis position of the event
    m_a = k / g * (1 - math.exp(-g * t_a))
    expected = 30.0 / g + (m_a - 30.0 / g) * math.exp(-g * (t_end - t_a))
    mean = session.arrays["mean"][-1, 0]
    assert abs(mean - expected) < 5 * math.sqrt(expected / r), (mean, expected)
    assert abs(session.arrays["mean"][event.at, 0] - m_a) < 5 * math.sqrt(m_a / r)   # sampled before it


@pytest.mark.parametrize("backend", ["cpu-reference", "cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_a_steered_run_replays_bit_for_bit(backend):
    domain, cfg = birth_death()
    plan = [(3, "rates.birth", 25.0, None), (3, "rates.death", 0.5, None), (9, "initial.X", 7, None)]
    live = run_steered(domain, cfg, backend, plan)
    assert [e.key for e in live.events] == ["rates.birth", "rates.death", "initial.X"]
    again = replay(live)
    assert again.events == live.events
    assert_same_arrays(live.arrays, again.arrays)
    assert not np.array_equal(live.arrays["mean"], Session(domain, cfg, backend, handover=False).run().mean)


@pytest.mark.parametrize("backend", ["cpu-reference", "cpu"])
def test_a_change_inside_a_sample_interval_replays_bit_for_bit(backend, monkeypatch):
    """Ten-second sample intervals of some 100 reactions per realization take several slices:
    the changes are taken inside them (``within`` > 0), and the replay stops there too. Slices
    are sized by the wall clock; here the live run's shrink (a tiny slice time) while the
    replay's grow, so the replay meets the changes only by stopping at their ``within``."""
    domain, cfg = birth_death("ensemble.samples=4")
    plan = [(0, "rates.birth", 25.0, None), (3, "initial.X", 7, None), (5, "rates.death", 0.5, None)]
    with monkeypatch.context() as patch:
        patch.setattr("app.sims.ssa.simulation.CPU_SLICE_SECONDS", 1e-9)
        live = run_steered(domain, cfg, backend, plan)
    assert any(e.within > 0 for e in live.events), live.events
    again = replay(live)
    assert again.events == live.events
    assert_same_arrays(live.arrays, again.arrays)


def test_a_change_inside_an_interval_is_refused_on_cuda_naming_it():
    """The CUDA engine runs whole sample intervals, so it cannot stop where a CPU change was
    made inside one: the run is refused before anything is allocated."""
    from app.sims.ssa.config import check_before_run

    _, cfg = birth_death()
    steered = replace(cfg, steering=(SteeringEvent(0, "rates.birth", 25.0, 10.0, None, 0.0, 64),))
    with pytest.raises(ConfigError, match=r"steering event 0 was made inside a sample interval.*within: 64"):
        check_before_run(steered, "cuda")
    check_before_run(steered, "cpu")
    check_before_run(replace(steered, steering=(replace(steered.steering[0], within=0),)), "cuda")


def explored(backend: str, *overrides: str) -> tuple[Session, set[int]]:
    """A birth-death run in explore mode whose birth rate is set to 4 before its first slice;
    (the session, the ensemble sizes its frames showed)."""
    domain, cfg = birth_death(*overrides)
    frames = []
    session = Session(domain, cfg, backend, handover=False, on_frame=frames.append)
    session.steer("mode", "explore")
    session.steer("rates.birth", 4.0)
    session.run()
    assert [e.key for e in session.events] == ["mode", "rates.birth"]
    return session, {f.realizations for f in frames}


def assert_a_fresh_run_of_the_changed_model(session: Session) -> None:
    """The re-run's arrays are the changed model's run from t = 0, and the replay's."""
    cfg = session.cfg
    changed = replace(cfg, model=replace(cfg.model, parameters={**cfg.model.parameters, "k": 4.0}))
    fresh = Session(session.domain, changed, session.backend, handover=False)
    fresh.run()
    assert_same_arrays(session.arrays, fresh.arrays)
    assert_same_arrays(session.arrays, replay(session).arrays)


def test_explore_reruns_from_t0_a_first_look_then_the_full_ensemble():
    """Explore: the ensemble after a change is the run of the changed model from t = 0."""
    session, sizes = explored("cpu-reference", "ensemble.realizations=512")
    assert sizes == {max(PREVIEW_MIN, 512 // PREVIEW_FRACTION), 512}
    assert_a_fresh_run_of_the_changed_model(session)


@pytest.mark.parametrize("at_once, first_look", [(100, 100), (512, None)])
def test_explore_looks_first_at_no_fewer_realizations_than_the_engine_runs_at_once(monkeypatch, at_once,
                                                                                  first_look):
    """An engine that advances ``at_once`` realizations in the time of one (a GPU's resident
    threads) gets a first look of at least that many; holding the whole ensemble, none."""
    from app.sims.ssa.cpu import CpuEnsemble

    monkeypatch.setattr(CpuEnsemble, "at_once", at_once)
    _, sizes = explored("cpu-reference", "ensemble.realizations=512", "ensemble.t_end=2")
    assert sizes == ({first_look, 512} if first_look else {512})


@pytest.mark.gpu
def test_cuda_explore_runs_an_ensemble_the_gpu_holds_without_a_first_look():
    """On CUDA the first look is skipped where the device holds the whole ensemble at once (it
    would take as long as the ensemble); the re-run is the changed model's run from t = 0."""
    session, sizes = explored("cuda", "ensemble.realizations=4096", "ensemble.t_end=2")
    assert sizes == {4096}
    assert_a_fresh_run_of_the_changed_model(session)


def test_the_events_survive_a_checkpoint():
    domain, cfg = birth_death()
    sim = SSASimulation.from_config(cfg, "cpu-reference")
    while sim.step < 5 or not sim.at_boundary:
        sim.advance()
    sim.steer("rates.birth", 30.0)
    sim.steer("initial.X", 3)
    sim.advance()
    resumed = SSASimulation.restore(sim.state(), "cpu-reference")
    assert resumed.steered == sim.steered and resumed.step == sim.step
    assert list(resumed.net.rates) == list(sim.net.rates)
    assert_continue_alike(sim, resumed)


@pytest.mark.parametrize("key,value,message", [
    ("rates.nothing", 1.0, "'rates.nothing' cannot be steered; steerable keys: mode, rates.birth"),
    ("rates.birth", -1.0, "'rates.birth' = -1.0 is out of range"),
    ("rates.birth", "fast", "'rates.birth' is a number, not 'fast'"),
    ("initial.X", 2.5, "'initial.X' is a whole number"),
    ("mode", "wander", "'mode': 'wander' is not one of continue, explore"),
    ("ensemble.realizations", 10, "'ensemble.realizations' needs a restart"),
])
def test_a_bad_change_is_refused_at_once_naming_it(key, value, message):
    domain, cfg = birth_death()
    session = Session(domain, cfg, "cpu-reference")
    with pytest.raises(ConfigError, match=message.replace(".", r"\.").replace("(", r"\(")):
        session.steer(key, value)


def test_a_bad_steering_list_names_the_line():
    text = BIRTH_DEATH.read_text() + "steering:\n  - {at: 2, key: rates.birth, value: 1.0}\n" \
        "  - {at: 3, key: rates.bogus, value: 1.0}\n"
    with pytest.raises(ConfigError, match=r"<text>:\d+: steering\.1\.key: 'rates\.bogus' cannot be steered"):
        load_run_config(text, text=True)
    with pytest.raises(ConfigError, match=r"steering\.0\.at: -1 is out of range"):
        load_run_config(BIRTH_DEATH.read_text() + "steering:\n  - {at: -1, key: mode, value: explore}\n",
                        text=True)


def test_the_cli_replays_a_steered_run_folder(tmp_path):
    """A steered run written as a run folder (as the GUI saves it); `run` of its config.yaml
    gives the same results.npz."""
    from app.cli import main
    from app.sims.common.session import write_run_outputs

    domain, cfg = birth_death()
    live = run_steered(domain, cfg, "cpu-reference", [(4, "rates.death", 0.05, None)])
    folder = write_run_outputs(tmp_path / "live", live.steered_config(), live.arrays, live.summary)
    assert "steering:" in (folder / "config.yaml").read_text()
    assert main(["run", str(folder / "config.yaml"), "--backend", "cpu-reference", "--no-png",
                 "--out", str(tmp_path / "again")]) == 0
    with np.load(folder / "results.npz") as a, np.load(tmp_path / "again" / "results.npz") as b:
        assert_same_arrays(dict(a), dict(b))
