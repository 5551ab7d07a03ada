"""What the SSA presets and the lesson say they show, checked on the CPU engine and, where the
claim is about a law, on the exact chemical master equation (``app.sims.ssa.cme``).

Fractions from an ensemble of R realizations are judged with Hoeffding's bound
P(|p_hat - p| >= d) <= 2 exp(-2 R d^2): each threshold below keeps a correct engine's false
alarm under 1e-4 given the exact value it is compared with (stated at each assert).
"""

import math

import numpy as np
import pytest

from app.sims.common.simulation import PRESETS, load_run_config
from app.sims.ssa import cme
from app.sims.ssa.simulation import SSASimulation


def preset(name, *overrides):
    return load_run_config(PRESETS / "ssa" / name, overrides=list(overrides))[1]


def run(cfg):
    sim = SSASimulation.from_config(cfg, "cpu")
    while not sim.finished:
        sim.advance()
    sim.close()
    return sim


def hoeffding(r: int, alpha: float = 1e-4) -> float:
    """Deviation d with 2 exp(-2 r d^2) = alpha."""
    return math.sqrt(math.log(2 / alpha) / (2 * r))


def schlogl_rates(x, net):
    """Birth and death rates of the one-species Schlogl chain at counts x."""
    a = net.propensities(np.asarray(x, float)[:, None])
    up = (net.change[:, 0] > 0)
    return a[:, up].sum(axis=1), a[:, ~up].sum(axis=1)


def committor(net, start: int, low: int, high: int) -> float:
    """P(reach ``low`` before ``high`` from ``start``) of a 1-D birth-death chain (exact)."""
    y = np.arange(low + 1, high)
    birth, death = schlogl_rates(y, net)
    rho = np.concatenate([[1.0], np.exp(np.cumsum(np.log(death) - np.log(birth)))])   # rho_low .. rho_{high-1}
    return float(rho[start - low:].sum() / rho.sum())


def test_birth_death_reaches_its_poisson_law():
    """'Poisson stationary law with mean k/g = 50': the stationary law is Poisson(50), the
    law at the preset's t_end is within 0.01 of it (L1), and the run's histogram there matches
    the exact law (chi-square, 1e-4)."""
    from scipy.stats import poisson

    from app.sims.ssa.stats import chi_square_test

    cfg = preset("birth-death.yaml", "ensemble.realizations=4096")
    net = cfg.network()
    states, pi = cme.stationary(net, [200])
    assert np.abs(pi[np.argsort(states[:, 0])] - poisson.pmf(np.arange(201), 50.0)).sum() < 1e-9
    sol = cme.solve(net, [cfg.ensemble.t_end])
    exact = sol.marginal("X")
    assert np.abs(exact - poisson.pmf(np.arange(len(exact)), 50.0)).sum() < 0.015
    assert chi_square_test(run(cfg).final[:, 0], exact)[2] > 1e-4


def test_schlogl_stationary_law_has_its_two_peaks():
    """schlogl.yaml and the lesson: buffered B1 = 1e5, B2 = 2e5 folded into k1 = c1 B1 and
    k3 = c3 B2 (Cao & Petzold's c1 = 3e-7, c3 = 1e-3); the exact stationary law is bimodal with
    its modes within 5 % of 85 and 565 and almost no mass between them."""
    for name in ("schlogl.yaml", "lesson-schlogl-bistable.yaml"):
        net = preset(name).network()
        assert net.rates[0] == pytest.approx(3e-7 * 1e5) and net.rates[2] == pytest.approx(1e-3 * 2e5)
        states, pi = cme.stationary(net, [1200])
        pmf = np.bincount(states[:, 0], weights=pi)
        assert pmf[1100:].sum() < 1e-12                       # the box holds the law (solver floor ~1e-18 a state)
        low, high = np.argmax(pmf[:300]), 300 + np.argmax(pmf[300:])
        assert abs(low - 85) < 0.05 * 85 and abs(high - 565) < 0.05 * 565, (low, high)
        assert pmf[low + 1:high].min() < 0.02 * min(pmf[low], pmf[high])
        assert pmf[200:350].sum() < 0.05


def test_schlogl_lesson_two_fates():
    """The lesson: from X = 250 the ensemble splits into two peaks by t of about 3 and each
    realization then keeps its side; the mean ends between the peaks where almost no
    realization is, with an SD band as wide as the gap; a start of 150 or 400 tips most
    realizations to one side (exact committors checked first)."""
    cfg = preset("lesson-schlogl-bistable.yaml", "ensemble.realizations=1024", "ensemble.snapshot_times=[3.0, 10.0]")
    net = cfg.network()
    q250, q150, q400 = (committor(net, x, 85, 565) for x in (250, 150, 400))
    assert 0.3 < q250 < 0.7 and q150 > 0.99 and q400 < 0.01, (q250, q150, q400)
    sim = run(cfg)
    r = sim.engine.realizations
    d = hoeffding(r)                                          # 0.068 at 1024 realizations
    at3, at10 = sim.snapshots[30][:, 0], sim.snapshots[100][:, 0]
    counts = np.bincount(np.minimum(at3 // 50, 15), minlength=16)  # 50-wide bins
    low_peak, high_peak = counts[:4].max(), counts[8:].max()
    assert counts[4:8].min() < 0.5 * min(low_peak, high_peak), counts     # a dip: two peaks at t = 3
    low2, high2 = at3 < 170, at3 > 330
    assert (at10[low2] < 250).mean() > 0.95 - d and (at10[high2] > 250).mean() > 0.95 - d
    assert abs((at10 < 250).mean() - q250) < 0.1 + d         # the split follows the committor
    mean, sd = at10.mean(), at10.std()
    assert 150 < mean < 450 and (np.abs(at10 - mean) < 50).mean() < 0.05 + d
    assert 2 * sd > 0.7 * (565 - 85)
    for x0, q in ((150, q150), (400, q400)):
        end = run(preset("lesson-schlogl-bistable.yaml", "ensemble.realizations=512", "ensemble.t_end=4",
                         "ensemble.samples=5", f"model.species.X={x0}")).final[:, 0]
        assert abs((end < 250).mean() - q) < 0.02 + hoeffding(512)


def test_toggle_switch_splits_between_two_states():
    """'Bistable; the ensemble splits between U-high and V-high states': the model and its start
    are symmetric under U <-> V, so each side holds half of the decided realizations; at t_end
    almost every realization has one protein at least 3x the other, and both sides are taken."""
    sim = run(preset("toggle-switch.yaml", "ensemble.realizations=1024"))
    u, v = sim.final[:, 0], sim.final[:, 1]
    d = hoeffding(1024)
    u_high, v_high = (u > 3 * v).mean(), (v > 3 * u).mean()
    assert u_high + v_high > 0.9 - d
    assert abs(u_high - v_high) < 2 * d
    assert min(u_high, v_high) > 0.45 - d


def test_lotka_volterra_cycles_with_spreading_phases():
    """'Predator-prey oscillations whose phases spread across the ensemble': from the
    fixed point (1000, 1000) each realization circles it counter-clockwise at about the
    linear frequency sqrt(birth * death) = 10 rad per unit time, while the ensemble's mean stays
    at the fixed point and its SD grows: the phases are spread."""
    times = np.linspace(0, 2, 101)
    sim = run(preset("lotka-volterra.yaml", "ensemble.realizations=256",
                     f"ensemble.snapshot_times=[{','.join(map(str, times))}]"))
    x = np.stack([sim.snapshots[k] for k in sorted(sim.snapshots)]).astype(float) - 1000.0   # (T, R, 2)
    late = times >= 0.4
    angle = np.unwrap(np.arctan2(x[late, :, 1], x[late, :, 0]), axis=0)
    turns = (angle[-1] - angle[0]) / (2 * np.pi)
    expected = 10.0 * 1.6 / (2 * np.pi)                       # 2.5 turns over [0.4, 2]
    assert (np.abs(turns - expected) < 0.5).mean() > 0.9 - hoeffding(256), np.percentile(turns, [5, 50, 95])
    sd = x[:, :, 0].std(axis=1)
    assert sd[-1] > 100 and sd[-1] > 1.5 * sd[len(times) // 5]
    assert abs(x[-1, :, 0].mean()) < 5 * sd[-1] / math.sqrt(256)   # the mean: 5 standard errors


def test_decay_dimerization_reaction_count():
    """'About 385,000 reactions per realization over [0, 10]': 16 realizations within 1 % (the
    GillesPy2 peer run: 385,185 +- 905 SD a realization, so 1 % is 17 standard errors)."""
    for name in ("00-decay-dimerization.yaml", "decay-dimerization-paper.yaml"):
        sim = run(preset(name, "ensemble.realizations=16", "ensemble.samples=2"))
        assert abs(sim.engine.reactions_fired / 16 - 385_000) < 0.01 * 385_000


def test_spatial_grid_is_placed_as_described():
    """'A=100 at the centre cell, B=100 at a 2x2 block; diffusion 0.5, decay 0.1, division 0.0025'."""
    net = preset("spatial-grid.yaml").network()
    x0 = dict(zip(net.species, net.x0))
    a = {s: c for s, c in x0.items() if s.startswith("A_") and c}
    b = {s: c for s, c in x0.items() if s.startswith("B_")}
    assert a == {"A_4_4": 100} and len(b) == 4 and set(b.values()) == {100}
    rows, cols = zip(*[tuple(map(int, s.split("_")[1:])) for s in b])
    assert max(rows) - min(rows) == 1 and max(cols) - min(cols) == 1
    rate = dict(zip(net.reaction_names, net.rates))
    assert rate["D_0_0>1_0"] == 0.5 and rate["decay_0_0"] == 0.1 and rate["div_2_2"] == 0.0025
