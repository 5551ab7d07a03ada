"""The channel lesson and the recorded-data preset do what their descriptions say (CPU engine).

The lesson (lesson-model-a-small.yaml) runs as shipped: Model A fitted to its surrogate with
1 pA noise by a population of 400 for 400 generations (160,400 model evaluations). The noise
sets the floor: the mean squared residual at the true rates is the noise variance, 1 pA^2.
"""

from __future__ import annotations

import numpy as np
import pytest

from app.sims.channel.simulation import PHASES, ChannelSimulation
from app.sims.common.simulation import find_preset, load_run_config


def run(name: str, overrides: list[str] | None = None, watch=None) -> ChannelSimulation:
    _, cfg = load_run_config(find_preset(name), overrides=overrides or [])
    sim = ChannelSimulation.from_config(cfg, "cpu")
    while not sim.finished:
        frame = sim.advance()
        if watch is not None:
            watch(sim, frame)
    return sim


class FamilyErrors:
    """Per generation, the best fit's RMS distance from the noise-free currents relative to
    their RMS, for the activation family (the large currents) and the deactivation tails."""

    def __init__(self):
        self.rows: list[tuple[float, float]] = []

    def __call__(self, sim: ChannelSimulation, frame) -> None:
        if not self.rows:
            self.truth = sim.engine.simulate(sim.model.true_values[None, :])[0]
            off = np.asarray(frame.offsets)
            self.masks = []
            for family in ("activation", "deactivation"):
                mask = np.zeros(self.truth.size, bool)
                for i, label in enumerate(frame.sweep_labels):
                    if label.split()[0] == family:
                        mask[off[i]:off[i + 1]] = True
                self.masks.append(mask)
        r = frame.best_traces - self.truth
        self.rows.append(tuple(float(np.sqrt(np.mean(r[m] ** 2) / np.mean(self.truth[m] ** 2)))
                               for m in self.masks))


def floor(sim: ChannelSimulation) -> float:
    """chi^2 (mean squared residual) of the true parameters: the noise in the data."""
    truth = sim.model.true_values
    return float(sim.engine.evaluate_params(truth[None, :])[0])


@pytest.fixture(scope="module")
def lesson():
    errors = FamilyErrors()
    sim = run("channel/lesson-model-a-small", watch=errors)
    sim.family_errors = np.array(errors.rows)
    return sim


@pytest.mark.slow
def test_lesson_best_chi2_falls_in_steps_and_the_median_follows(lesson):
    best, median = np.array(lesson.best_history), np.array(lesson.median_history)
    assert best.size == lesson.cfg.ga.generations + 1
    assert (np.diff(best) <= 0).all()                              # elitism: never worse
    drops = np.diff(best) < 0
    assert 0.1 < drops.mean() < 0.9                                # steps: drops and plateaus
    assert median[-1] < 1.5 * best[-1] and median[0] > 4 * best[0]  # the median comes down with it
    assert median[-1] / median[0] < 1e-3


@pytest.mark.slow
def test_lesson_levels_off_above_zero_at_the_noise_floor(lesson):
    """"With noise the best chi2 levels off above zero": at the noise variance (1 pA^2), no
    lower, and flat over the last 50 generations; the fitted traces lie on the data."""
    best = np.array(lesson.best_history)
    noise = floor(lesson)
    assert noise == pytest.approx(lesson.cfg.data.noise_sd ** 2, rel=0.05)
    assert noise * 0.99 < best[-1] < noise * 1.05
    assert best[-51] - best[-1] < 0.05 * best[-1]
    residual = lesson.best_traces - lesson.target
    assert np.sqrt(np.mean(residual ** 2)) == pytest.approx(lesson.cfg.data.noise_sd, rel=0.03)


@pytest.mark.slow
def test_lesson_parameter_history_settles_on_the_true_rates(lesson):
    p = np.array(lesson.param_history)                              # normalised to the ranges
    assert np.abs(p[-50:] - p[-1]).max() < 0.01                     # settled for 50 generations
    np.testing.assert_allclose(lesson.best_params, lesson.model.true_values, rtol=0.02)


@pytest.mark.slow
def test_lesson_try_noise_free_chi2_keeps_falling(lesson):
    """"noise_sd 0 (chi2 keeps falling)": far below the noisy run's floor, still falling."""
    sim = run("channel/lesson-model-a-small", ["data.noise_sd=0.0"])
    best = np.array(sim.best_history)
    assert best[-1] < 0.1 * lesson.best_history[-1]
    assert best[-1] < 0.5 * best[-51]


@pytest.mark.slow
def test_lesson_try_population_20_converges_slower(lesson):
    """"a population of 20 (fewer chances: slower, noisier convergence)"."""
    sim = run("channel/lesson-model-a-small", ["ga.population=20"])
    best = np.array(sim.best_history)
    assert best[-1] > 2 * lesson.best_history[-1]


def test_recordings_preset_fits_by_cmaes_then_lm_with_intervals():
    """recordings-two-state-k: "Per-family recordings at 0.1 and 0.02 ms (49,932 points)
    fitted by CMA-ES and Levenberg-Marquardt, with confidence intervals"; the recordings are
    Model A's true values integrated by another method (Radau), so the best chi2 is small but
    not zero, and the fit lands on the true values."""
    sim = run("channel/recordings-two-state-k")
    assert sim.target.size == 49_932
    phases = {PHASES[i] for i in sim.phase_history}
    assert phases == {"cmaes", "lm"}
    assert 0.0 < sim.best_chi2 < 1e-3                                # pA^2: integrator differences only
    np.testing.assert_allclose(sim.best_params, sim.model.true_values, rtol=1e-3)
    iv = sim.intervals
    assert iv is not None and not iv.warnings
    assert (iv.sd > 0).all() and ((iv.lower <= iv.best) & (iv.best <= iv.upper)).all()


@pytest.mark.slow
def test_lesson_traces_close_onto_the_large_currents_first_then_the_tails(lesson):
    """"the fitted traces close onto the data, first the large currents, then the tails": the
    activation family (RMS ~300 pA) comes within 5 % of the noise-free currents at least 40
    generations before the deactivation tails (RMS ~110 pA) do, and both end within 1 %."""
    rel = lesson.family_errors
    first = [int(np.argmax(rel[:, k] < 0.05)) for k in range(2)]
    assert (rel[:, 0] < 0.05).any() and (rel[:, 1] < 0.05).any()
    assert first[1] - first[0] >= 40, first
    assert (rel[-1] < 0.01).all()
