"""The work of an exact SSA run: its expected number of reaction events per realization.

A run's cost is its reaction events, not realizations x t_end: a decaying system fires most
of its events early and then idles (decay-dimerization: 1e7 events per unit time at t = 0,
about 4e4 a little later). For a mass-action network the count is the integral of the total
propensity a0 along the reaction-rate equations, dx/dt = sum_j nu_j a_j(x), integrated with
a stiff (linearly implicit) method to t_end (exact in expectation for first-order networks, the mean-field value
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


def mass_action(net: Any, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Propensities (M,) at real-valued counts ``x`` (S,), c_j prod_s g(x_s, m_js) with
    g(x, m) = prod_{k<m} max(x - k, 0) / (k + 1) (the engines' formula), and their Jacobian
    da_j / dx_s (M, S)."""
    order = net.reactant_order
    rates = net.rates.astype(np.float64)
    g = np.ones(order.shape)
    dg = np.zeros(order.shape)
    for k in range(int(order.max(initial=0))):
        active = order > k
        term = np.maximum(x - k, 0.0) / (k + 1)
        dterm = np.where(x - k > 0, 1.0 / (k + 1), 0.0)
        dg = np.where(active, dg * term + g * dterm, dg)
        g = np.where(active, g * term, g)
    ones = np.ones((order.shape[0], 1))
    before = np.cumprod(np.hstack([ones, g[:, :-1]]), axis=1)               # prod over s' < s
    after = np.cumprod(np.hstack([ones, g[:, :0:-1]]), axis=1)[:, ::-1]    # prod over s' > s
    return rates * g.prod(axis=1), rates[:, None] * dg * before * after


RTOL, ATOL = 1e-3, 1e-2      # the integration's local error control (counts, events)


def rate_equations(net: Any, t_end: float) -> Workload:
    """Integral of a0 along the reaction-rate equations from ``net.x0`` to ``t_end``: linearly
    implicit Euler (stable on stiff networks) with step doubling, whose difference controls
    the local error and whose Richardson extrapolation makes the result second order. NumPy
    only: an estimate is wanted before a run, without scipy's import on the way."""
    change_t = net.change.astype(np.float64).T                               # (S, M)
    n = change_t.shape[0]

    def step(y: np.ndarray, h: float) -> np.ndarray:
        a, da = mass_action(net, y[:n])
        # einsum, not BLAS: a threaded BLAS product of these small matrices waits on its
        # threads 20x longer than it computes on a busy two-core machine
        f = np.append(np.einsum("sm,m->s", change_t, a), a.sum())
        jac = np.zeros((n + 1, n + 1))
        jac[:n, :n] = np.einsum("sm,mk->sk", change_t, da)
        jac[n, :n] = da.sum(axis=0)
        return y + np.linalg.solve(np.eye(n + 1) - h * jac, h * f)

    y = np.append(net.x0.astype(np.float64), 0.0)
    t, h = 0.0, t_end * 1e-9
    with np.errstate(all="ignore"):
        for _ in range(100_000):
            if t >= t_end:
                return Workload(float(y[-1]), True)
            h = min(h, t_end - t)
            big = step(y, h)
            half = step(step(y, h / 2), h / 2)
            err = float(np.max(np.abs(half - big) / (ATOL + RTOL * np.abs(half))))
            if not np.isfinite(err):
                break
            if err <= 1.0:
                t, y = t + h, 2 * half - big
            h *= min(4.0, max(0.2, 0.9 / np.sqrt(max(err, 1e-12))))
    a, _ = mass_action(net, net.x0.astype(np.float64))           # no solution: the initial rate
    return Workload(float(a.sum() * t_end), False)


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
