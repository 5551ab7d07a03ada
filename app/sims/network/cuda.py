"""The CUDA cultured-network engine (float32 state, float64 radii and areas).

Per launch of ``net_step`` every neuron advances one chunk of ``min delay`` steps (9 at
dt = 0.1 ms), so a simulated second takes ceil(10000/9) = 1112 chunks. Runs of
``GRAPH_CHUNKS`` chunks are replayed from a captured CUDA graph (``app/compute/graphs.py``: one
call instead of 64 launches from Python, which hold the GIL a GUI thread needs), the chunks
counting their steps from a device-side counter the graph advances; the rest are launched
one by one. Nothing waits for the GPU between chunks; spikes accumulate in a device buffer
that is read once per ``run`` call (or per sub-run when the buffer bound requires it). The growth update runs in
three kernels; the host only reads the synapse total and the largest in-degree (to size the
ELL arrays) and the rates for the epoch summary.
"""

from __future__ import annotations

import numpy as np

from app.compute.graphs import CapturedGraph
from app.compute.kernels import load_module, read_kernel
from app.compute.launch import PackedLaunch
from app.sims.network.engine import NetworkEngine
from app.sims.network.model import Connectivity, Constants, Culture

BLOCK = 64
STEP_BLOCK = 128
LANES = 8                           # threads per target neuron in net_step
MAX_SPIKE_BUFFER = 1 << 26          # entries (8 bytes each)
READBACK_STEPS = 9999               # spikes are copied back at least this often
GRAPH_CHUNKS = 64                   # chunks per captured graph (even: the parity comes back)
SYN_FIELDS = ("pre", "W", "u", "r", "last")
SYN_DTYPES = {"pre": np.uint32, "W": np.float32, "u": np.float32, "r": np.float32, "last": np.int32}


def kernel_source() -> str:
    return read_kernel("network.cu")


class CudaEngine(NetworkEngine):
    def __init__(self, culture: Culture, consts: Constants, growth, seed: int, start_radius: float):
        import pycuda.driver as cuda
        import pycuda.gpuarray as ga

        self.cuda, self.ga = cuda, ga
        self.c, self.k, self.growth, self.seed = culture, consts, growth, int(seed)
        n = self.n = culture.n
        self.chunk = int(consts.chunk)
        if int(consts.delay.max()) + self.chunk > 64:
            raise ValueError("the longest delay plus the chunk must fit 64 steps of spike history")
        self.module = load_module(kernel_source(), "network.cu", {"NET_CHUNK": self.chunk, "NET_LANES": LANES})
        self._constants()
        f32 = np.float32
        self.V = ga.to_gpu(culture.vinit.astype(f32))
        self.refrac = ga.zeros(n, np.int32)
        self.gE = ga.zeros(n, f32)
        self.gI = ga.zeros(n, f32)
        self.vth = ga.to_gpu(culture.vthresh.astype(f32))
        self.vreset = ga.to_gpu(culture.vreset.astype(f32))
        self.inoise = ga.to_gpu(culture.inoise.astype(f32))
        self.tref = ga.to_gpu(culture.trefract.astype(np.int32))
        self.inh = ga.to_gpu(culture.inhibitory.astype(np.uint8))
        self.hist = [ga.zeros(n, np.uint64), ga.zeros(n, np.uint64)]
        self.counts = ga.zeros(n, np.uint32)
        self.radius_d = ga.to_gpu(np.full(n, float(start_radius)))
        self.rate = ga.zeros(n, f32)
        self.rmax = ga.to_gpu(np.array([np.float64(start_radius).view(np.uint64)], np.uint64))
        self.totals = ga.zeros(2, np.uint32)
        self.rowlen = [ga.zeros(n, np.int32), ga.zeros(n, np.int32)]
        self.syn = [self._alloc_syn(1), self._alloc_syn(1)]
        self.cur = 0
        self.n_synapses = 0
        self.max_in = 0
        # spikes are read back every sub_steps steps; a neuron fires at most once per
        # refractory period + 1 steps, which bounds the buffer exactly
        gap = int(culture.trefract.min()) + 1
        per = max(2, MAX_SPIKE_BUFFER // max(n, 1))
        sub = min(READBACK_STEPS, max(self.chunk, (per - 1) * gap))
        self.sub_steps = max(self.chunk, sub // self.chunk * self.chunk)
        self.capacity = n * (-(-self.sub_steps // gap) + 1)
        self.spikes = ga.empty(self.capacity, np.uint64)
        self.nspikes = ga.zeros(1, np.uint32)
        self.step_base = ga.zeros(1, np.int32)     # the step net_step's offsets count from
        self._graphs: dict[int, CapturedGraph] = {}
        self.graph_replays = 0
        self.stream = cuda.Stream()
        self.grid = ((n + BLOCK - 1) // BLOCK, 1)
        self.step_grid = ((n * LANES + STEP_BLOCK - 1) // STEP_BLOCK, 1)
        self.step = 0
        self.launches = 0
        self._base_fn = self.module.get_function("net_base")
        self._base_fn.prepare("Pii")
        self._grow_fn = self.module.get_function("net_grow")
        self._grow_fn.prepare("idPPPP")
        self._count_fn = self.module.get_function("net_count")
        self._count_fn.prepare("iiiPPPP")
        self._build_fn = self.module.get_function("net_build")
        self._build_fn.prepare("iiiPPP" + "P" * 5 + "P" * 6)
        self._connect()
        self._make_launchers()

    # ---- setup --------------------------------------------------------------------------
    def _constants(self) -> None:
        k, g = self.k, self.growth

        def put(name, values, dtype):
            ptr, _ = self.module.get_global(name)
            self.cuda.memcpy_htod(ptr, np.ascontiguousarray(values, dtype))

        put("c_U", k.U, np.float32)
        put("c_wscale", k.w_scale, np.float32)
        put("c_invD", 1.0 / k.D, np.float32)
        put("c_invF", 1.0 / k.F, np.float32)
        put("c_decay", k.decay, np.float32)
        put("c_delay", k.delay, np.int32)
        put("c_lif", [k.c1, k.c2, k.i0, k.dt], np.float32)
        put("c_growth", [g.epsilon, g.beta, g.rho, g.target_rate, g.max_radius, k.weight_scale],
            np.float64)

    def set_constants(self, consts: Constants, growth) -> None:
        """Steering: other synapse-type weight factors or growth settings, copied into the
        kernels' constants between launches (no recompile)."""
        self.k, self.growth = consts, growth
        self._constants()

    def _slots(self, which: int) -> int:
        return self.syn[which]["pre"].size // self.n

    def _alloc_syn(self, width: int) -> dict:
        size = max(width, 1) * self.n
        return {f: self.ga.empty(size, SYN_DTYPES[f]) for f in SYN_FIELDS}

    def _make_launchers(self) -> None:
        fn = self.module.get_function("net_step")
        fmt = "iiiQ" + "P" * 20 + "IP"
        self.launchers = []
        for parity in (0, 1):
            syn = self.syn[self.cur]
            args = [self.n, 0, self.chunk, self.seed, self.V.gpudata, self.refrac.gpudata,
                    self.gE.gpudata, self.gI.gpudata, self.vth.gpudata, self.vreset.gpudata,
                    self.inoise.gpudata, self.tref.gpudata, self.inh.gpudata,
                    self.hist[parity].gpudata, self.hist[1 - parity].gpudata,
                    self.rowlen[self.cur].gpudata, syn["pre"].gpudata, syn["W"].gpudata,
                    syn["u"].gpudata, syn["r"].gpudata, syn["last"].gpudata,
                    self.counts.gpudata, self.spikes.gpudata, self.nspikes.gpudata, self.capacity,
                    self.step_base.gpudata]
            self.launchers.append(PackedLaunch(fn, fmt, self.step_grid, (STEP_BLOCK, 1, 1), self.stream,
                                               args, {1: 0, 2: 0}))
        self.parity = 0
        self._drop_graphs()           # they hold the old launches' arguments

    def _drop_graphs(self) -> None:
        for graph in self._graphs.values():
            graph.close()
        self._graphs = {}

    def _graph(self, parity: int) -> CapturedGraph:
        """GRAPH_CHUNKS full chunks from ``parity`` on, then the step counter advanced past them."""
        if parity not in self._graphs:
            def issue() -> None:
                for j in range(GRAPH_CHUNKS):
                    self.launchers[(parity + j) % 2](a1=j * self.chunk, a2=self.chunk)
                self._set_base(GRAPH_CHUNKS * self.chunk, add=True)
            self._graphs[parity] = CapturedGraph(self.stream, issue)
        return self._graphs[parity]

    def _set_base(self, value: int, add: bool = False) -> None:
        self._base_fn.prepared_async_call((1, 1), (1, 1, 1), self.stream, self.step_base.gpudata,
                                          np.int32(value), np.int32(add))

    def _connect(self) -> None:
        """Rebuild the ELL rows from the radii (rmax already holds the largest radius)."""
        self.totals.fill(0)
        nxt = 1 - self.cur
        self._count_fn.prepared_async_call(
            self.grid, (BLOCK, 1, 1), self.stream, np.int32(self.n), np.int32(self.c.width),
            np.int32(self.c.height), self.radius_d.gpudata, self.rmax.gpudata,
            self.rowlen[nxt].gpudata, self.totals.gpudata)
        self.stream.synchronize()
        total, max_in = (int(v) for v in self.totals.get())
        if self._slots(nxt) < max_in:
            self.syn[nxt] = self._alloc_syn(max(max_in, int(self._slots(nxt) * 1.25) + 1))
        old, new = self.syn[self.cur], self.syn[nxt]
        self._build_fn.prepared_async_call(
            self.grid, (BLOCK, 1, 1), self.stream, np.int32(self.n), np.int32(self.c.width),
            np.int32(self.c.height), self.radius_d.gpudata, self.rmax.gpudata, self.inh.gpudata,
            self.rowlen[self.cur].gpudata, old["pre"].gpudata, old["u"].gpudata, old["r"].gpudata,
            old["last"].gpudata, self.rowlen[nxt].gpudata, new["pre"].gpudata, new["W"].gpudata,
            new["u"].gpudata, new["r"].gpudata, new["last"].gpudata)
        self.cur = nxt
        self.n_synapses, self.max_in = total, max_in

    # ---- stepping -----------------------------------------------------------------------
    def advance(self, nsteps: int) -> tuple[np.ndarray, np.ndarray]:
        out = []
        done = 0
        while done < nsteps:
            part = min(nsteps - done, self.sub_steps)
            end = self.step + part
            m = self.step
            self._set_base(m)
            span = GRAPH_CHUNKS * self.chunk
            while end - m >= span:            # each replay advances the device's counter by span
                self._graph(self.parity).launch()
                m += span
                self.launches += GRAPH_CHUNKS
                self.graph_replays += 1
            base = m                          # the device's counter now
            while m < end:
                ns = min(self.chunk, end - m)
                self.launchers[self.parity](a1=m - base, a2=ns)
                self.parity ^= 1
                m += ns
                self.launches += 1
            self.step = end
            done += part
            self.stream.synchronize()
            count = int(self.nspikes.get()[0])
            if count > self.capacity:
                raise RuntimeError("spike buffer overflow (a bug: the buffer bound was exceeded)")
            if count:
                out.append(self.spikes[:count].get())
            self.nspikes.fill(0)
        if not out:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        packed = np.concatenate(out)       # in launch order; unsorted inside a chunk
        return (packed >> np.uint64(32)).astype(np.int64), (packed & np.uint64(0xFFFFFFFF)).astype(np.int64)

    # ---- growth -------------------------------------------------------------------------
    def grow(self, epoch_seconds: float) -> np.ndarray:
        self.rmax.fill(0)
        self._grow_fn.prepared_async_call(
            self.grid, (BLOCK, 1, 1), self.stream, np.int32(self.n), np.float64(epoch_seconds),
            self.counts.gpudata, self.radius_d.gpudata, self.rate.gpudata, self.rmax.gpudata)
        self._connect()
        self._make_launchers_keep_parity()
        return self.rate.get().astype(np.float64)

    def _make_launchers_keep_parity(self) -> None:
        parity = self.parity
        self._make_launchers()
        self.parity = parity

    def radius(self) -> np.ndarray:
        return self.radius_d.get()

    def _canonical(self) -> dict[str, np.ndarray]:
        """ELL rows -> synapses in (target, source) order."""
        n, w = self.n, self._slots(self.cur)
        self.stream.synchronize()
        rowlen = self.rowlen[self.cur].get()
        mask = np.arange(w)[None, :] < rowlen[:, None]
        syn = self.syn[self.cur]
        out = {}
        for f in SYN_FIELDS:
            out[f] = syn[f].get().reshape(w, n).T[mask]
        out["post"] = np.repeat(np.arange(n), rowlen)
        out["src"] = (out["pre"] & np.uint32(0x7FFFFFFF)).astype(np.int64)
        out["mask"] = mask
        return out

    def connectivity(self) -> Connectivity:
        can = self._canonical()
        return Connectivity(can["src"], can["post"].astype(np.int64), can["W"].astype(np.float64))

    # ---- state --------------------------------------------------------------------------
    def state(self) -> dict[str, np.ndarray]:
        can = self._canonical()
        return {"step": np.int64(self.step), "V": self.V.get().astype(np.float64),
                "refrac": self.refrac.get().astype(np.int64), "gE": self.gE.get().astype(np.float64),
                "gI": self.gI.get().astype(np.float64), "hist": self.hist[self.parity].get(),
                "counts": self.counts.get().astype(np.int64), "radius": self.radius_d.get(),
                "syn_pre": can["src"].astype(np.int32), "syn_post": can["post"].astype(np.int32),
                "syn_u": can["u"], "syn_r": can["r"], "syn_last": can["last"]}

    def restore(self, state: dict[str, np.ndarray]) -> None:
        f32 = np.float32
        self.step = int(state["step"])
        self.V.set(np.asarray(state["V"], f32))
        self.refrac.set(np.asarray(state["refrac"], np.int32))
        self.gE.set(np.asarray(state["gE"], f32))
        self.gI.set(np.asarray(state["gI"], f32))
        self.hist[self.parity].set(np.asarray(state["hist"], np.uint64))
        self.counts.set(np.asarray(state["counts"], np.uint32))
        radius = np.asarray(state["radius"], np.float64)
        self.radius_d.set(radius)
        self.rmax.set(np.array([np.float64(radius.max(initial=0.0)).view(np.uint64)], np.uint64))
        self.rowlen[self.cur].fill(0)            # no old rows: a fresh build, then the TM state
        self._connect()
        can = self._canonical()
        if not (np.array_equal(can["src"], state["syn_pre"]) and
                np.array_equal(can["post"], np.asarray(state["syn_post"]))):
            raise ValueError("the checkpoint's synapses do not match its radii")
        n, w = self.n, self._slots(self.cur)
        syn = self.syn[self.cur]
        for f, key, dtype in (("u", "syn_u", np.float32), ("r", "syn_r", np.float32),
                              ("last", "syn_last", np.int32)):
            arr = syn[f].get().reshape(w, n).T.copy()
            arr[can["mask"]] = np.asarray(state[key]).astype(dtype)
            syn[f].set(np.ascontiguousarray(arr.T).ravel())
        self._make_launchers_keep_parity()

    def summary(self) -> dict:
        sim = self.step * self.k.dt
        return {"launches": self.launches, "chunk_steps": self.chunk,
                "launches_per_sim_second": self.launches / sim if sim else 0.0}

    def close(self) -> None:
        self.stream.synchronize()
        self._drop_graphs()
        bufs = [self.V, self.refrac, self.gE, self.gI, self.vth, self.vreset, self.inoise, self.tref,
                self.inh, *self.hist, self.counts, self.radius_d, self.rate, self.rmax, self.totals,
                *self.rowlen, self.spikes, self.nspikes, self.step_base]
        bufs += [a for syn in self.syn for a in syn.values()]
        for buf in bufs:
            buf.gpudata.free()
