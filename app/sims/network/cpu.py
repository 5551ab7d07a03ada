"""The CPU (NumPy, float64) cultured-network engine: the reference for the CUDA engine.

Neurons are updated step by step, vectorized across the culture. Spikes are remembered for
64 steps; at step ``m`` every synapse of delay ``D`` whose source spiked at ``m - D`` delivers
(event-driven: only those synapses are touched). Meant for small cultures (up to a few
thousand neurons); the CUDA engine runs the large ones.
"""

from __future__ import annotations

import numpy as np

from app.sims.network.engine import NetworkEngine, noise_block
from app.sims.network.model import (NEVER, Connectivity, Constants, Culture, connectivity,
                                    grow_radii, synapse_type)

RING = 64
NOISE_BLOCK = 2048


class CpuEngine(NetworkEngine):
    def __init__(self, culture: Culture, consts: Constants, growth, seed: int,
                 start_radius: float):
        self.c, self.k, self.growth, self.seed = culture, consts, growth, int(seed)
        n = culture.n
        self.step = 0
        self.V = culture.vinit.astype(np.float64).copy()
        self.refrac = np.zeros(n, np.int64)
        self.gE = np.zeros(n)
        self.gI = np.zeros(n)
        self.counts = np.zeros(n, np.int64)
        self.ring = [np.zeros(0, np.int64) for _ in range(RING)]
        self.rad = np.full(n, float(start_radius))
        inh = culture.inhibitory.astype(np.int64)
        # decay of the currents from excitatory / inhibitory sources onto each target
        self.dE = consts.decay[synapse_type(0, inh)]
        self.dI = consts.decay[synapse_type(1, inh)]
        self.vth, self.vreset, self.inoise = culture.vthresh, culture.vreset, culture.inoise
        self.tref = culture.trefract.astype(np.int64)
        self._noise = None
        self._noise_m0 = -1
        self._rebuild(None)

    # ---- synapses -----------------------------------------------------------------------
    def _rebuild(self, old: dict | None) -> None:
        """Connectivity from the radii; keep the TM state of synapses that persist."""
        c, k = self.c, self.k
        conn = connectivity(c.width, c.height, self.rad, c.inhibitory, k.weight_scale)
        self.conn = conn
        typ = synapse_type(c.inhibitory[conn.pre], c.inhibitory[conn.post])
        self.syn_type = typ
        self.syn_exc = ~c.inhibitory[conn.pre]
        self.U, self.D, self.F = k.U[typ], k.D[typ], k.F[typ]
        self.u = self.U.copy()
        self.r = np.ones(conn.size)
        self.last = np.full(conn.size, NEVER, np.int64)
        if old is not None and old["syn_pre"].size and conn.size:
            n = c.n
            key_new = conn.post * n + conn.pre
            key_old = np.asarray(old["syn_post"], np.int64) * n + np.asarray(old["syn_pre"], np.int64)
            pos = np.searchsorted(key_old, key_new)
            pos = np.minimum(pos, key_old.size - 1)
            hit = key_old[pos] == key_new
            self.u[hit] = old["syn_u"][pos[hit]]
            self.r[hit] = old["syn_r"][pos[hit]]
            self.last[hit] = old["syn_last"][pos[hit]]
        # per delay value: synapse indices sorted by source, with a CSR pointer over sources
        delay = k.delay[typ]
        self.groups = []
        for dv in np.unique(k.delay):
            sel = np.flatnonzero(delay == dv)
            sel = sel[np.argsort(conn.pre[sel], kind="stable")]
            ptr = np.searchsorted(conn.pre[sel], np.arange(c.n + 1))
            self.groups.append((int(dv), sel, ptr))

    @property
    def n_synapses(self) -> int:
        return self.conn.size

    def _syn_state(self) -> dict:
        return {"syn_pre": self.conn.pre, "syn_post": self.conn.post, "syn_u": self.u,
                "syn_r": self.r, "syn_last": self.last}

    # ---- stepping -----------------------------------------------------------------------
    def _noise_at(self, m: int) -> np.ndarray:
        if self._noise is None or not self._noise_m0 <= m < self._noise_m0 + NOISE_BLOCK:
            self._noise_m0 = m
            self._noise = noise_block(self.seed, self.c.n, m, NOISE_BLOCK)
        return self._noise[m - self._noise_m0]

    def advance(self, nsteps: int) -> tuple[np.ndarray, np.ndarray]:
        k = self.k
        c1, c2, i0, dt = k.c1, k.c2, k.i0, k.dt
        V, refrac, gE, gI = self.V, self.refrac, self.gE, self.gI
        out_steps, out_neurons = [], []
        for m in range(self.step, self.step + nsteps):
            z = self._noise_at(m)
            ref = refrac > 0
            fire = ~ref & (V >= self.vth)
            integ = ~(ref | fire)
            v_new = c1 * V + c2 * (gE + gI + i0 + self.inoise * z)
            V[integ] = v_new[integ]
            V[fire] = self.vreset[fire]
            refrac[ref] -= 1
            refrac[fire] = self.tref[fire]
            spikers = np.flatnonzero(fire)
            self.ring[m % RING] = spikers
            if spikers.size:
                self.counts[spikers] += 1
                out_steps.append(np.full(spikers.size, m, np.int64))
                out_neurons.append(spikers)
            gE *= self.dE
            gI *= self.dI
            for dv, sel, ptr in self.groups:
                if m - dv < 0:
                    continue
                src = self.ring[(m - dv) % RING]
                if src.size == 0:
                    continue
                starts, ends = ptr[src], ptr[src + 1]
                lens = ends - starts
                total = int(lens.sum())
                if total == 0:
                    continue
                offs = np.repeat(starts - np.concatenate(([0], np.cumsum(lens)[:-1])), lens)
                s = sel[offs + np.arange(total)]
                isi = (m - self.last[s]) * dt
                r = 1.0 + (self.r[s] * (1.0 - self.u[s]) - 1.0) * np.exp(-isi / self.D[s])
                u = self.U[s] + self.u[s] * (1.0 - self.U[s]) * np.exp(-isi / self.F[s])
                self.r[s], self.u[s], self.last[s] = r, u, m
                jump = self.conn.W[s] * u * r * self.k.w_scale[self.syn_type[s]]
                exc = self.syn_exc[s]
                np.add.at(gE, self.conn.post[s[exc]], jump[exc])
                np.add.at(gI, self.conn.post[s[~exc]], jump[~exc])
        self.step += nsteps
        if out_steps:
            return np.concatenate(out_steps), np.concatenate(out_neurons)
        return np.zeros(0, np.int64), np.zeros(0, np.int64)

    def set_constants(self, consts: Constants, growth) -> None:
        """Steering: other synapse-type weight factors or growth settings from the next step."""
        self.k, self.growth = consts, growth

    # ---- growth -------------------------------------------------------------------------
    def grow(self, epoch_seconds: float) -> np.ndarray:
        rate = self.counts / epoch_seconds
        self.rad = grow_radii(self.rad, rate, self.growth, epoch_seconds)
        self.counts[:] = 0
        self._rebuild(self._syn_state())
        return rate

    def radius(self) -> np.ndarray:
        return self.rad.copy()

    def connectivity(self) -> Connectivity:
        return Connectivity(self.conn.pre.copy(), self.conn.post.copy(), self.conn.W.copy())

    # ---- state --------------------------------------------------------------------------
    def _hist(self) -> np.ndarray:
        hist = np.zeros(self.c.n, np.uint64)
        for b in range(min(RING, self.step)):
            spk = self.ring[(self.step - 1 - b) % RING]
            hist[spk] |= np.uint64(1) << np.uint64(b)
        return hist

    def state(self) -> dict[str, np.ndarray]:
        return {"step": np.int64(self.step), "V": self.V.copy(), "refrac": self.refrac.copy(),
                "gE": self.gE.copy(), "gI": self.gI.copy(), "hist": self._hist(),
                "counts": self.counts.copy(), "radius": self.rad.copy(),
                **{k: v.copy() for k, v in self._syn_state().items()}}

    def restore(self, state: dict[str, np.ndarray]) -> None:
        self.step = int(state["step"])
        self.V[:] = state["V"]
        self.refrac[:] = state["refrac"]
        self.gE[:] = state["gE"]
        self.gI[:] = state["gI"]
        self.counts[:] = state["counts"]
        self.rad = np.asarray(state["radius"], np.float64).copy()
        hist = np.asarray(state["hist"], np.uint64)
        self.ring = [np.zeros(0, np.int64) for _ in range(RING)]
        for b in range(RING):
            m = self.step - 1 - b
            if m >= 0:
                self.ring[m % RING] = np.flatnonzero((hist >> np.uint64(b)) & np.uint64(1))
        self._rebuild({k: np.asarray(state[k]) for k in
                       ("syn_pre", "syn_post", "syn_u", "syn_r", "syn_last")})
