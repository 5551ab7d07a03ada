"""The network presets do what their descriptions say (CPU engine, the presets as shipped).

The lesson (lesson-bursts-appear.yaml) runs at its own size: 100 neurons, 100 epochs of 5 s
(500 s simulated), about 10 s on 2 cores. Every number asserted is one its text states. On a
GPU machine the same checks run on the CUDA engine (its spike trains are the CPU engine's).
"""

from __future__ import annotations

import numpy as np
import pytest

from app.compute.device import backend_context
from app.sims.common.simulation import find_preset, load_run_config
from app.sims.network.model import build_culture, connectivity, detect_bursts
from app.sims.network.simulation import NetworkSimulation


def run(name: str, overrides: list[str] | None = None, backend: str = "cpu"):
    _, cfg = load_run_config(find_preset(name), overrides=overrides or [])
    with backend_context(backend):
        sim = NetworkSimulation.from_config(cfg, backend)
        while not sim.finished:
            sim.advance()
        arrays, _ = sim.results()
        sim.close()
    h = {k: np.asarray(v, float) for k, v in sim.history.items()}
    return cfg, sim.culture, h, arrays


@pytest.fixture(scope="module", params=["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def lesson(request):
    return run("network/lesson-bursts-appear", backend=request.param) + (request.param,)


def test_lesson_silence_then_synapses_at_epoch_6(lesson):
    cfg, culture, h, arrays, _ = lesson
    syn = h["epoch_synapses"]
    assert cfg.growth.start_radius == 0.4 and cfg.run.epoch_seconds == 5.0
    assert (syn[:5] == 0).all() and syn[5] > 0                # the circles overlap at epoch 6
    # only the 10 starters fire while unconnected: about 2 Hz each, 0.2 Hz on average
    assert culture.starter.sum() == 10
    assert 0.15 < h["epoch_mean_rate"][:5].mean() < 0.3
    early = arrays["spike_times"] < 5 * cfg.run.epoch_seconds
    assert culture.starter[arrays["spike_neurons"][early]].all()


def test_lesson_bursts_appear_once_the_radius_passes_about_1_4(lesson):
    cfg, _, h, _, _ = lesson
    bursting = h["epoch_bursts_per_minute"] > 0
    first = int(np.argmax(bursting))
    assert bursting.any() and 45 <= first <= 65, first           # "for about 55 epochs"
    assert 1.3 < h["epoch_mean_radius"][first] < 1.5              # "passes about 1.4"
    per_neuron = h["epoch_synapses"][first - 1] / cfg.n_neurons
    assert 14 <= per_neuron <= 22                                 # "some 18 synapses per neuron"
    assert bursting[first:].mean() > 0.4                          # bursting, not a one-off
    assert set(h["epoch_bursts_per_minute"][first:first + 10]) >= {0.0, 12.0}


def test_lesson_bursts_recruit_most_neurons_within_tens_of_ms(lesson):
    """Every detected burst: most of the 100 neurons spike within 50 ms of its start."""
    cfg, culture, h, arrays, _ = lesson
    t, who = arrays["spike_times"], arrays["spike_neurons"]
    counts = np.bincount((t / cfg.analysis.burst_bin).astype(np.int64))
    starts = detect_bursts(counts, cfg.analysis.burst_fraction * culture.n) * cfg.analysis.burst_bin
    assert starts.size >= 20
    recruited = [np.unique(who[(t >= s) & (t < s + 0.05)]).size for s in starts]
    assert min(recruited) > culture.n // 2, recruited


def test_lesson_rate_overshoots_and_radii_shrink_back(lesson):
    cfg, _, h, _, _ = lesson
    rate, bpm = h["epoch_mean_rate"], h["epoch_bursts_per_minute"]
    dr = np.diff(np.concatenate([[cfg.growth.start_radius], h["epoch_mean_radius"]]))
    burst, quiet = bpm > 0, bpm == 0
    first = int(np.argmax(burst))
    target = cfg.growth.target_rate
    # a few epochs after the first burst, every epoch with a burst overshoots the target
    assert (rate[burst & (np.arange(rate.size) >= first + 5)] > target).all()
    assert 1.05 < np.median(rate[bpm == 12]) < 1.3                  # "1.1 Hz for one burst"
    if (bpm >= 24).any():
        assert rate[bpm >= 24].min() > 1.9                          # "2 Hz or more for two"
    assert rate[quiet].max() < 0.3                                 # back to the starters' 0.2 Hz
    silent = dr[:first].mean()
    assert 0.015 < silent < 0.019                                  # "about 0.017 per epoch"
    shrink = dr < 0
    assert shrink.sum() >= 10 and burst[shrink].all()              # radii shrink back in burst epochs
    later = burst & (np.arange(rate.size) >= first + 5)
    assert (dr[later] < 0.25 * silent).all()                       # or at least stop growing
    assert (dr[quiet] > 0).all()                                   # and grow again without one
    late = dr[-30:].mean()
    assert late < 0.5 * silent                                     # growth levels off
    assert 1.55 < h["epoch_mean_radius"][-20:].min() and h["epoch_mean_radius"][-20:].max() < 1.8


def test_lesson_most_starters_circles_vanish(lesson):
    _, culture, _, arrays, _ = lesson
    r = arrays["final_radius"]
    assert (r[culture.starter] == 0).sum() >= 7
    assert (r[~culture.starter] > 1.0).all()


@pytest.mark.slow
def test_lesson_try_target_2_hz_grows_bigger_circles(lesson):
    """The lesson's "Try": at a 2 Hz target an epoch with one burst (about 1.1 Hz) falls short
    and still grows the circles, only two bursts shrink them: bigger circles, more synapses."""
    cfg, _, h1, _, backend = lesson
    _, _, h2, _ = run("network/lesson-bursts-appear", ["growth.target_rate=2.0"], backend)
    r = h2["epoch_mean_radius"]
    dr = np.diff(np.concatenate([[cfg.growth.start_radius], r]))
    bpm = h2["epoch_bursts_per_minute"]
    assert (bpm == 12).sum() >= 10 and (dr[bpm == 12] > 0).all()
    assert (bpm >= 24).sum() >= 5 and np.median(dr[bpm >= 24]) < 0.5 * dr[bpm == 0].min()
    assert r[-20:].mean() > h1["epoch_mean_radius"][-20:].mean() + 0.03
    assert h2["epoch_synapses"][-20:].mean() > 1.03 * h1["epoch_synapses"][-20:].mean()


def test_development_fast_circles_touch_after_11_epochs():
    """00-development-10x10-fast: "the circles touch after 11 epochs" (its first 11 epochs)."""
    _, _, h, _ = run("network/00-development-10x10-fast", ["run.epochs=11"])
    assert (h["epoch_synapses"][:10] == 0).all() and h["epoch_synapses"][10] > 0


def test_equilibrium_preset_has_the_papers_synapse_count():
    """equilibrium-100x100: "every radius 2.0 (about 464,000 synapses)", its start radius
    2.001 giving the paper's 464,108 (1 : 46.4 neurons to synapses)."""
    _, cfg = load_run_config(find_preset("network/equilibrium-100x100"))
    culture = build_culture(cfg)
    radius = np.full(culture.n, cfg.growth.start_radius)
    conn = connectivity(culture.width, culture.height, radius, culture.inhibitory, cfg.growth.weight_scale)
    assert conn.size == 464_108 and conn.size / culture.n == pytest.approx(46.4, abs=0.05)
