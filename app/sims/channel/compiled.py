"""The compiled multi-core CPU channel engine (numba): the NumPy engine's numerics per
individual, individuals spread over all cores.

Rates are evaluated by the reference's printer (:meth:`ChannelModel.q_matrix`, vectorised over
the population, once per distinct voltage: a few dozen numbers per individual), so no second
printer of the rate trees exists. The compiled part is everything per individual after that:
exp(Q tau) by scaling and squaring with the (6, 6) Padé approximant and column renormalisation,
the GTH steady state, and the sample loop with the chi^2 sum (see :mod:`numerics`). The sample
loop applies E one step at a time where the reference doubles blocks, so the two agree to float64
rounding accumulated over the sweep (tested), not bit for bit.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from numba import njit, prange

from app.compute.jit import CACHE
from app.sims.channel.cpu import BAD_SCORE
from app.sims.channel.engine import CpuGA
from app.sims.channel.model import ChannelModel
from app.sims.channel.numerics import PADE, PADE_DEGREE, SCALE_NORM
from app.sims.channel.protocol import MAGNUS_C, Protocol
from app.sims.common.progress import SetupProgress

CHUNK = 8192   # individuals whose Q matrices are held at once (at most)
Q_BUDGET = 256 * 2**20   # bytes of Q matrices per call (ramps have a voltage per Gauss point)
# fast-math without 'nnan'/'ninf': a failed individual's NaN must reach the isfinite test
FASTMATH = {"contract", "reassoc", "nsz", "arcp", "afn"}
LANES = 16     # individuals advanced together in the sample loop (SIMD across individuals; measured: 16 > 8)


@njit(inline="always", cache=CACHE, error_model="numpy")
def _normalise_columns(e):
    n = e.shape[0]
    for c in range(n):
        s = 0.0
        for r in range(n):
            s += e[r, c]
        for r in range(n):
            e[r, c] /= s


@njit(inline="always", cache=CACHE, error_model="numpy")
def _matmul_into(a, b, out):
    """out = a @ b for small square matrices in plain loops (numba's @ calls BLAS: slow at 3x3)."""
    n = a.shape[0]
    for r in range(n):
        for c in range(n):
            out[r, c] = 0.0
        for k in range(n):
            f = a[r, k]
            for c in range(n):
                out[r, c] += f * b[k, c]


@njit(cache=CACHE, error_model="numpy")
def _expm_into(q, tau, pade, work, e):
    """e = exp(q tau) of one small matrix, as ``numerics.expm`` (Padé (6,6), scaling and
    squaring, columns renormalised); ``work`` (5, n, n) is scratch, nothing is allocated."""
    n = q.shape[0]
    x, power, even, odd, tmp = work[0], work[1], work[2], work[3], work[4]
    norm = 0.0
    for c in range(n):
        s = 0.0
        for r in range(n):
            s += abs(q[r, c] * tau)
        norm = max(norm, s)
    s_f = np.ceil(np.log2(max(norm, 1e-300) / SCALE_NORM))
    if np.isnan(s_f):
        s_f = 0.0
    squarings = int(min(max(s_f, 0.0), 200.0))
    scale = np.ldexp(1.0, squarings)
    for r in range(n):
        for c in range(n):
            x[r, c] = q[r, c] * tau / scale
            power[r, c] = 1.0 if r == c else 0.0
            even[r, c] = pade[0] * power[r, c]
            odd[r, c] = 0.0
    for k in range(1, PADE_DEGREE + 1):
        _matmul_into(power, x, tmp)
        for r in range(n):
            for c in range(n):
                power[r, c] = tmp[r, c]
                if k % 2:
                    odd[r, c] += pade[k] * tmp[r, c]
                else:
                    even[r, c] += pade[k] * tmp[r, c]
    lhs = x   # reuse: x is no longer needed
    for r in range(n):
        for c in range(n):
            lhs[r, c] = even[r, c] - odd[r, c]
            e[r, c] = even[r, c] + odd[r, c]
    # Gaussian elimination with partial pivoting on (lhs | e)
    for k in range(n):
        p = k
        for r in range(k + 1, n):
            if abs(lhs[r, k]) > abs(lhs[p, k]):
                p = r
        if p != k:
            for c in range(n):
                lhs[k, c], lhs[p, c] = lhs[p, c], lhs[k, c]
                e[k, c], e[p, c] = e[p, c], e[k, c]
        for r in range(k + 1, n):
            f = lhs[r, k] / lhs[k, k]
            for c in range(n):
                lhs[r, c] -= f * lhs[k, c]
                e[r, c] -= f * e[k, c]
    for k in range(n - 1, -1, -1):
        for c in range(n):
            rest = 0.0
            for j in range(k + 1, n):
                rest += lhs[k, j] * e[j, c]
            e[k, c] = (e[k, c] - rest) / lhs[k, k]
    _normalise_columns(e)
    for _ in range(squarings):
        _matmul_into(e, e, tmp)
        for r in range(n):
            for c in range(n):
                e[r, c] = tmp[r, c]
        _normalise_columns(e)


@njit(cache=CACHE, error_model="numpy")
def _steady_state(q):
    """GTH steady state of one generator, as ``numerics.steady_state``."""
    n = q.shape[0]
    a = q.T.copy()
    for k in range(n - 1, 0, -1):
        s = 0.0
        for j in range(k):
            s += a[k, j]
        for i in range(k):
            a[i, k] /= s
        for i in range(k):
            for j in range(k):
                a[i, j] += a[i, k] * a[k, j]
    p = np.zeros(n)
    p[0] = 1.0
    for k in range(1, n):
        acc = 0.0
        for i in range(k):
            acc += p[i] * a[i, k]
        p[k] = acc
    return p / p.sum()


@njit(cache=CACHE, error_model="numpy")
def _magnus_into(q1, q2, tau, c, x):
    """x = tau/2 (q1 + q2) + c tau^2 [q2, q1] (the fourth-order Magnus exponent; q1 == q2
    gives tau q exactly)."""
    n = q1.shape[0]
    for r in range(n):
        for col in range(n):
            comm = 0.0
            for k in range(n):
                comm += q2[r, k] * q1[k, col] - q1[r, k] * q2[k, col]
            x[r, col] = 0.5 * tau * (q1[r, col] + q2[r, col]) + c * tau * tau * comm


@njit(parallel=True, nogil=True, cache=CACHE, error_model="numpy", fastmath=FASTMATH)
def _scores(q_by_v, pair_a, pair_b, pair_tau, sweep_hold, sweep_ops, op_first, op_ramp, op_record,
            op_v, op_vend, op_n, open_mask, g, e_rev, target, weights, norm, pade, magnus_c, bad,
            keep, traces, scores):
    """chi^2 of every individual (and its currents where ``keep``).

    Exponential ``k`` is exp(Magnus(Q[pair_a[k]], Q[pair_b[k]], pair_tau[k])); op ``o`` uses
    ``op_first[o]`` for every step, or ``op_first[o] + step`` for a ramp. LANES individuals
    advance together in the sample loop, so the innermost loops run over independent
    individuals (SIMD) instead of along one individual's dependent chain.
    """
    pop = q_by_v.shape[1]
    n = q_by_v.shape[2]
    n_pairs = pair_a.shape[0]
    for blk in prange((pop + LANES - 1) // LANES):
        i0 = blk * LANES
        lanes = min(LANES, pop - i0)
        e_all = np.zeros((n_pairs, n, n, LANES))
        p = np.zeros((n, LANES))
        p_next = np.empty((n, LANES))
        drive = np.empty(LANES)
        current = np.empty(LANES)
        acc = np.zeros(LANES)
        work = np.empty((5, n, n))
        e_one = np.empty((n, n))
        omega = np.empty((n, n))
        for b in range(lanes):
            for k in range(n_pairs):
                _magnus_into(q_by_v[pair_a[k], i0 + b], q_by_v[pair_b[k], i0 + b], pair_tau[k],
                             magnus_c, omega)
                _expm_into(omega, 1.0, pade, work, e_one)
                e_all[k, :, :, b] = e_one
        col = 0
        for sw in range(sweep_hold.shape[0]):
            for b in range(lanes):
                p[:, b] = _steady_state(q_by_v[sweep_hold[sw], i0 + b])
            for o in range(sweep_ops[sw], sweep_ops[sw + 1]):
                steps = op_n[o]
                ramp = op_ramp[o]
                e = e_all[op_first[o]]
                for b in range(LANES):
                    drive[b] = (g[i0 + b] if b < lanes else 0.0) * (op_v[o] - e_rev)
                for step in range(steps):
                    if ramp:
                        e = e_all[op_first[o] + step]
                        v = op_v[o] + (op_vend[o] - op_v[o]) * (step + 1) / steps
                        for b in range(LANES):
                            drive[b] = (g[i0 + b] if b < lanes else 0.0) * (v - e_rev)
                    for r in range(n):
                        for b in range(LANES):
                            p_next[r, b] = 0.0
                        for c in range(n):
                            for b in range(LANES):
                                p_next[r, b] += e[r, c, b] * p[c, b]
                    for b in range(LANES):
                        current[b] = 0.0
                    for r in range(n):
                        for b in range(LANES):
                            p[r, b] = p_next[r, b]
                        if open_mask[r]:
                            for b in range(LANES):
                                current[b] += p_next[r, b]
                    if not op_record[o]:
                        continue
                    for b in range(LANES):
                        current[b] *= drive[b]
                        d = current[b] - target[col]
                        acc[b] += weights[col] * d * d
                    if keep:
                        for b in range(lanes):
                            traces[i0 + b, col] = current[b]
                    col += 1
        for b in range(lanes):
            score = acc[b] / norm
            scores[i0 + b] = min(score, bad) if np.isfinite(score) else bad


class _Layout:
    """The protocol as flat arrays: distinct voltages, distinct exponentials, ops."""

    def __init__(self, protocol: Protocol):
        volts: dict[float, int] = {}
        pairs: dict[tuple[float, float, float], int] = {}
        hold, starts, first, ramp, record, op_v, op_vend, op_n = [], [0], [], [], [], [], [], []

        def pair(va: float, vb: float, tau: float, share: bool = True) -> int:
            key = (volts.setdefault(va, len(volts)), volts.setdefault(vb, len(volts)), tau)
            if not share:       # a ramp's steps are consecutive entries of their own
                key = key + (len(pairs),)
            return pairs.setdefault(key, len(pairs))

        for sweep in protocol.sweeps:
            hold.append(volts.setdefault(sweep.holding, len(volts)))
            for op in sweep.ops:
                if op.ramp:
                    ids = [pair(va, vb, op.tau, share=False) for va, vb in op.magnus_voltages()]
                    first.append(ids[0])
                else:
                    first.append(pair(op.v, op.v, op.tau))
                ramp.append(op.ramp)
                record.append(op.record)
                op_v.append(op.v)
                op_vend.append(op.v_end)
                op_n.append(op.n)
            starts.append(len(first))
        self.volts = np.array(list(volts), np.float64)
        self.pair_a = np.array([key[0] for key in pairs], np.int64)
        self.pair_b = np.array([key[1] for key in pairs], np.int64)
        self.pair_tau = np.array([key[2] for key in pairs], np.float64)
        self.sweep_hold = np.array(hold, np.int64)
        self.sweep_ops = np.array(starts, np.int64)
        self.op_first = np.array(first, np.int64)
        self.op_ramp = np.array(ramp, np.bool_)
        self.op_record = np.array(record, np.bool_)
        self.op_v = np.array(op_v, np.float64)
        self.op_vend = np.array(op_vend, np.float64)
        self.op_n = np.array(op_n, np.int64)

    def chunk(self, n_states: int) -> int:
        """Individuals per call so that their Q matrices stay within Q_BUDGET bytes."""
        per_individual = len(self.volts) * n_states * n_states * 8
        return int(min(CHUNK, max(LANES, Q_BUDGET // per_individual)))


def evaluate(model: ChannelModel, protocol: Protocol, params: np.ndarray, target: np.ndarray,
             keep_traces: bool = False, layout: _Layout | None = None,
             weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """chi^2 (pop,) of every individual and, where asked, their currents (pop, n_points)."""
    params = np.atleast_2d(np.asarray(params, np.float64))
    layout = layout or _Layout(protocol)
    pop = params.shape[0]
    scores = np.empty(pop)
    traces = np.empty((pop, protocol.n_points)) if keep_traces else np.empty((1, 1))
    target = np.ascontiguousarray(target, np.float64)
    weights = np.ones_like(target) if weights is None else np.ascontiguousarray(weights, np.float64)
    chunk = layout.chunk(model.n_states)
    if pop > chunk:              # two chunks' Q matrices are alive at once below: same budget
        chunk = max(LANES, chunk // 2)
    report = SetupProgress(f"scoring {pop:,} individuals", pop)
    starts = list(range(0, pop, chunk))

    def rates(lo: int) -> np.ndarray:
        return np.ascontiguousarray(model.q_matrix(params[lo:lo + chunk], layout.volts))

    # The rates (NumPy, one thread) of the next chunk are evaluated in a worker thread while the
    # compiled scoring of this one (nogil, every core) runs, so that serial part overlaps it
    # (from a one-thread profile, ~3% of a generation there, a third of one on 16 threads).
    # Each individual's numbers are computed as before: same results.
    with ThreadPoolExecutor(max_workers=1) as pool:
        pending = pool.submit(rates, starts[0]) if starts else None
        for k, lo in enumerate(starts):
            report(lo)
            rows = params[lo:lo + chunk]
            q_by_v = pending.result()
            if k + 1 < len(starts):
                pending = pool.submit(rates, starts[k + 1])
            _score_chunk(layout, model, q_by_v, rows, target, weights, keep_traces,
                         traces[lo:lo + chunk] if keep_traces else traces, scores[lo:lo + chunk])
    return scores, (traces if keep_traces else None)


def _score_chunk(layout: _Layout, model: ChannelModel, q_by_v: np.ndarray, rows: np.ndarray,
                 target: np.ndarray, weights: np.ndarray, keep_traces: bool,
                 out_traces: np.ndarray, out_scores: np.ndarray) -> None:
    """The compiled scoring of one chunk of individuals (rows) with their Q matrices."""
    _scores(q_by_v, layout.pair_a, layout.pair_b, layout.pair_tau, layout.sweep_hold,
            layout.sweep_ops, layout.op_first, layout.op_ramp, layout.op_record, layout.op_v,
            layout.op_vend, layout.op_n, model.open_mask.astype(np.bool_),
            np.ascontiguousarray(rows[:, model.conductance]), float(model.e_rev), target,
            weights, float(weights.sum()), PADE, MAGNUS_C, float(BAD_SCORE), keep_traces,
            out_traces, out_scores)


def warm_up() -> float:
    """Compile (or load from the on-disk cache) the kernel; returns the seconds it took."""
    start = time.perf_counter()
    q = np.array([[[[-1.0, 2.0], [1.0, -2.0]]]])
    zero, yes = np.zeros(1, np.int64), np.ones(1, np.bool_)
    _scores(q, zero, zero, np.ones(1), zero, np.array([0, 1]), zero, ~yes, yes, np.zeros(1),
            np.zeros(1), np.ones(1, np.int64), np.array([False, True]), np.ones(1), 0.0,
            np.zeros(1), np.ones(1), 1.0, PADE, MAGNUS_C, 1e30, False, np.empty((1, 1)), np.empty(1))
    return time.perf_counter() - start


class CompiledGA(CpuGA):
    """The reference GA (same NumPy operators and Philox decisions) scored by compiled code."""

    def __init__(self, model: ChannelModel, protocol: Protocol, target: np.ndarray, size: int, seed: int,
                 weights: np.ndarray | None = None):
        super().__init__(model, protocol, target, size, seed, weights)
        self.compile_seconds = warm_up()
        self._layout = _Layout(protocol)

    def evaluate_params(self, params: np.ndarray) -> np.ndarray:
        scores, _ = evaluate(self.model, self.protocol, params, self.target, layout=self._layout,
                             weights=self.weights)
        return scores

    def simulate(self, params: np.ndarray) -> np.ndarray:
        _, traces = evaluate(self.model, self.protocol, params, self.target, keep_traces=True,
                             layout=self._layout, weights=self.weights)
        return traces
