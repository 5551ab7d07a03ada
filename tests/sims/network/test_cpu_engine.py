"""The CPU engine: membrane integration, a driven synapse, spontaneous rates, state round trip."""

import numpy as np
import pytest

from app.sims.network.engine import noise_block
from app.sims.network.model import Constants, build_culture, tm_deliver

from .helpers import config, engine, spikes_per_neuron


def test_isolated_membrane_follows_exponential_euler_solution():
    cfg = config(culture={"width": 1, "height": 1, "starter_fraction": 0.0, "inhibitory_fraction": 0.0},
                 neuron={"Vinit": 0.0, "Inoise_min": 0.0, "Inoise_max": 0.0, "Vthresh": 1.0})
    eng = engine(cfg)
    k = Constants.from_config(cfg)
    v_inf = cfg.neuron.Rm * cfg.neuron.Iinject
    tau = cfg.neuron.Rm * cfg.neuron.Cm
    for n in (1, 10, 100, 1000, 3000):
        eng.advance(n - eng.step)
        exact = v_inf * (1 - np.exp(-n * cfg.run.dt / tau))
        assert eng.V[0] == pytest.approx(exact, rel=1e-12)
        assert eng.V[0] == pytest.approx(v_inf * (1 - k.c1 ** n), rel=1e-12)


def test_noise_is_standard_normal_and_reproducible():
    z = noise_block(9, 500, 3, 400)
    assert z.shape == (400, 500)
    assert abs(z.mean()) < 4 / np.sqrt(z.size) and abs(z.std() - 1) < 0.01
    assert np.array_equal(noise_block(9, 500, 100, 5), z[97:102])


def test_driven_synapse_follows_the_tsodyks_markram_recursion():
    # neuron 0 fires every refractory period + 1 step (threshold far below reset); neuron 1 never fires
    cfg = config(culture={"width": 2, "height": 1, "starter_fraction": 0.0, "inhibitory_fraction": 0.0},
                 neuron={"Inoise_min": 0.0, "Inoise_max": 0.0})
    culture = build_culture(cfg)
    culture.vthresh[:] = [-1.0, 1.0]
    eng = engine(cfg, radius=1.0, culture=culture)
    conn = eng.connectivity()
    w = conn.W[(conn.pre == 0) & (conn.post == 1)][0]
    k = Constants.from_config(cfg)
    jumps, spikes = [], []
    prev = eng.gE[1]
    for m in range(1200):
        s, n = eng.advance(1)
        spikes += list(s[n == 0])
        jump = eng.gE[1] - prev * k.decay[0]
        if abs(jump) > 1e-15:
            jumps.append((m, jump))
        prev = eng.gE[1]
    period = cfg.neuron.Trefract_exc / cfg.run.dt + 1
    assert np.all(np.diff(spikes) == period)
    assert [m for m, _ in jumps] == [s + k.delay[0] for s in spikes if s + k.delay[0] < 1200]
    u, r = cfg.synapses.EE.U, 1.0
    isi = period * cfg.run.dt
    for i, (_, jump) in enumerate(jumps):
        if i:
            u, r = tm_deliver(u, r, isi, cfg.synapses.EE.U, cfg.synapses.EE.tau_rec, cfg.synapses.EE.tau_facil)
        assert jump == pytest.approx(w * u * r, rel=1e-9)
    assert jumps[-1][1] < 0.5 * jumps[0][1]     # EE synapses depress under a 320 Hz train


def test_starters_fire_spontaneously_at_paper_rates_and_others_stay_silent():
    cfg = config(culture={"width": 20, "height": 10})       # reference layout: 20 starters
    eng = engine(cfg)                                          # start radius 0.4: no synapses
    assert eng.n_synapses == 0
    seconds = 20
    _, neurons = eng.advance(int(seconds / cfg.run.dt))
    rates = spikes_per_neuron(neurons, eng.c.n) / seconds
    starters = eng.c.starter
    assert (rates[~starters] == 0).all()
    # the paper's 0.02-6 Hz band, widened by three Poisson standard errors of a 20-s count
    se = np.sqrt(6.0 / seconds)
    assert (rates[starters] <= 6 + 3 * se).all() and (rates[starters] >= 0.02).all()
    assert 0.5 < rates[starters].mean() < 6


def test_state_round_trip_continues_identically():
    cfg = config(culture={"width": 6, "height": 6})
    whole = engine(cfg, radius=1.2)
    a = whole.advance(3000)
    b = whole.advance(3000)
    first = engine(cfg, radius=1.2)
    first.advance(3000)
    state = first.state()
    second = engine(cfg, radius=0.1)
    second.restore(state)
    c = second.advance(3000)
    assert a[0].size > 0 and b[0].size > 0
    assert np.array_equal(b[0], c[0]) and np.array_equal(b[1], c[1])
    assert np.allclose(whole.V, second.V, rtol=0, atol=0)


def test_growth_keeps_the_state_of_persisting_synapses():
    cfg = config(culture={"width": 5, "height": 5})
    eng = engine(cfg, radius=1.0)
    eng.advance(5000)
    before = eng.state()
    eng.grow(0.5)      # high rates over a short "epoch": radii shrink or grow a little
    after = eng.state()
    keys_b = set(zip(before["syn_pre"], before["syn_post"]))
    for i, key in enumerate(zip(after["syn_pre"], after["syn_post"])):
        if key in keys_b:
            j = list(zip(before["syn_pre"], before["syn_post"])).index(key)
            assert after["syn_u"][i] == before["syn_u"][j] and after["syn_last"][i] == before["syn_last"][j]
    assert (after["counts"] == 0).all()
