"""The finite-state-projection solver against laws known in closed form, against exact moment
equations, and against the DSMTS suite's exact means and SDs."""

import numpy as np
import pytest
from scipy.integrate import solve_ivp
from scipy.special import gammaln, hyp1f1
from scipy.stats import poisson

from app.sims.ssa import cme, dsmts

from .exact import BIRTH_DEATH, DIMER, SCHLOGL_SMALL, TELEGRAPH, network


def test_birth_death_is_poisson():
    """From 0, immigration-death has the Poisson law of mean (k/g)(1 - exp(-g t))."""
    sol = cme.solve(network(BIRTH_DEATH), np.linspace(0, 20, 5))
    assert sol.error_bound.max() < 1e-10
    for k, t in enumerate(sol.times):
        pmf = sol.marginal("X", k)
        exact = poisson.pmf(np.arange(len(pmf)), 50 * (1 - np.exp(-0.2 * t)))
        assert np.abs(pmf - exact).sum() < 1e-12 + sol.error_bound[k]


def telegraph_stationary(n, kon, koff, ktx, delta):
    """Peccoud & Ycart (1995): the stationary mRNA law of the two-state gene."""
    a, b, big_k = kon / delta, koff / delta, ktx / delta
    log = (n * np.log(big_k) - gammaln(n + 1) + gammaln(a + n) - gammaln(a) + gammaln(a + b)
           - gammaln(a + b + n))
    return np.exp(log) * hyp1f1(a + n, a + b + n, -big_k)


def test_telegraph_relaxes_to_the_peccoud_ycart_law():
    net = network(TELEGRAPH)
    sol = cme.solve(net, [0.0, 40.0])
    pmf = sol.marginal("M")
    exact = telegraph_stationary(np.arange(len(pmf)), 0.5, 0.5, 20.0, 1.0)
    # relaxation at rate min(kon + koff, delta) = 1: exp(-40) of the start is left
    assert np.abs(pmf - exact).sum() < 1e-9
    states, pi = cme.stationary(net, sol.states.max(axis=0))
    stat = np.bincount(states[:, 2], weights=pi)
    assert np.abs(stat - exact[: len(stat)]).sum() < 1e-9


def linear_moments(net, times):
    """Exact mean and covariance of a network of zero- and first-order reactions: the moment
    equations close (dm/dt = S a(m), dC/dt = J C + C J' + S diag(a(m)) S')."""
    s = net.n_species
    change = net.change.T.astype(float)                                   # (S, M)
    slope = net.reactant_order * net.rates[:, None]                       # a(x) = base + slope x
    base = np.where(net.reactant_order.sum(axis=1) == 0, net.rates, 0.0)
    jac = change @ slope

    def rhs(_, y):
        m, c = y[:s], y[s:].reshape(s, s)
        a = base + slope @ m
        return np.concatenate([change @ a, (jac @ c + c @ jac.T + change @ np.diag(a) @ change.T).ravel()])

    y0 = np.concatenate([net.x0.astype(float), np.zeros(s * s)])
    out = solve_ivp(rhs, (0, times[-1]), y0, t_eval=times, rtol=1e-12, atol=1e-12, method="DOP853")
    return out.y[:s].T, np.array([np.diag(y.reshape(s, s)) for y in out.y[s:].T])


@pytest.mark.parametrize("template", [BIRTH_DEATH, TELEGRAPH])
def test_linear_networks_match_the_moment_equations(template):
    net = network(template)
    times = np.linspace(0, 10, 11)
    mean, var = linear_moments(net, times)
    sol = cme.solve(net, times)
    for k in range(len(times)):
        for s in range(net.n_species):
            m, v, _ = sol.moments(s, k)
            assert abs(m - mean[k, s]) < 1e-8 * (1 + mean[k, s])
            assert abs(v - var[k, s]) < 1e-7 * (1 + var[k, s])


def test_dimerisation_stationary_law_is_the_detailed_balance_product():
    """2P <-> P2 with P + 2 P2 = 100: pi(j + 1) / pi(j) = k1 C(P, 2) / (k2 (j + 1)), P = 100 - 2j."""
    net = network(DIMER)
    states, pi = cme.stationary(net, [100, 50])
    assert len(states) == 51 and (states[:, 0] + 2 * states[:, 1] == 100).all()
    j = np.arange(50)
    p = 100 - 2 * j
    ratio = 0.001 * p * (p - 1) / 2 / (0.01 * (j + 1))
    exact = np.concatenate([[1.0], np.cumprod(ratio)])
    exact /= exact.sum()
    assert np.abs(pi[np.argsort(states[:, 1])] - exact).sum() < 1e-12


def test_schlogl_stationary_law_is_bimodal_and_the_box_holds_it():
    net = network(SCHLOGL_SMALL)
    states, pi = cme.stationary(net, [400])
    pmf = np.bincount(states[:, 0], weights=pi)
    # 1-D birth-death chain: pi(x + 1) / pi(x) = birth(x) / death(x + 1)
    birth = lambda x: 0.15 * x * (x - 1) / 2 + 40.0                              # noqa: E731
    death = lambda x: 2.5e-3 * x * (x - 1) * (x - 2) / 6 + 3.5 * x              # noqa: E731
    x = np.arange(400)
    exact = np.exp(np.concatenate([[0.0], np.cumsum(np.log(birth(x)) - np.log(death(x + 1)))]))
    exact /= exact.sum()
    assert np.abs(pmf - exact).sum() < 1e-10
    assert pmf[300:].sum() < 1e-15


# one case per distinct model (birth X -> 2X from 100 and from 10, immigration-death and its
# local-parameter variant); BIOGPU_SSA_FULL=1 checks every case the projection holds in 3000
# states (about 4 s a case on 2 cores, 00003 a minute)
QUICK = ("00001", "00004", "00020", "00022")


@pytest.mark.skipif(not dsmts.cases(), reason=f"DSMTS suite not found at {dsmts.suite_dir()}")
def test_fsp_of_dsmts_models_gives_the_suites_exact_moments():
    """Cases of the suite imported from SBML (no events or rules, counts <= 1000, box <= 3000
    states): the FSP's mean and SD at all 51 times within 1e-5 (relative) of the suite's exact
    values (printed to 6-7 digits)."""
    import os

    from app.sims.ssa.sbml import load_sbml_network

    names = dsmts.cases() if os.environ.get("BIOGPU_SSA_FULL") else [n for n in QUICK if n in dsmts.cases()]
    solved = 0
    for name in names:
        case = dsmts.load_case(name)
        net = load_sbml_network(case.model)
        if net.events or net.derived or net.x0.max() > 1000:
            continue
        try:
            sol = cme.solve(net, case.times, max_states=3000)
        except cme.CMEError:
            continue
        solved += 1
        for v, species in enumerate(case.species):
            for k in range(len(case.times)):
                m, var, _ = sol.moments(species, k)
                assert abs(m - case.mean[k, v]) < 1e-5 * max(1.0, case.mean[k, v]), (name, species, k)
                assert abs(np.sqrt(var) - case.sd[k, v]) < 1e-5 * max(1.0, case.sd[k, v]), (name, species, k)
    assert solved >= min(len(names), 4)


def test_refuses_what_it_cannot_hold():
    with pytest.raises(cme.CMEError, match="more than"):
        cme.solve(network(BIRTH_DEATH), [0.0, 1.0], max_states=10, cap=[100])
    with pytest.raises(cme.CMEError, match="sorted"):
        cme.solve(network(BIRTH_DEATH), [1.0, 0.5])


def test_truncation_bound_is_the_sink_mass():
    """A box too small on purpose: the reported L1 bound holds against the exact Poisson law."""
    sol = cme.solve(network(BIRTH_DEATH), [0.0, 20.0], cap=[60], tol=1.0)
    pmf = sol.marginal("X")
    exact = poisson.pmf(np.arange(200), 50 * (1 - np.exp(-4.0)))
    err = np.abs(np.pad(pmf, (0, 200 - len(pmf))) - exact).sum()
    assert 0.01 < err <= sol.error_bound[-1]
