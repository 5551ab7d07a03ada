"""The work of an exact SSA run: its expected number of reaction events per realization.

A run's cost is its reaction events, not realizations x t_end: a decaying system fires most
of its events early and then idles (decay-dimerization: 1e7 events per unit time at t = 0,
about 4e4 a little later). For a mass-action network the count is the integral of the total
propensity a0 along the reaction-rate equations, dx/dt = sum_j nu_j a_j(x), integrated with
a stiff solver to t_end (exact in expectation for first-order networks, the mean-field value
for the others). A network with rate laws, rules or events runs a short exact pilot ensemble
on the NumPy reference engine instead, within a budget of wall time; where that pilot does not
reach t_end, the count continues at each realization's total propensity where it stopped, and
the estimate is marked as extrapolated. Cached per model class and t_end.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

PILOT_REALIZATIONS = 16
PILOT_SECONDS = 0.25          # wall-time budget of a pilot
PILOT_CHUNK = 16              # engine steps between two looks at the clock


@dataclass(frozen=True)
class Workload:
    """Reaction events per realization to t_end; ``measured``: not extrapolated."""

    events_per_realization: float
    measured: bool


_cache: dict[tuple[str, float], Workload] = {}


def workload(cfg: Any) -> Workload:
    """The events per realization of ``cfg``'s model to ``ensemble.t_end`` (see the module doc)."""
    from app.sims.common.estimate import model_class

    key = (model_class("ssa", cfg), float(cfg.ensemble.t_end))
    if key not in _cache:
        net = cfg.network()
        _cache[key] = pilot(cfg, net) if net.general else rate_equations(net, float(cfg.ensemble.t_end))
    return _cache[key]


def mass_action(net: Any, x: np.ndarray) -> np.ndarray:
    """Propensities (M,) at real-valued counts ``x`` (S,): c_j prod_s binom(x_s, m_js)."""
    a = net.rates.astype(np.float64).copy()
    for j, pairs in enumerate(net.reactant_lists()):
        for s, m in pairs:
            v = max(float(x[s]), 0.0)
            for k in range(m):
                a[j] *= max(v - k, 0.0) / (k + 1)
    return a


def rate_equations(net: Any, t_end: float) -> Workload:
    """Integral of a0 along the reaction-rate equations from ``net.x0`` to ``t_end``."""
    from scipy.integrate import solve_ivp

    change = net.change.astype(np.float64)

    def rhs(_t: float, y: np.ndarray) -> np.ndarray:
        a = mass_action(net, y[:-1])
        return np.append(change.T @ a, a.sum())

    y0 = np.append(net.x0.astype(np.float64), 0.0)
    sol = solve_ivp(rhs, (0.0, t_end), y0, method="LSODA", rtol=1e-5, atol=1e-6)
    if not sol.success:
        return Workload(float(mass_action(net, y0[:-1]).sum() * t_end), False)
    return Workload(float(sol.y[-1, -1]), True)


def pilot(cfg: Any, net: Any) -> Workload:
    """A few exact realizations on the NumPy reference engine, within :data:`PILOT_SECONDS`."""
    from app.sims.ssa.cpu import CpuEnsemble

    ens = cfg.ensemble
    realizations = max(1, min(PILOT_REALIZATIONS, ens.realizations))
    engine = CpuEnsemble(net, realizations, ens.seed, ens.algorithm, [], 1)
    deadline = time.perf_counter() + PILOT_SECONDS
    complete = False
    with np.errstate(all="ignore"):
        while time.perf_counter() < deadline:
            if engine.advance(float(ens.t_end), PILOT_CHUNK):
                complete = True
                break
    events = float(engine.reactions_fired)
    if not complete:
        left = np.where(engine.active, float(ens.t_end) - engine.t, 0.0)
        events += float(np.sum(engine.a.sum(axis=1) * np.maximum(left, 0.0)))
    return Workload(events / realizations, complete)
