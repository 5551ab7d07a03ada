"""Tau-leaping: the compiled engine against the NumPy reference (bit for bit), the Poisson
sampler against exact laws, leaps against the exact law of an immigration-death process, counts
never negative (the critical-reaction rule), and algorithm names checked."""

from dataclasses import replace

import numpy as np
import pytest

from app.sims.common.config import ConfigError, parse_yaml
from app.sims.ssa.config import load_config
from app.sims.ssa.simulation import SSASimulation
from app.sims.ssa.tauleap import poisson

from .helpers import assert_law, poisson_pmf

IMMIGRATION_DEATH = """
domain: ssa
model:
  species: {X: 0}
  parameters: {k: 1000.0, g: 0.1}
  reactions: [{reactants: {}, products: {X: 1}, rate: k}, {reactants: {X: 1}, rate: g}]
ensemble: {realizations: 4000, t_end: 5.0, samples: 2, seed: 3, algorithm: tau-leap, epsilon: %s}
"""

DIMER_EXTINCTION = """
domain: ssa
model:
  species: {A: 40, B: 25, C: 0}
  reactions:
    - {reactants: {A: 1, B: 1}, products: {C: 1}, rate: 0.05}
    - {reactants: {A: 2}, products: {}, rate: 0.2}
    - {reactants: {C: 1}, products: {A: 1}, rate: 0.01}
ensemble: {realizations: 2000, t_end: 20.0, samples: 21, seed: 9, algorithm: tau-leap, epsilon: 0.5}
"""


def finish(text: str) -> SSASimulation:
    sim = SSASimulation.from_config(load_config(parse_yaml(text)), "cpu")
    while not sim.finished:
        sim.advance()
    return sim


@pytest.mark.parametrize("lam", [0.7, 6.5, 42.0, 1234.5])
def test_poisson_sampler_follows_the_law(lam):
    """Inversion below 10, PTRS above: mean, variance and histogram of 20000 draws against
    the exact pmf (assert_law: 4 standard errors, 99.9 % distance band)."""
    draws = np.zeros(1, np.uint64)
    samples = np.array([poisson(lam, np.uint64(5), np.uint64(0), draws, 0) for _ in range(20000)])
    assert_law(samples, poisson_pmf(lam, int(lam + 12 * np.sqrt(lam) + 20)))


def test_leaps_converge_to_the_exact_law():
    """Immigration-death is Poisson(k/g (1 - e^{-g t})) at every t. With eps = 0.003 the leaps
    match it (assert_law); with eps = 0.03 (~100 molecules a leap) the mean stays within
    the leap condition's relative change eps."""
    exact = 1000.0 / 0.1 * (1 - np.exp(-0.1 * 5.0))
    fine = finish(IMMIGRATION_DEATH % 0.003)
    assert_law(fine.final[:, 0], poisson_pmf(exact, int(exact + 12 * np.sqrt(exact))))
    coarse = finish(IMMIGRATION_DEATH % 0.03)
    assert abs(coarse.mean[-1, 0] / exact - 1) < 0.03


def test_counts_never_go_negative():
    """A large eps with few molecules: critical reactions fire one at a time, so no count
    drops below zero at any sample, and the state reaches extinction of B or A cleanly."""
    sim = finish(DIMER_EXTINCTION)
    assert (sim.mean >= 0).all() and sim.final.min() >= 0
    assert sim.mean[-1, 0] < 40


def test_unknown_algorithm_is_an_error():
    with pytest.raises(ConfigError, match="algorithm"):
        load_config(parse_yaml(IMMIGRATION_DEATH.replace("tau-leap", "tauleap") % 0.03))
    from app.sims.ssa.cpu import CpuEnsemble
    net = load_config(parse_yaml(IMMIGRATION_DEATH % 0.03)).network()
    with pytest.raises(ValueError, match="unknown SSA algorithm 'tau-leap'"):
        CpuEnsemble(net, 4, 1, "tau-leap", [0], 8)
    with pytest.raises(ValueError, match="unknown SSA algorithm 'ssa'"):
        CpuEnsemble(net, 4, 1, "ssa", [0], 8)


def test_tau_leap_refuses_events():
    from pathlib import Path
    pytest.importorskip("libsbml")
    cfg_text = f"domain: ssa\nsbml: {Path(__file__).parent / 'data' / 'hill-events.xml'}\n" \
               "ensemble: {algorithm: tau-leap}\n"
    with pytest.raises(ConfigError, match="mass-action networks without events"):
        load_config(parse_yaml(cfg_text))


def test_checkpoint_resumes_bit_for_bit():
    cfg = load_config(parse_yaml(IMMIGRATION_DEATH % 0.03))
    cfg = replace(cfg, ensemble=replace(cfg.ensemble, realizations=64, samples=6))
    whole = SSASimulation.from_config(cfg, "cpu")
    while not whole.finished:
        whole.advance()
    part = SSASimulation.from_config(cfg, "cpu")
    for _ in range(3):
        part.advance()
    resumed = SSASimulation.restore(part.state(), "cpu")
    while not resumed.finished:
        resumed.advance()
    assert np.array_equal(resumed.final, whole.final)


@pytest.mark.parametrize("preset,t_end", [("00-decay-dimerization", 1.0), ("schlogl", 0.5)])
def test_compiled_equals_numpy_reference(preset, t_end):
    """Same Philox draws in the same order, same float64 arithmetic: identical ensembles, also
    when the two advance in different slices."""
    from app.sims.common.simulation import PRESETS, load_run_config
    from app.sims.ssa.tauleap import TauLeapEnsemble
    from app.sims.ssa.tauleap_numpy import TauLeapReference

    net = load_run_config(PRESETS / "ssa" / f"{preset}.yaml")[1].network()
    out = []
    for engine_class, steps in ((TauLeapEnsemble, 1 << 30), (TauLeapReference, 3)):
        engine = engine_class(net, 24, 77, [0], 16, 0.03)
        states = []
        for t in np.linspace(0, t_end, 3)[1:]:
            while not engine.advance(float(t), steps):
                pass
            states.append(engine.states())
        out.append(np.array(states))
    assert np.array_equal(out[0], out[1])
