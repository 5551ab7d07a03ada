"""The compiled CPU cultured-network engine (numba): the NumPy engine's step loop, compiled.

Same state, synapse tables and growth as :class:`CpuEngine`; the noise is ``noise_block``
compiled (same Philox streams, parallel over neurons; equal to the NumPy twin to rounding of
log/cos), and :meth:`run` is one compiled loop over steps
that updates the neurons and delivers each spike along its source's synapses in the same order
as the NumPy engine (so the conductance sums are added in the same order). The loop is serial:
a 10,000-neuron step is tens of microseconds, below what a parallel region would save.
"""

from __future__ import annotations

import math
import time

import numpy as np
from numba import njit, prange

from app.compute.jit import CACHE
from app.compute.philox_numba import philox_words
from app.sims.network.cpu import NOISE_BLOCK, RING, CpuEngine


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


@njit(nogil=True, cache=CACHE, error_model="numpy")
def _run(m0, nsteps, noise, noise_m0, V, refrac, gE, gI, counts, ring, ring_len,
         c1, c2, i0, dt, vth, vreset, inoise, tref, dE, dI,
         g_dv, g_sel, g_sel_off, g_ptr, last, u_s, r_s, U, D, F, W, post, exc,
         spike_step, spike_neuron):
    """Advance ``nsteps`` steps from ``m0``; spikes go to the output arrays; returns their count."""
    n = V.shape[0]
    n_spikes = 0
    for m in range(m0, m0 + nsteps):
        z = noise[m - noise_m0]
        slot = m % RING
        ring_len[slot] = 0
        for i in range(n):
            if refrac[i] > 0:
                refrac[i] -= 1
            elif V[i] >= vth[i]:
                V[i] = vreset[i]
                refrac[i] = tref[i]
                ring[slot, ring_len[slot]] = i
                ring_len[slot] += 1
                counts[i] += 1
                if n_spikes < spike_step.shape[0]:
                    spike_step[n_spikes] = m
                    spike_neuron[n_spikes] = i
                n_spikes += 1
            else:
                V[i] = c1 * V[i] + c2 * (gE[i] + gI[i] + i0 + inoise[i] * z[i])
        for i in range(n):
            gE[i] *= dE[i]
            gI[i] *= dI[i]
        for g in range(g_dv.shape[0]):
            dv = g_dv[g]
            if m - dv < 0:
                continue
            src_slot = (m - dv) % RING
            for q in range(ring_len[src_slot]):
                src = ring[src_slot, q]
                for p in range(g_ptr[g, src], g_ptr[g, src + 1]):
                    s = g_sel[g_sel_off[g] + p]
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


def warm_up() -> float:
    """Compile (or load from the on-disk cache) the step loop; returns the seconds it took."""
    start = time.perf_counter()
    _noise(np.uint64(0), np.uint64(0), 0, np.empty((2, 1)))
    f, i = np.zeros(1), np.zeros(1, np.int64)
    _run(0, 1, np.zeros((1, 1)), 0, f.copy(), i.copy(), f.copy(), f.copy(), i.copy(),
         np.zeros((RING, 1), np.int64), np.zeros(RING, np.int64), 1.0, 0.0, 0.0, 0.1, f + 1, f.copy(),
         f.copy(), i.copy(), f + 1, f + 1, np.zeros(0, np.int64), np.zeros(0, np.int64),
         np.zeros(0, np.int64), np.zeros((0, 2), np.int64), i.copy(), f.copy(), f.copy(), f.copy(),
         f + 1, f + 1, f.copy(), i.copy(), np.zeros(1, np.bool_), i.copy(), i.copy())
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
        n = self.c.n
        self._g_dv = np.array([dv for dv, _, _ in self.groups], np.int64)
        sels = [sel.astype(np.int64) for _, sel, _ in self.groups]
        self._g_sel = np.concatenate(sels) if sels else np.zeros(0, np.int64)
        self._g_sel_off = np.cumsum([0] + [len(s) for s in sels[:-1]]).astype(np.int64)
        self._g_ptr = (np.stack([ptr for _, _, ptr in self.groups]).astype(np.int64) if self.groups
                       else np.zeros((0, n + 1), np.int64))

    def advance(self, nsteps: int) -> tuple[np.ndarray, np.ndarray]:
        n, k = self.c.n, self.k
        ring = np.zeros((RING, n), np.int64)
        ring_len = np.zeros(RING, np.int64)
        for slot, spk in enumerate(self.ring):
            ring[slot, :spk.size] = spk
            ring_len[slot] = spk.size
        steps_out, neurons_out = [], []
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
                count = _run(m, chunk, self._noise, self._noise_m0, self.V, self.refrac, self.gE,
                             self.gI, self.counts, ring, ring_len, k.c1, k.c2, k.i0, k.dt,
                             self.vth, self.vreset, self.inoise, self.tref, self.dE, self.dI,
                             self._g_dv, self._g_sel, self._g_sel_off, self._g_ptr, self.last,
                             self.u, self.r, self.U, self.D, self.F, self.conn.W, self.conn.post,
                             self.syn_exc, spike_step, spike_neuron)
                if count <= cap:
                    break
                # more spikes than room: undo the chunk and run it again with room for all
                (self.V[:], self.refrac[:], self.gE[:], self.gI[:], self.counts[:], ring[:],
                 ring_len[:], self.last[:], self.u[:], self.r[:]) = state
                cap = count
            steps_out.append(spike_step[:count])
            neurons_out.append(spike_neuron[:count])
            m += chunk
        self.step = end
        self.ring = [ring[slot, :ring_len[slot]].copy() for slot in range(RING)]
        return np.concatenate(steps_out), np.concatenate(neurons_out)
