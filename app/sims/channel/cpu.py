"""The CPU engine: currents and chi^2 of a population in float64 (the reference)."""

from __future__ import annotations

import numpy as np

from app.sims.channel.model import ChannelModel
from app.sims.channel.numerics import expm, propagate, steady_state
from app.sims.channel.protocol import Protocol
from app.sims.common.progress import SetupProgress

BAD_SCORE = np.float64(np.finfo(np.float32).max)   # score of an individual whose simulation failed


def simulate(model: ChannelModel, protocol: Protocol, params: np.ndarray) -> np.ndarray:
    """Currents (pop, n_points) in pA for parameter rows ``params`` (pop, P)."""
    params = np.atleast_2d(np.asarray(params, np.float64))
    pop = params.shape[0]
    g = params[:, model.conductance]
    out = np.empty((pop, protocol.n_points))
    q_cache: dict[float, np.ndarray] = {}
    e_cache: dict[tuple[float, float], np.ndarray] = {}

    def q(v: float) -> np.ndarray:
        if v not in q_cache:
            q_cache[v] = model.q_matrix(params, v)
        return q_cache[v]

    def e(v: float, tau: float) -> np.ndarray:
        if (v, tau) not in e_cache:
            e_cache[(v, tau)] = expm(q(v) * tau)
        return e_cache[(v, tau)]

    col = 0
    for sweep in protocol.sweeps:
        p = steady_state(q(sweep.holding))
        for v, tau, n in sweep.ops:
            if n == 0:
                p = (e(v, tau) @ p[:, :, None])[:, :, 0]
                continue
            states = propagate(e(v, tau), p, n)
            open_prob = states[..., model.open_mask].sum(axis=-1)
            out[:, col:col + n] = g[:, None] * open_prob * (v - model.e_rev)
            p = states[:, -1]
            col += n
    return out


def chi2(currents: np.ndarray, target: np.ndarray) -> np.ndarray:
    """The paper's score: mean squared residual over all sweeps and points; failures score BAD_SCORE."""
    with np.errstate(over="ignore", invalid="ignore"):
        score = np.mean((currents - target) ** 2, axis=-1)
    return np.where(np.isfinite(score), np.minimum(score, BAD_SCORE), BAD_SCORE)


def evaluate(model: ChannelModel, protocol: Protocol, params: np.ndarray, target: np.ndarray,
             chunk: int = 4096) -> np.ndarray:
    """chi^2 (pop,) of every individual, in chunks to bound memory."""
    params = np.atleast_2d(params)
    report = SetupProgress(f"scoring {len(params):,} individuals", len(params))
    scores = []
    for i in range(0, len(params), chunk):
        report(i)
        scores.append(chi2(simulate(model, protocol, params[i:i + chunk]), target))
    return np.concatenate(scores)
