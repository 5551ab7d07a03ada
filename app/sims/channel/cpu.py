"""The CPU engine: currents and chi^2 of a population in float64 (the reference)."""

from __future__ import annotations

import numpy as np

from app.sims.channel.model import ChannelModel
from app.sims.channel.numerics import expm, propagate, steady_state
from app.sims.channel.protocol import Op, Protocol, magnus_generator
from app.sims.common.progress import SetupProgress

BAD_SCORE = np.float64(np.finfo(np.float32).max)   # score of an individual whose simulation failed
RAMP_BLOCK = 256   # ramp steps whose exponentials are computed at once


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
    with np.errstate(invalid="ignore", over="ignore"):
        for sweep in protocol.sweeps:
            p = steady_state(q(sweep.holding))
            for op in sweep.ops:
                if op.ramp:
                    states = ramp_states(model, params, op, p)
                elif op.record:
                    states = propagate(e(op.v, op.tau), p, op.n)
                else:
                    states = (np.linalg.matrix_power(e(op.v, op.tau), op.n) @ p[:, :, None]).transpose(0, 2, 1)
                p = states[:, -1]
                if op.record:
                    open_prob = states[..., model.open_mask].sum(axis=-1)
                    out[:, col:col + op.n] = g[:, None] * open_prob * (op.step_voltages() - model.e_rev)
                    col += op.n
    return out


def ramp_states(model: ChannelModel, params: np.ndarray, op: Op, p: np.ndarray) -> np.ndarray:
    """States (pop, n, N) after each step of a ramp, each step by the fourth-order Magnus
    exponential of Q at its two Gauss points."""
    gauss = op.magnus_voltages()
    out = np.empty((p.shape[0], op.n, p.shape[1]))
    for lo in range(0, op.n, RAMP_BLOCK):
        volts = gauss[lo:lo + RAMP_BLOCK]
        q = model.q_matrix(params, volts.ravel()).reshape(len(volts), 2, *p.shape, p.shape[1])
        omega = magnus_generator(q[:, 0], q[:, 1], op.tau)
        e = expm(omega.reshape(-1, *omega.shape[-2:])).reshape(omega.shape)   # (steps, pop, N, N)
        for k in range(len(volts)):
            p = np.einsum("pij,pj->pi", e[k], p)
            out[:, lo + k] = p
    return out


def chi2(currents: np.ndarray, target: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """The paper's score: mean squared residual over all sweeps and points, weighted
    (sum w r^2 / sum w) when ``weights`` are given; failures score BAD_SCORE."""
    with np.errstate(over="ignore", invalid="ignore"):
        if weights is None:
            score = np.mean((currents - target) ** 2, axis=-1)
        else:
            score = ((currents - target) ** 2) @ weights / weights.sum()
    return np.where(np.isfinite(score), np.minimum(score, BAD_SCORE), BAD_SCORE)


def evaluate(model: ChannelModel, protocol: Protocol, params: np.ndarray, target: np.ndarray,
             chunk: int = 4096, weights: np.ndarray | None = None) -> np.ndarray:
    """chi^2 (pop,) of every individual, in chunks to bound memory."""
    params = np.atleast_2d(params)
    report = SetupProgress(f"scoring {len(params):,} individuals", len(params))
    scores = []
    for i in range(0, len(params), chunk):
        report(i)
        scores.append(chi2(simulate(model, protocol, params[i:i + chunk]), target, weights))
    return np.concatenate(scores)
