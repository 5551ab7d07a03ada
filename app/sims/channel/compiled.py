"""The compiled multi-core CPU channel engine (numba): the NumPy engine's numerics per
individual, individuals spread over all cores.

Everything per individual runs in one compiled kernel: the rates and Q at each distinct voltage
(printed from the model's rate trees by the core's Python printer, with the reference's NaN
shift and clamp), exp(Q tau) by scaling and squaring with the (6, 6) Padé approximant and column
renormalisation, the GTH steady state, and the sample loop with the chi^2 sum (see
:mod:`numerics`). The kernel lives in a module generated once per model text (as the SSA and
cardiac engines do), so numba's on-disk cache holds its machine code. The sample loop applies E
one step at a time where the reference doubles blocks, and numba's ``exp``/``log`` may differ
from NumPy's in the last bit, so the two agree to float64 rounding accumulated over the sweep
(tested), not bit for bit. The GA operators are compiled too (:mod:`ga_compiled`): nothing that
grows with the population runs on one thread.
"""

from __future__ import annotations

import time

import numpy as np
from numba import njit

from app.compute.codegen import NAN_IGNORING_MINMAX, Code, fill_template, to_python
from app.compute.cpu_threads import in_threads
from app.compute.jit import CACHE, generated_module
from app.sims.channel import ga_compiled
from app.sims.channel.cpu import BAD_SCORE
from app.sims.channel.engine import CpuGA
from app.sims.channel.model import RATE_MAX, SINGULAR_DV, ChannelModel
from app.sims.channel.numerics import PADE, PADE_DEGREE, SCALE_NORM
from app.sims.channel.protocol import MAGNUS_C, Op, Protocol, Sweep
from app.sims.common.progress import SetupProgress

CHUNK = 65_536   # individuals scored between two progress lines
PIECES_PER_THREAD = 4   # kernel calls per thread and chunk, taken by whichever thread is free
# fast-math without 'nnan'/'ninf': a failed individual's NaN must reach the isfinite test
FASTMATH = {"contract", "reassoc", "nsz", "arcp", "afn"}
LANES = 64     # individuals advanced together in the sample loop (SIMD over them; measured: 64 > 32 > 16)


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
def expm_into(q, tau, pade, work, e):
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
def steady_state_into(q, a, out, row, lane):
    """GTH steady state of generator ``q`` into ``out[row, :, lane]``, as
    ``numerics.steady_state``; ``a`` (n, n) is scratch, nothing is allocated."""
    n = q.shape[0]
    for r in range(n):
        for c in range(n):
            a[r, c] = q[c, r]
    for k in range(n - 1, 0, -1):
        s = 0.0
        for j in range(k):
            s += a[k, j]
        for i in range(k):
            a[i, k] /= s
        for i in range(k):
            for j in range(k):
                a[i, j] += a[i, k] * a[k, j]
    out[row, 0, lane] = 1.0
    total = 1.0
    for k in range(1, n):
        acc = 0.0
        for i in range(k):
            acc += out[row, i, lane] * a[i, k]
        out[row, k, lane] = acc
        total += acc
    for k in range(n):
        out[row, k, lane] /= total


@njit(cache=CACHE, error_model="numpy")
def magnus_into(q, a, b, tau, c, x):
    """x = tau/2 (q[a] + q[b]) + c tau^2 [q[b], q[a]] (the fourth-order Magnus exponent;
    a == b gives tau q exactly)."""
    n = q.shape[1]
    for r in range(n):
        for col in range(n):
            comm = 0.0
            for k in range(n):
                comm += q[b, r, k] * q[a, k, col] - q[a, r, k] * q[b, k, col]
            x[r, col] = 0.5 * tau * (q[a, r, col] + q[b, r, col]) + c * tau * tau * comm


@njit(cache=CACHE, error_model="numpy")
def lane_exponentials(q, lane, pair_a, pair_b, pair_tau, sweep_hold, magnus_c, pade, scratch, e_all,
                      p_start):
    """Every exponential and every sweep's steady state of one individual (lane ``lane`` of its
    block) from its Q at each distinct voltage ``q`` (nv, n, n)."""
    work, e_one, omega, gth = scratch
    n = q.shape[1]
    for k in range(pair_a.shape[0]):
        magnus_into(q, pair_a[k], pair_b[k], pair_tau[k], magnus_c, omega)
        expm_into(omega, 1.0, pade, work, e_one)
        for r in range(n):
            for c in range(n):
                e_all[k, r, c, lane] = e_one[r, c]
    for sw in range(sweep_hold.shape[0]):
        steady_state_into(q[sweep_hold[sw]], gth, p_start, sw, lane)


@njit(cache=CACHE, error_model="numpy", fastmath=FASTMATH)
def score_block(params, i0, lanes, g_index, e_rev, ops, open_mask, target, weights, norm, bad,
                e_all, p_start, state, keep, traces, out):
    """chi^2 of the block of individuals i0 .. i0 + lanes - 1 (their exponentials and steady
    states in ``e_all`` and ``p_start``, one lane each of the block's width); op ``o`` of
    ``ops`` uses exponential op_first[o] for every step, or op_first[o] + step for a ramp.

    The block's individuals advance together: every innermost loop runs over the lanes (one
    contiguous row of the width), which LLVM vectorises (a width known at compile time would
    be unrolled into scalar code instead), and the states p and p_next swap each step."""
    sweep_ops, op_first, op_ramp, op_record, op_v, op_vend, op_n = ops
    p, p_next, drive, current, acc = state
    n, width = p.shape
    for b in range(lanes, width):      # the empty lanes of a last, partial block
        e_all[:, :, :, b] = 0.0
        p_start[:, :, b] = 0.0
    acc[:] = 0.0
    col = 0
    for sw in range(sweep_ops.shape[0] - 1):
        for r in range(n):
            for b in range(width):
                p[r, b] = p_start[sw, r, b]
        for o in range(sweep_ops[sw], sweep_ops[sw + 1]):
            steps = op_n[o]
            k = op_first[o]
            for b in range(width):
                drive[b] = (params[i0 + b, g_index] if b < lanes else 0.0) * (op_v[o] - e_rev)
            for step in range(steps):
                if op_ramp[o]:
                    k = op_first[o] + step
                    v = op_v[o] + (op_vend[o] - op_v[o]) * (step + 1) / steps
                    for b in range(width):
                        drive[b] = (params[i0 + b, g_index] if b < lanes else 0.0) * (v - e_rev)
                for r in range(n):
                    for b in range(width):
                        p_next[r, b] = e_all[k, r, 0, b] * p[0, b]
                    for c in range(1, n):
                        for b in range(width):
                            p_next[r, b] += e_all[k, r, c, b] * p[c, b]
                p, p_next = p_next, p
                if not op_record[o]:
                    continue
                for b in range(width):
                    current[b] = 0.0
                for r in range(n):
                    if open_mask[r]:
                        for b in range(width):
                            current[b] += p[r, b]
                for b in range(width):
                    current[b] *= drive[b]
                    d = current[b] - target[col]
                    acc[b] += weights[col] * d * d
                if keep:
                    for b in range(lanes):
                        traces[i0 + b, col] = current[b]
                col += 1
    for b in range(lanes):
        score = acc[b] / norm
        out[i0 + b] = min(score, bad) if np.isfinite(score) else bad


# The kernel of one model: its rates (printed from the rate trees), Q, and the loop over blocks
# of individuals; everything else is the cached, model-independent code above, so a new model
# compiles only this (~2 s of CPU; ~7 s as a numba parfor, hence the thread pool of in_threads).
_MODULE = '''"""Generated by app/sims/channel/compiled.py from the checked rate trees; do not edit."""
import math

import numpy as np
from numba import njit

from app.sims.channel.compiled import LANES, lane_exponentials, score_block

N_STATES = {{N_STATES}}
N_RATES = {{N_RATES}}


@njit(cache=True, error_model="numpy")
def rates_into(params, i, v, r):
{{RATES}}


@njit(cache=True, error_model="numpy")
def q_into(params, i, v, r, shifted, q, row):
    """q[row] = Q of individual i at v as ChannelModel.q_matrix computes it: a NaN rate is
    taken at v + SINGULAR_DV, rates are clamped to [0, RATE_MAX], one NaN or infinite there
    is NaN."""
    rates_into(params, i, v, r)
    singular = False
    for k in range(N_RATES):
        singular = singular or np.isnan(r[k])
    if singular:
        rates_into(params, i, v + {{SINGULAR_DV}}, shifted)
        for k in range(N_RATES):
            if np.isnan(r[k]):
                r[k] = shifted[k]
    for k in range(N_RATES):
        r[k] = min(max(r[k], 0.0), {{RATE_MAX}}) if np.isfinite(r[k]) else np.nan
    for a in range(N_STATES):
        for b in range(N_STATES):
            q[row, a, b] = 0.0
{{FILL_Q}}


@njit(nogil=True, cache=True, error_model="numpy")
def scores(params, first, last, volts, pairs, sweep_hold, ops, open_mask, g_index, e_rev, target,
           weights, norm, pade, magnus_c, bad, keep, traces, out):
    """chi^2 of the individuals of blocks first .. last - 1 (LANES rows of params each, or
    all of them rounded up to 8 lanes where there are fewer) into
    out, and their currents where keep. The scratch is allocated once per call."""
    pop = params.shape[0]
    n = N_STATES
    width = min(LANES, (pop + 7) // 8 * 8)       # a small batch gets a narrower block
    pair_a, pair_b, pair_tau = pairs
    q = np.empty((volts.shape[0], n, n))
    r = np.empty(N_RATES)
    shifted = np.empty(N_RATES)
    e_all = np.zeros((pair_a.shape[0], n, n, width))
    p_start = np.zeros((sweep_hold.shape[0], n, width))
    scratch = (np.empty((5, n, n)), np.empty((n, n)), np.empty((n, n)), np.empty((n, n)))
    state = (np.empty((n, width)), np.empty((n, width)), np.empty(width), np.empty(width),
             np.empty(width))
    for blk in range(first, last):
        i0 = blk * width
        lanes = min(width, pop - i0)
        for b in range(lanes):
            for k in range(volts.shape[0]):
                q_into(params, i0 + b, volts[k], r, shifted, q, k)
            lane_exponentials(q, b, pair_a, pair_b, pair_tau, sweep_hold, magnus_c, pade, scratch,
                              e_all, p_start)
        score_block(params, i0, lanes, g_index, e_rev, ops, open_mask, target, weights, norm, bad,
                    e_all, p_start, state, keep, traces, out)
'''


def module_source(model: ChannelModel) -> str:
    """The generated kernel module of ``model``: its rates printed from the rate trees (only
    array positions and printed numbers reach the text, never a name from the model file)."""
    params = {name: f"params[i, {k}]" for k, name in enumerate(model.param_names)}
    rates = {name: f"r[{k}]" for k, (name, _) in enumerate(model.rate_defs)}

    def symbol(name: str) -> str:
        return "v" if name == "v" else rates.get(name) or params[name]

    lines = [f"    r[{k}] = {to_python(tree, symbol, NAN_IGNORING_MINMAX)}"
             for k, (_, tree) in enumerate(model.rate_defs)]
    fill = []
    for i, j, name in model.transitions:     # in the order of ChannelModel.q_matrix's sums
        fill += [f"    q[row, {j}, {i}] += {rates[name]}", f"    q[row, {i}, {i}] -= {rates[name]}"]
    return fill_template(_MODULE, {
        "N_STATES": model.n_states, "N_RATES": len(model.rate_defs), "SINGULAR_DV": SINGULAR_DV,
        "RATE_MAX": RATE_MAX, "RATES": Code("\n".join(lines)), "FILL_Q": Code("\n".join(fill))})


_recent_modules: dict[int, tuple[ChannelModel, object]] = {}


def model_module(model: ChannelModel):
    """The compiled kernel of ``model`` (generated once per model text, cached on disk; the
    last few models' modules kept here, so a generation does not print its model again)."""
    known = _recent_modules.get(id(model))
    if known is None or known[0] is not model:
        if len(_recent_modules) >= 16:
            _recent_modules.clear()
        known = _recent_modules[id(model)] = (model, generated_module("channel", module_source(model)))
    return known[1]


class _Layout:
    """The protocol as flat arrays: distinct voltages; distinct exponentials ``pairs`` (the
    voltage indices of their two Gauss points, tau); each sweep's holding voltage; ``ops``
    (each sweep's first op, then per op: first exponential, ramp, record, v, v_end, steps)."""

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
        self.pairs = (np.array([key[0] for key in pairs], np.int64),
                      np.array([key[1] for key in pairs], np.int64),
                      np.array([key[2] for key in pairs], np.float64))
        self.sweep_hold = np.array(hold, np.int64)
        self.ops = (np.array(starts, np.int64), np.array(first, np.int64), np.array(ramp, np.bool_),
                    np.array(record, np.bool_), np.array(op_v, np.float64),
                    np.array(op_vend, np.float64), np.array(op_n, np.int64))


def evaluate(model: ChannelModel, protocol: Protocol, params: np.ndarray, target: np.ndarray,
             keep_traces: bool = False, layout: _Layout | None = None,
             weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """chi^2 (pop,) of every individual and, where asked, their currents (pop, n_points)."""
    params = np.ascontiguousarray(np.atleast_2d(np.asarray(params, np.float64)))
    layout = layout or _Layout(protocol)
    kernel = model_module(model).scores
    pop = params.shape[0]
    scores = np.empty(pop)
    traces = np.empty((pop, protocol.n_points)) if keep_traces else np.empty((1, 1))
    target = np.ascontiguousarray(target, np.float64)
    weights = np.ones_like(target) if weights is None else np.ascontiguousarray(weights, np.float64)
    open_mask = model.open_mask.astype(np.bool_)
    report = SetupProgress(f"scoring {pop:,} individuals", pop)
    blocks = (pop + LANES - 1) // LANES

    def run(first: int, last: int) -> None:
        kernel(params, first, last, layout.volts, layout.pairs, layout.sweep_hold, layout.ops,
               open_mask, model.conductance, float(model.e_rev), target, weights,
               float(weights.sum()), PADE, MAGNUS_C, float(BAD_SCORE), keep_traces, traces, scores)

    per_chunk = max(1, CHUNK // LANES)
    for lo in range(0, blocks, per_chunk):
        report(lo * LANES)
        in_threads(run, lo, min(blocks, lo + per_chunk), PIECES_PER_THREAD)
    return scores, (traces if keep_traces else None)


WARM_UP_PROTOCOL = Protocol((Sweep("warm-up", -80.0, (Op(0.0, 1.0, 2, True, 0.0),
                                                      Op(-40.0, 0.5, 2, True, 40.0))),))


def warm_up(model: ChannelModel | None = None) -> float:
    """Compile (or load from the on-disk cache) the kernel of ``model`` (default: Model B of the
    default preset) and the GA operators; returns the seconds it took."""
    start = time.perf_counter()
    if model is None:
        from app.sims.channel.config import load_config
        from app.sims.common.config import load_yaml
        from app.sims.common.simulation import PRESETS
        model = load_config(load_yaml(PRESETS / "channel" / "00-model-b-surrogate.yaml")).model_()
    target = np.zeros(WARM_UP_PROTOCOL.n_points)
    evaluate(model, WARM_UP_PROTOCOL, np.vstack([model.lower, model.upper]), target, keep_traces=True)
    ga_compiled.warm_up(model.n_params)
    return time.perf_counter() - start


class CompiledGA(CpuGA):
    """The reference GA (the same Philox decisions, compiled and parallel over pairs) scored by
    the compiled kernel of its model."""

    def __init__(self, model: ChannelModel, protocol: Protocol, target: np.ndarray, size: int, seed: int,
                 weights: np.ndarray | None = None):
        super().__init__(model, protocol, target, size, seed, weights)
        self.compile_seconds = warm_up(model)
        self._layout = _Layout(protocol)

    def evaluate_params(self, params: np.ndarray) -> np.ndarray:
        scores, _ = evaluate(self.model, self.protocol, params, self.target, layout=self._layout,
                             weights=self.weights)
        return scores

    def simulate(self, params: np.ndarray) -> np.ndarray:
        _, traces = evaluate(self.model, self.protocol, params, self.target, keep_traces=True,
                             layout=self._layout, weights=self.weights)
        return traces

    def advance(self, generation: int, best: int, crossover: float, mutation: float,
                creep: float = 0.0, creep_fraction: float = 0.0) -> None:
        """Breed the next generation (as :func:`ga.breed`, pairs spread over all cores)."""
        self.population = ga_compiled.breed(self.population, self.scores, best, generation, self.seed,
                                            self.model.lower, self.model.upper, crossover, mutation,
                                            creep, creep_fraction)
