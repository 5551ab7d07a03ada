"""The compiled CPU cultured-network engine (numba): the NumPy engine's step loop, compiled.

Same state, synapse tables, growth and Philox noise streams as :class:`CpuEngine`. The neurons
are split into partitions (contiguous index ranges, two per thread). A transmission delay is at
least ``Constants.chunk`` steps, so the spikes a step delivers were all emitted in an earlier
chunk of that many steps: each partition runs a whole chunk on its own (draws its neurons' noise,
updates them, notes their spikes, and delivers every earlier spike to the synapses whose target
it owns), and the threads meet once per chunk, not twice per step; a thread done with its own
partitions takes the others' leftovers. Each partition walks every spike's synapse list in the
serial order (sources in neuron order), so every conductance receives its jumps in the NumPy
engine's order and every synapse has one writer: the results do not depend on the partition or
thread count, bit for bit.

The noise is :func:`app.sims.network.engine.noise_block` drawn inside the chunk: the same
Philox draws and Box-Muller, with the log and the cosine from :mod:`app.compute.jit_math`
(plain arithmetic within 1-2 ulp of the C library), so the loop over neurons vectorises.
"""

from __future__ import annotations

import math
import time
import types

import numpy as np
import numba
from llvmlite import ir
from numba import njit, prange
from numba.core import cgutils
from numba.core import types as nbtypes
from numba.extending import intrinsic

from app.compute.jit import CACHE
from app.compute.jit_math import cos_two_pi, log_normal_positive
from app.compute.philox_numba import philox_words
from app.compute.stack_alignment import align_stack
from app.sims.network.cpu import RING, CpuEngine

NEURONS_PER_THREAD = 500    # a parallel region costs microseconds: no more threads than this allows
DECAY_STEPS = 4096          # synaptic recovery/facilitation factors tabulated for gaps below this
SPIKE_ROOM = 1 << 22        # spikes one compiled call may return (two buffers of 32 MiB)
USE, RESOURCES, LAST, WEIGHT, TARGET = range(5)   # a synapse's record (LAST, TARGET: exact integers)
PARTS_PER_THREAD = 2        # idle threads take work from busy ones; each partition costs (README)


@njit(inline="always", cache=CACHE, error_model="numpy")
def _box_muller(a, b):
    u1 = ((a >> np.uint32(9)) + 0.5) * 1.1920928955078125e-07      # exact on the float32 grid
    u2 = ((b >> np.uint32(9)) + 0.5) * 1.1920928955078125e-07
    return math.sqrt(-2.0 * log_normal_positive(u1)) * cos_two_pi(u2)


@njit(inline="always", cache=CACHE, error_model="numpy")
def _gaussians(key_lo, key_hi, m0, k, lo, hi, z):
    """z[j, i] for steps m0 + j (j < k) and neurons lo <= i < hi: Box-Muller on Philox draw
    ``m >> 1`` of stream ``i`` (words 0, 1 on even steps, 2, 3 on odd ones)."""
    # rows sliced to lo:hi and indexed from 0: a provably non-negative index lets LLVM vectorise
    for pair in range(m0 >> 1, ((m0 + k - 1) >> 1) + 1):
        even = 2 * pair - m0                    # rows of this pair's two steps
        odd = even + 1
        counter = np.uint64(pair)
        if even >= 0 and odd < k:
            z_even, z_odd = z[even, lo:hi], z[odd, lo:hi]
            for q in range(hi - lo):
                w0, w1, w2, w3 = philox_words(key_lo, key_hi, counter, np.uint64(lo + q))
                z_even[q] = _box_muller(w0, w1)
                z_odd[q] = _box_muller(w2, w3)
        elif even >= 0:
            z_even = z[even, lo:hi]
            for q in range(hi - lo):
                w0, w1, w2, w3 = philox_words(key_lo, key_hi, counter, np.uint64(lo + q))
                z_even[q] = _box_muller(w0, w1)
        else:
            z_odd = z[odd, lo:hi]
            for q in range(hi - lo):
                w0, w1, w2, w3 = philox_words(key_lo, key_hi, counter, np.uint64(lo + q))
                z_odd[q] = _box_muller(w2, w3)


@njit(nogil=True, cache=CACHE, error_model="numpy")
def _noise(key_lo, key_hi, m0, out):
    """:func:`app.sims.network.engine.noise_block` compiled: out (k, n) standard normals (the
    test entry point of :func:`_gaussians`; the step loop draws its noise per partition)."""
    align_stack()
    _gaussians(key_lo, key_hi, m0, out.shape[0], 0, out.shape[1], out)


@njit(inline="always", cache=CACHE, error_model="numpy")
def _update_neurons(c1, c2, i0, z, V, refrac, gE, gI, counts, fired, vth, vreset, inoise, tref, dE, dI):
    """One step of :meth:`CpuEngine.advance`'s neuron update and conductance decay over the
    arrays given (one partition's slices), branch-free so that it vectorises."""
    for i in range(V.shape[0]):
        r = refrac[i]
        v = V[i]
        idle = r <= 0
        fire = idle and v >= vth[i]
        integrated = c1 * v + c2 * (gE[i] + gI[i] + i0 + inoise[i] * z[i])
        V[i] = vreset[i] if fire else (integrated if idle else v)
        refrac[i] = tref[i] if fire else (r if idle else r - 1)
        counts[i] += fire
        fired[i] = fire
        gE[i] *= dE[i]
        gI[i] *= dI[i]


@intrinsic
def _take_next(typingctx, counters, index):
    """``counters[index] += 1`` as one atomic operation; returns the value before."""
    if not (isinstance(counters, nbtypes.Array) and counters.dtype == nbtypes.int64):
        return None

    def codegen(context, builder, signature, args):
        array = context.make_array(signature.args[0])(context, builder, args[0])
        pointer = cgutils.get_item_pointer(context, builder, signature.args[0], array, [args[1]])
        return builder.atomic_rmw("add", pointer, ir.Constant(ir.IntType(64), 1), "monotonic")
    return nbtypes.int64(counters, nbtypes.int64), codegen


@njit(nogil=True, cache=CACHE, error_model="numpy")
def _partition_chunk(t, m, k, key_lo, key_hi, z, V, refrac, gE, gI, counts, fired, local, local_len,
                     ring, ring_len, part_lo, c1, c2, i0, dt, vth, vreset, inoise, tref, dE, dI,
                     g_dv, runs_ptr, run_part, run_start, run_stop, reach, synapses, U, D, F, w_scale,
                     decay_D, decay_F):
    """Steps ``m .. m + k - 1`` of partition ``t`` (see :func:`_step_loop`)."""
    align_stack()
    n_parts = part_lo.shape[0] - 1
    bit = np.uint64(1) << np.uint64(t * 64 // n_parts)
    lo, hi = part_lo[t], part_lo[t + 1]
    _gaussians(key_lo, key_hi, m, k, lo, hi, z)
    for j in range(k):
        step = m + j
        _update_neurons(c1, c2, i0, z[j, lo:hi], V[lo:hi], refrac[lo:hi], gE[lo:hi], gI[lo:hi],
                        counts[lo:hi], fired[lo:hi], vth[lo:hi], vreset[lo:hi], inoise[lo:hi],
                        tref[lo:hi], dE[lo:hi], dI[lo:hi])
        count = 0
        for i in range(lo, hi):
            if fired[i]:
                local[j, lo + count] = i
                count += 1
        local_len[j, t] = count
        for g in range(g_dv.shape[0]):
            if step - g_dv[g] < 0:
                continue
            src_slot = (step - g_dv[g]) % RING
            for q in range(ring_len[src_slot]):              # every spike, in neuron order
                source = ring[src_slot, q]
                if reach[g, source] & bit == 0:
                    continue
                r, last_run = runs_ptr[g, source], runs_ptr[g, source + 1]
                while r < last_run and run_part[r] != t:     # (a bit serves 2+ partitions past 64)
                    r += 1
                if r == last_run:
                    continue
                for s in range(run_start[r], run_stop[r]):
                    target = np.int64(synapses[s, TARGET])
                    typ = target & 3
                    gap = step - np.int64(synapses[s, LAST])
                    if gap < decay_D.shape[1]:
                        recovered, facilitated = decay_D[typ, gap], decay_F[typ, gap]
                    else:
                        recovered = math.exp(-(gap * dt) / D[typ])
                        facilitated = math.exp(-(gap * dt) / F[typ])
                    u_old, r_old = synapses[s, USE], synapses[s, RESOURCES]
                    r_new = 1.0 + (r_old * (1.0 - u_old) - 1.0) * recovered
                    u_new = U[typ] + u_old * (1.0 - U[typ]) * facilitated
                    synapses[s, USE] = u_new
                    synapses[s, RESOURCES] = r_new
                    synapses[s, LAST] = step
                    jump = synapses[s, WEIGHT] * u_new * r_new * w_scale[typ]
                    if typ < 2:                  # types EE, EI: an excitatory source
                        gE[target >> 2] += jump
                    else:
                        gI[target >> 2] += jump


def _step_loop(m0, nsteps, chunk, n_workers, key_lo, key_hi, z, V, refrac, gE, gI, counts, fired,
               local, local_len, ring, ring_len, part_lo, c1, c2, i0, dt, vth, vreset, inoise, tref,
               dE, dI, g_dv, runs_ptr, run_part, run_start, run_stop, reach, synapses, U, D, F,
               w_scale, decay_D, decay_F, spike_step, spike_neuron):
    """:meth:`CpuEngine.advance`'s step loop (compiled below), one parallel region per chunk of
    at most ``chunk`` steps (less than any delay). Partition ``t`` owns neurons
    ``part_lo[t]:part_lo[t + 1]``: it draws their noise, updates them, notes their spikes of the
    chunk's step ``j`` in ``local[j, part_lo[t]:][:local_len[j, t]]`` and delivers the spikes
    of earlier chunks (``ring[m % RING, :ring_len[m % RING]]``, in neuron order) onto its own
    targets. ``n_workers`` threads take the partitions: each its own block first, then what is
    left of the others' blocks (one atomic counter per block), so that a burst in one part of
    the culture does not leave the other threads waiting. Between chunks the chunk's spikes go
    to the ring and to ``spike_step``/``spike_neuron`` (while there is room; returns their count).
    ``synapses[s]`` is a synapse's record (u, r, last delivery step, weight, 4 target + type)
    in delivery order: runs of the synapses of one delay group from one source onto one
    partition in the serial order (see :func:`partition_groups` for ``runs_ptr``,
    ``run_part``, ``run_start``, ``run_stop`` and ``reach``). ``U``, ``D``, ``F``: per synapse type;
    ``decay_D[type, gap]``, ``decay_F[type, gap]``: exp(-gap dt / D), exp(-gap dt / F) for
    the gaps (steps since a synapse's last delivery) below their length, the exponentials
    computed beyond."""
    align_stack()
    n_parts = part_lo.shape[0] - 1
    next_part = np.zeros(n_workers, np.int64)
    n_spikes = 0
    m = m0
    while m < m0 + nsteps:
        k = min(chunk, m0 + nsteps - m)
        if k > 1 and (m + k) & 1:               # end on an odd step: no Philox draw half used
            k -= 1
        for w in range(n_workers):
            next_part[w] = (w * n_parts) // n_workers
        for w in prange(n_workers):
            for v in range(n_workers):
                block = (w + v) % n_workers
                t = _take_next(next_part, block)
                while t < ((block + 1) * n_parts) // n_workers:
                    _partition_chunk(t, m, k, key_lo, key_hi, z, V, refrac, gE, gI, counts, fired,
                                     local, local_len, ring, ring_len, part_lo, c1, c2, i0, dt, vth,
                                     vreset, inoise, tref, dE, dI, g_dv, runs_ptr, run_part, run_start,
                                     run_stop, reach, synapses, U, D, F, w_scale, decay_D, decay_F)
                    t = _take_next(next_part, block)
        for j in range(k):                        # the chunk's spikes in (step, neuron) order
            slot = (m + j) % RING
            count = 0
            for t in range(n_parts):
                for q in range(local_len[j, t]):
                    neuron = local[j, part_lo[t] + q]
                    ring[slot, count] = neuron
                    count += 1
                    if n_spikes < spike_step.shape[0]:
                        spike_step[n_spikes] = m + j
                        spike_neuron[n_spikes] = neuron
                    n_spikes += 1
            ring_len[slot] = count
        m += k
    return n_spikes


def _named(func, name: str):
    """``func`` as a function of another name: numba keys its on-disk cache by the qualified
    name, so the serial and the parallel compilation of one loop keep separate entries."""
    copy = types.FunctionType(func.__code__, func.__globals__, name, func.__defaults__, func.__closure__)
    copy.__qualname__ = name
    return copy


# One loop, compiled twice: over threads for large cultures, and plainly (prange is range)
# for small ones, where a parallel region costs more than the whole chunk.
_run_parallel = njit(parallel=True, nogil=True, cache=CACHE, error_model="numpy")(_step_loop)
_run_serial = njit(nogil=True, cache=CACHE, error_model="numpy")(_named(_step_loop, "_step_loop_serial"))


def partition_bounds(n: int, n_parts: int) -> np.ndarray:
    """First neuron of each partition, and n: ``n_parts`` contiguous ranges of near-equal size."""
    return (np.arange(n_parts + 1, dtype=np.int64) * n) // n_parts


def partition_groups(groups, post: np.ndarray, part_lo: np.ndarray):
    """The delay groups' synapse lists split into runs by source and target partition, each
    run in its serial order: ``(order, runs_ptr, run_part, run_start, run_stop, reach)`` for
    :func:`_step_loop`. The synapses are stored in ``order``: by group, target partition, then
    source, so that a partition's synapses are together (in the cache of the thread that
    usually runs it). The runs of group ``g`` from ``src`` are ``runs_ptr[g, src]`` to
    ``runs_ptr[g, src + 1]``; run ``r`` holds the stored synapses ``run_start[r]`` to
    ``run_stop[r]``, all onto partition ``run_part[r]``. ``reach[g, src]`` has bit
    ``t * 64 // P`` set where ``src`` has a run onto partition ``t``: a partition skips the
    other spikes after one look-up, and finds its run among a source's few."""
    n, n_parts = int(part_lo[-1]), part_lo.size - 1
    part_of = np.searchsorted(part_lo, np.arange(n), side="right") - 1
    orders, parts, starts, stops = [], [], [], []
    runs_ptr, reach = np.zeros((len(groups), n + 1), np.int64), np.zeros((len(groups), n), np.uint64)
    offset = n_runs = 0
    for g, (_, sel, ptr) in enumerate(groups):
        src = np.repeat(np.arange(n, dtype=np.int64), np.diff(ptr))
        key = part_of[post[sel]] * n + src
        order = np.argsort(key, kind="stable")            # by partition, then source; order kept
        orders.append(sel[order].astype(np.int64))
        key = key[order]
        first = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if key.size else np.zeros(0, np.int64)
        run_part, run_src = key[first] // n, key[first] % n
        by_source = np.argsort(run_src * n_parts + run_part, kind="stable")
        parts.append(run_part[by_source])
        starts.append(first[by_source] + offset)
        stops.append(np.r_[first[1:], key.size][by_source] + offset)
        runs_ptr[g] = n_runs + np.searchsorted(run_src[by_source], np.arange(n + 1))
        np.bitwise_or.at(reach[g], run_src, np.uint64(1) << (run_part * 64 // n_parts).astype(np.uint64))
        offset += sel.size
        n_runs += first.size
    joined = [np.concatenate(x).astype(np.int64) if x else np.zeros(0, np.int64)
              for x in (orders, parts, starts, stops)]
    return joined[0], runs_ptr, joined[1], joined[2], joined[3], reach


def warm_up() -> float:
    """Compile (or load from the on-disk cache) the step loop; returns the seconds it took."""
    start = time.perf_counter()
    f, i = np.zeros(1), np.zeros(1, np.int64)
    for run in (_run_serial, _run_parallel):
        run(0, 1, 1, 1, np.uint64(0), np.uint64(0), np.zeros((1, 1)), f.copy(), i.copy(), f.copy(),
            f.copy(), i.copy(), np.zeros(1, np.uint8), np.zeros((1, 1), np.int64),
            np.zeros((1, 1), np.int64), np.zeros((RING, 1), np.int64), np.zeros(RING, np.int64),
            np.array([0, 1], np.int64), 1.0, 0.0, 0.0, 0.1, f + 1,
            f.copy(), f.copy(), i.copy(), f + 1, f + 1, np.zeros(0, np.int64),
            np.zeros((0, 2), np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64),
            np.zeros(0, np.int64), np.zeros((0, 1), np.uint64), np.zeros((1, 5)), f.copy(), f + 1, f + 1,
            f + 1, np.ones((1, 1)), np.ones((1, 1)), i.copy(), i.copy())
    return time.perf_counter() - start


class CompiledEngine(CpuEngine):
    """:class:`CpuEngine` with the step loop compiled."""

    def __init__(self, *args, **kwargs):
        self.compile_seconds = warm_up()
        self._ring_kept = None         # (the ring list an advance left, its arrays)
        super().__init__(*args, **kwargs)

    def _rebuild(self, old: dict | None) -> None:
        super()._rebuild(old)
        self._g_dv = np.array([dv for dv, _, _ in self.groups], np.int64)
        self._decay_tables = None
        self._parts = 0                                   # partition tables built on first run
        self._synapses = None          # the synapse records in delivery order, once built
        self._stale = False            # self.last, self.u, self.r behind self._synapses

    def _syn_state(self) -> dict:
        if self._stale:                # the canonical synapse state, from the delivery order
            records, order = self._synapses, self._order
            self.u[order], self.r[order] = records[:, USE], records[:, RESOURCES]
            self.last[order] = records[:, LAST].astype(np.int64)
            self._stale = False
        return super()._syn_state()

    def _partitions(self) -> int:
        """Neuron partitions, PARTS_PER_THREAD per thread (one for one thread), and the delivery
        tables for them (rebuilt when that count changes): the synapses in delivery order
        (``self._order``) with their constants and state. Results do not depend on the
        partitions."""
        n_parts = self._partition_count()
        if n_parts != self._parts:
            self._syn_state()                             # the state as it stands, canonical
            self._part_lo = partition_bounds(self.c.n, n_parts)
            self._order, *self._runs = partition_groups(self.groups, self.conn.post, self._part_lo)
            order = self._order
            records = np.empty((order.size, 5))
            records[:, USE], records[:, RESOURCES], records[:, LAST] = self.u[order], self.r[order], self.last[order]
            records[:, WEIGHT] = self.conn.W[order]
            records[:, TARGET] = self.conn.post[order] * 4 + self.syn_type[order]
            self._synapses = records
            self._parts = n_parts
        return n_parts

    def _partition_count(self) -> int:
        threads = self._threads()
        return 1 if threads == 1 else min(self.c.n, PARTS_PER_THREAD * threads)

    def _threads(self) -> int:
        """Threads for the step loop: one per NEURONS_PER_THREAD neurons, at most numba's count."""
        return max(1, min(numba.get_num_threads(), self.c.n // NEURONS_PER_THREAD))

    def _chunk(self) -> int:
        """Steps per parallel region: at most every delay, so a chunk delivers only spikes of
        earlier chunks (the ring gets a chunk's spikes after its region)."""
        return max(1, min(self.k.chunk, int(self._g_dv.min(initial=RING))))

    def _decays(self) -> tuple[np.ndarray, np.ndarray]:
        """The recovery and facilitation factors of each synapse type for gaps of 0 to
        DECAY_STEPS - 1 steps, computed as the NumPy engine computes them."""
        if self._decay_tables is None:
            isi = np.arange(DECAY_STEPS) * self.k.dt
            with np.errstate(divide="ignore", invalid="ignore"):
                self._decay_tables = tuple(np.exp(-isi[None, :] / tau[:, None]) for tau in (self.k.D, self.k.F))
        return self._decay_tables

    def _ring_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """The spike history (a list of spikes per slot, in neuron order) as arrays (kept from
        the last advance while the list is the one it left)."""
        kept = self._ring_kept
        if kept is not None and kept[0] is self.ring:
            return kept[1], kept[2]
        ring = np.zeros((RING, self.c.n), np.int64)
        ring_len = np.array([spikes.size for spikes in self.ring], np.int64)
        for slot, spikes in enumerate(self.ring):
            ring[slot, :spikes.size] = spikes
        return ring, ring_len

    def _span(self, remaining: int, chunk: int) -> tuple[int, int]:
        """Steps for one compiled call (at most 2,048, fewer where the spike buffers would pass
        SPIKE_ROOM), and room for every spike they can hold: a neuron fires at most once per
        refractory period + 1 steps."""
        span = min(remaining, 2048)
        while True:
            cap = int(np.sum((span + self.tref) // (self.tref + 1)))
            if cap <= SPIKE_ROOM or span <= chunk:
                return span, cap
            span = max(chunk, span // 2)

    def advance(self, nsteps: int) -> tuple[np.ndarray, np.ndarray]:
        n, k = self.c.n, self.k
        n_parts = self._partitions()
        workers = self._threads()
        ring, ring_len = self._ring_arrays()
        chunk = self._chunk()
        seed = self.seed & 0xFFFFFFFFFFFFFFFF
        key_lo, key_hi = np.uint64(seed & 0xFFFFFFFF), np.uint64(seed >> 32)
        scratch = (np.empty((chunk, n)), np.zeros(n, np.uint8), np.zeros((chunk, n), np.int64),
                   np.zeros((chunk, n_parts), np.int64))                  # z, fired, local, local_len
        run = _run_parallel if workers > 1 else _run_serial
        constants = (self.vth, self.vreset, self.inoise, self.tref, self.dE, self.dI, self._g_dv,
                     *self._runs)
        k_types = (self.k.U, self.k.D, self.k.F, self.k.w_scale, *self._decays())
        steps_out, neurons_out = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
        threads = numba.get_num_threads()
        numba.set_num_threads(workers)           # this thread's regions only; restored below
        self._stale = True
        try:
            m, end = self.step, self.step + nsteps
            while m < end:
                span, cap = self._span(end - m, chunk)
                spike_step, spike_neuron = np.empty(cap, np.int64), np.empty(cap, np.int64)
                count = run(m, span, chunk, workers, key_lo, key_hi, scratch[0], self.V, self.refrac,
                            self.gE, self.gI, self.counts, scratch[1], scratch[2], scratch[3], ring,
                            ring_len, self._part_lo, k.c1, k.c2, k.i0, k.dt, *constants,
                            self._synapses, *k_types, spike_step, spike_neuron)
                if count > cap:
                    raise RuntimeError(f"{count} spikes in {span} steps: more than the refractory periods allow")
                steps_out.append(spike_step[:count])
                neurons_out.append(spike_neuron[:count])
                m += span
        finally:
            numba.set_num_threads(threads)
        self.step = end
        self.ring = [ring[slot, :ring_len[slot]].copy() for slot in range(RING)]
        self._ring_kept = (self.ring, ring, ring_len)
        return np.concatenate(steps_out), np.concatenate(neurons_out)
