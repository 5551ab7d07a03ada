"""The compiled CPU cultured-network engine (numba): the NumPy engine's step loop, compiled.

Same state, synapse tables and growth as :class:`CpuEngine`; the noise is ``noise_block``
compiled (same Philox streams, parallel over neurons; equal to the NumPy twin to rounding of
log/cos), and :meth:`run` is one compiled loop over steps
that updates the neurons and delivers each spike along its source's synapses in the same order
as the NumPy engine (so the conductance sums are added in the same order).

The step loop runs in parallel in two regions a step: the neuron update (and the conductance
decay) over neurons, then spike delivery over partitions of the post-synaptic neurons. Each
partition walks every spike's synapse list in the serial order but touches only the synapses
whose target it owns, so every conductance receives its jumps in the same order as in the serial
loop and every synapse's state has one writer: the results equal the serial engine's bit for bit,
whatever the thread count.
"""

from __future__ import annotations

import math
import time
import types

import numpy as np
import numba
from numba import njit, prange

from app.compute.jit import CACHE
from app.compute.philox_numba import philox_words
from app.sims.network.cpu import NOISE_BLOCK, RING, CpuEngine

NEURONS_PER_THREAD = 500


@njit(inline="always", cache=CACHE, error_model="numpy")
def _box_muller(a, b):
    u1 = ((a >> np.uint32(9)) + 0.5) * 1.1920928955078125e-07      # exact on the float32 grid
    u2 = ((b >> np.uint32(9)) + 0.5) * 1.1920928955078125e-07
    return math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)


@njit(parallel=True, nogil=True, cache=CACHE, error_model="numpy")
def _noise(key_lo, key_hi, m0, out):
    """:func:`app.sims.network.engine.noise_block` compiled: out (k, n) standard normals, Box-Muller
    on the float32-grid uniforms of Philox draw ``m >> 1`` of stream ``neuron`` (words 0, 1 on
    even steps, 2, 3 on odd ones)."""
    k, n = out.shape
    for i in prange(n):
        j = 0
        while j < k:
            m = m0 + j
            w0, w1, w2, w3 = philox_words(key_lo, key_hi, np.uint64(m >> 1), np.uint64(i))
            if m & 1 == 0:                      # even step: words 0, 1; the odd one after: 2, 3
                out[j, i] = _box_muller(w0, w1)
                j += 1
            if j < k:
                out[j, i] = _box_muller(w2, w3)
                j += 1


def _step_loop(m0, nsteps, noise, noise_m0, V, refrac, gE, gI, counts, ring, ring_len,
               c1, c2, i0, dt, vth, vreset, inoise, tref, dE, dI,
               g_dv, part_sel, part_ptr, n_parts, last, u_s, r_s, U, D, F, W, post, exc,
               spike_step, spike_neuron, fired):
    """:meth:`CpuEngine.advance`'s step loop (compiled below): the neuron update parallel over neurons, the
    delivery parallel over ``n_parts`` target partitions. ``part_ptr[g, t * n + src]`` to
    ``part_ptr[g, t * n + src + 1]`` index ``part_sel``: the synapses of delay group ``g`` from
    ``src`` onto partition ``t``, in the serial order."""
    n = V.shape[0]
    n_spikes = 0
    for m in range(m0, m0 + nsteps):
        z = noise[m - noise_m0]
        slot = m % RING
        for i in prange(n):
            fired[i] = 0
            if refrac[i] > 0:
                refrac[i] -= 1
            elif V[i] >= vth[i]:
                V[i] = vreset[i]
                refrac[i] = tref[i]
                counts[i] += 1
                fired[i] = 1
            else:
                V[i] = c1 * V[i] + c2 * (gE[i] + gI[i] + i0 + inoise[i] * z[i])
            gE[i] *= dE[i]
            gI[i] *= dI[i]
        k = 0
        for i in range(n):                       # the ring slot in neuron order, as in the serial loop
            if fired[i]:
                ring[slot, k] = i
                k += 1
                if n_spikes < spike_step.shape[0]:
                    spike_step[n_spikes] = m
                    spike_neuron[n_spikes] = i
                n_spikes += 1
        ring_len[slot] = k
        for t in prange(n_parts):
            for g in range(g_dv.shape[0]):
                dv = g_dv[g]
                if m - dv < 0:
                    continue
                src_slot = (m - dv) % RING
                for q in range(ring_len[src_slot]):
                    src = ring[src_slot, q]
                    for p in range(part_ptr[g, t * n + src], part_ptr[g, t * n + src + 1]):
                        s = part_sel[p]
                        isi = (m - last[s]) * dt
                        r = 1.0 + (r_s[s] * (1.0 - u_s[s]) - 1.0) * math.exp(-isi / D[s])
                        u = U[s] + u_s[s] * (1.0 - U[s]) * math.exp(-isi / F[s])
                        r_s[s] = r
                        u_s[s] = u
                        last[s] = m
                        jump = W[s] * u * r
                        if exc[s]:
                            gE[post[s]] += jump
                        else:
                            gI[post[s]] += jump
    return n_spikes


def _named(func, name: str):
    """``func`` as a function of another name: numba keys its on-disk cache by the qualified
    name, so the serial and the parallel compilation of one loop keep separate entries."""
    copy = types.FunctionType(func.__code__, func.__globals__, name, func.__defaults__, func.__closure__)
    copy.__qualname__ = name
    return copy


# One loop, compiled twice: over threads for large cultures, and plainly (prange is range)
# for small ones, where a parallel region costs more than the whole step.
_run_parallel = njit(parallel=True, nogil=True, cache=CACHE, error_model="numpy")(_step_loop)
_run_serial = njit(nogil=True, cache=CACHE, error_model="numpy")(_named(_step_loop, "_step_loop_serial"))


def partition_groups(groups, post: np.ndarray, n: int, n_parts: int) -> tuple[np.ndarray, np.ndarray]:
    """The delay groups' synapse lists split by target partition (neurons ``t*n//P .. (t+1)*n//P``),
    each list kept in its serial order: ``(part_sel, part_ptr)`` for :func:`_run_parallel`."""
    part_of = (np.arange(n, dtype=np.int64) * n_parts) // max(n, 1)
    sels, ptrs, offset = [], [], 0
    for _, sel, ptr in groups:
        src = np.repeat(np.arange(n, dtype=np.int64), np.diff(ptr))
        key = part_of[post[sel]] * n + src
        order = np.argsort(key, kind="stable")            # by partition, then source; order kept
        sels.append(sel[order].astype(np.int64))
        flat = np.zeros(n_parts * n + 1, np.int64)
        flat[1:] = np.cumsum(np.bincount(key, minlength=n_parts * n))
        ptrs.append(flat + offset)
        offset += sel.size
    if not sels:
        return np.zeros(0, np.int64), np.zeros((0, n_parts * n + 1), np.int64)
    return np.concatenate(sels), np.stack(ptrs)


def warm_up() -> float:
    """Compile (or load from the on-disk cache) the step loop; returns the seconds it took."""
    start = time.perf_counter()
    _noise(np.uint64(0), np.uint64(0), 0, np.empty((2, 1)))
    f, i = np.zeros(1), np.zeros(1, np.int64)
    for run in (_run_serial, _run_parallel):
        run(0, 1, np.zeros((1, 1)), 0, f.copy(), i.copy(), f.copy(), f.copy(), i.copy(),
            np.zeros((RING, 1), np.int64), np.zeros(RING, np.int64), 1.0, 0.0, 0.0, 0.1, f + 1,
            f.copy(), f.copy(), i.copy(), f + 1, f + 1, np.zeros(0, np.int64), np.zeros(0, np.int64),
            np.zeros((0, 2), np.int64), 1, i.copy(), f.copy(), f.copy(), f.copy(), f + 1, f + 1,
            f.copy(), i.copy(), np.zeros(1, np.bool_), i.copy(), i.copy(), np.zeros(1, np.uint8))
    return time.perf_counter() - start


class CompiledEngine(CpuEngine):
    """:class:`CpuEngine` with the step loop compiled."""

    def __init__(self, *args, **kwargs):
        self.compile_seconds = warm_up()
        super().__init__(*args, **kwargs)

    def _noise_at(self, m: int) -> np.ndarray:
        if self._noise is None or not self._noise_m0 <= m < self._noise_m0 + NOISE_BLOCK:
            seed = self.seed & 0xFFFFFFFFFFFFFFFF
            self._noise_m0 = m
            self._noise = np.empty((NOISE_BLOCK, self.c.n))
            _noise(np.uint64(seed & 0xFFFFFFFF), np.uint64(seed >> 32), m, self._noise)
        return self._noise[m - self._noise_m0]

    def _rebuild(self, old: dict | None) -> None:
        super()._rebuild(old)
        self._g_dv = np.array([dv for dv, _, _ in self.groups], np.int64)
        self._parts = 0                                   # partition tables built on first run

    def _partitions(self) -> int:
        """Target partitions for the delivery region: one per thread the step loop uses (tables
        rebuilt when that count changes)."""
        n_parts = self._threads()
        if n_parts != self._parts:
            self._part_sel, self._part_ptr = partition_groups(self.groups, self.conn.post, self.c.n, n_parts)
            self._parts = n_parts
        return n_parts

    def _threads(self) -> int:
        """Threads for the step loop: one per NEURONS_PER_THREAD neurons, at most numba's count
        (a parallel region costs microseconds a step, more than a small culture's whole step)."""
        return max(1, min(numba.get_num_threads(), self.c.n // NEURONS_PER_THREAD))

    def advance(self, nsteps: int) -> tuple[np.ndarray, np.ndarray]:
        n, k = self.c.n, self.k
        ring = np.zeros((RING, n), np.int64)
        ring_len = np.zeros(RING, np.int64)
        for slot, spk in enumerate(self.ring):
            ring[slot, :spk.size] = spk
            ring_len[slot] = spk.size
        steps_out, neurons_out = [], []
        n_parts = self._partitions()
        threads = numba.get_num_threads()
        numba.set_num_threads(n_parts)           # this thread's regions only; restored below
        run = _run_parallel if n_parts > 1 else _run_serial
        try:
            fired = np.zeros(n, np.uint8)
            m, end = self.step, self.step + nsteps
            while m < end:
                self._noise_at(m)                                  # the block holding step m
                chunk = min(end, self._noise_m0 + NOISE_BLOCK) - m
                cap = n * chunk // 4 + 1024
                while True:
                    state = (self.V.copy(), self.refrac.copy(), self.gE.copy(), self.gI.copy(),
                             self.counts.copy(), ring.copy(), ring_len.copy(), self.last.copy(),
                             self.u.copy(), self.r.copy())
                    spike_step = np.empty(cap, np.int64)
                    spike_neuron = np.empty(cap, np.int64)
                    count = run(
                        m, chunk, self._noise, self._noise_m0, self.V, self.refrac, self.gE, self.gI,
                        self.counts, ring, ring_len, k.c1, k.c2, k.i0, k.dt, self.vth, self.vreset,
                        self.inoise, self.tref, self.dE, self.dI, self._g_dv, self._part_sel,
                        self._part_ptr, n_parts, self.last, self.u, self.r, self.U, self.D, self.F,
                        self.conn.W, self.conn.post, self.syn_exc, spike_step, spike_neuron, fired)
                    if count <= cap:
                        break
                    # more spikes than room: undo the chunk and run it again with room for all
                    (self.V[:], self.refrac[:], self.gE[:], self.gI[:], self.counts[:], ring[:],
                     ring_len[:], self.last[:], self.u[:], self.r[:]) = state
                    cap = count
                steps_out.append(spike_step[:count])
                neurons_out.append(spike_neuron[:count])
                m += chunk
        finally:
            numba.set_num_threads(threads)
        self.step = end
        self.ring = [ring[slot, :ring_len[slot]].copy() for slot in range(RING)]
        return np.concatenate(steps_out), np.concatenate(neurons_out)
