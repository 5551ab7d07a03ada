"""The CUDA cultured-network engine (float32 state, float64 radii and areas).

Every neuron advances by chunks of ``min delay`` steps (9 at dt = 0.1 ms), so a simulated
second takes ceil(10000/9) = 1112 chunks. A culture whose neurons fit one block per
multiprocessor (:func:`tile_plan`) runs up to a read-back's chunks in one launch of ``net_run``,
each block waiting only for the neurons within reach of its tile; a read-back's spikes are
copied and unpacked while the next launch runs. A larger culture runs one ``net_step`` launch
per chunk, runs of ``GRAPH_CHUNKS`` of them replayed from a captured CUDA graph
(``app/compute/graphs.py``: one call instead of 64 launches from Python, which hold the GIL a
GUI thread needs), counting their steps from a device-side counter the graph advances. Nothing
waits for the GPU between chunks; spikes accumulate in device buffers read once per
``READBACK_STEPS`` steps at most. The growth update runs in three kernels; the host only reads
the synapse total and the largest in-degree (to size the ELL arrays) and the rates for the
epoch summary.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

import numpy as np

from app.compute.graphs import CapturedGraph
from app.compute.kernels import load_module, read_kernel
from app.compute.launch import PackedLaunch
from app.sims.network.config import READBACK_STEPS
from app.sims.network.engine import NetworkEngine
from app.sims.network.model import Connectivity, Constants, Culture

BLOCK = 64
STEP_BLOCK = 128
LANES = 8                           # threads per target neuron in net_step
MAX_SPIKE_BUFFER = 1 << 26          # entries (8 bytes each)
GRAPH_CHUNKS = 64                   # chunks per captured graph (even: the parity comes back)
RUN_MAX_THREADS = 1024             # net_run: one block of a tile's neurons x LANES threads
RUN_NARROW_THREADS = 640           # net_run_narrow: blocks up to this get 96 registers, not 64
RUN_MAX_SHARED = 48 * 1024          # bytes of halo histories a block may keep
SYNAPSE_SHARED_BYTES = 20           # a synapse slot in net_run's shared memory: source, W, u, r, last
# One net_run in flight per process: its blocks wait for each other, so two launches sharing
# the multiprocessors could each hold part of their blocks and wait forever.
RUN_LOCK = threading.Lock()
OVERFLOW = "spike buffer overflow (a bug: the buffer bound was exceeded)"
SYN_FIELDS = ("pre", "W", "u", "r", "last")
SYN_DTYPES = {"pre": np.uint32, "W": np.float32, "u": np.float32, "r": np.float32, "last": np.int32}


def kernel_source() -> str:
    return read_kernel("network.cu")


def run_kernel(threads: int) -> str:
    """The net_run kernel for blocks of ``threads``: the narrow one has more registers a thread."""
    return "net_run_narrow" if threads <= RUN_NARROW_THREADS else "net_run"


def kernel_defines(chunk: int) -> dict[str, int]:
    """The compile-time constants of network.cu for chunks of ``chunk`` steps."""
    return {"NET_CHUNK": chunk, "NET_LANES": LANES, "NET_RUN_NARROW": RUN_NARROW_THREADS}


@dataclass(frozen=True)
class TilePlan:
    """net_run's blocks: tiles of ``tile_w`` x ``tile_h`` neurons, ``tiles_x`` across, each
    reading the histories of the neurons within ``halo`` columns and rows of its tile."""

    tile_w: int
    tile_h: int
    tiles_x: int
    blocks: int
    halo: int

    @property
    def threads(self) -> int:
        return -(-self.tile_w * self.tile_h * LANES // 32) * 32

    @property
    def shared_bytes(self) -> int:
        """The halo's spike histories (8 B a neuron) and culture indices (4 B)."""
        return (self.tile_w + 2 * self.halo) * (self.tile_h + 2 * self.halo) * 12

    def run_shared_bytes(self, slots: int) -> int:
        """net_run's shared memory: the halo's and, for ``slots`` synapses per neuron, the
        block's synapse rows (:data:`SYNAPSE_SHARED_BYTES` a slot)."""
        return self.shared_bytes + self.synapse_stride * slots * SYNAPSE_SHARED_BYTES

    @property
    def synapse_stride(self) -> int:
        """Shared-memory entries between a block's synapse slot k and k + 1: the tile's neurons,
        padded to 32 / LANES modulo 32 so that the LANES slots of a warp's 32 / LANES neurons
        fall in 32 different banks."""
        neurons = self.tile_w * self.tile_h
        return neurons + (32 // LANES - neurons) % 32


def tile_plan(width: int, height: int, max_radius: float, multiprocessors: int) -> TilePlan | None:
    """Tiles for net_run: at most one block per multiprocessor (all resident at once), the
    smallest tile that allows, its halo the longest synapse along a row or column (the disks
    of a pair overlap when their centres are closer than the sum of the radii, at most twice
    the largest); None when the culture does not fit (net_step then runs it chunk by chunk)."""
    halo = max(1, math.ceil(2.0 * max_radius) - 1)
    best = None
    for tile_w in range(1, width + 1):
        for tile_h in range(1, height + 1):
            if tile_w * tile_h * LANES > RUN_MAX_THREADS:
                break
            tiles_x = -(-width // tile_w)
            blocks = tiles_x * -(-height // tile_h)
            plan = TilePlan(tile_w, tile_h, tiles_x, blocks, halo)
            if blocks > multiprocessors or plan.shared_bytes > RUN_MAX_SHARED:
                continue
            key = (tile_w * tile_h, plan.shared_bytes)
            if best is None or key < best[0]:
                best = (key, plan)
    return best[1] if best else None


def unpack_spikes(packed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The kernels' spike words (step << 32 | neuron) as (steps, neurons), int64."""
    halves = packed.view(np.uint32).reshape(-1, 2)      # little-endian: [neuron, step]
    return halves[:, 1].astype(np.int64), halves[:, 0].astype(np.int64)


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
        self.module = load_module(kernel_source(), "network.cu", kernel_defines(self.chunk))
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
        self.pub = ga.empty(2 * n, np.uint64)      # net_run's tagged spike words
        self.pub.fill(np.uint64(0xFFFFFFFFFFFFFFFF))
        self.run_words = ga.zeros(3, np.uint32)    # net_run's status, net_compact's totals (2 buffers)
        self.copy_stream = cuda.Stream()
        self.spike_buffers: list = [self.spikes]
        self.host_words = self.host_spikes = None
        self.chunks_run = 0                        # net_run's chunk counter: the words' tags
        device = cuda.Context.get_device()
        self.multiprocessors = device.get_attribute(cuda.device_attribute.MULTIPROCESSOR_COUNT)
        self.shared_limit = device.get_attribute(cuda.device_attribute.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
        self.run_shared = self.run_slots = 0
        self.plan: TilePlan | None = None
        self.src = ga.empty(1, np.uint32)
        self.segments = ga.empty(1, np.uint64)
        self.block_spikes = ga.empty(1, np.uint32)
        self.block_capacity = 0
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
        self._local_fn = self.module.get_function("net_local")
        self._local_fn.prepare("iiiiiiPPPP")
        self._compact_fn = self.module.get_function("net_compact")
        self._compact_fn.prepare("iIPPPP")
        self._run_fns = {}
        for name in ("net_run", "net_run_narrow"):
            self._run_fns[name] = self.module.get_function(name)
            self._run_fns[name].prepare("i" * 13 + "Q" + "P" * 21 + "IP")
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
        self._plan_tiles()

    def _plan_tiles(self) -> None:
        """net_run's tiles for the new rows (None: the culture runs chunk by chunk), each slot's
        source as an index into its block's halo, and the blocks' spike segments. A block keeps
        its synapse rows in shared memory: rows too wide for it also run chunk by chunk."""
        rmax = float(self.rmax.get().view(np.float64)[0])
        self.plan = tile_plan(self.c.width, self.c.height, rmax, self.multiprocessors)
        if self.plan is None:
            return
        p, slots = self.plan, self._slots(self.cur)
        self.run_slots = max(1, self.max_in)
        self.run_shared = p.run_shared_bytes(self.run_slots)
        if self.run_shared > self.shared_limit:
            self.plan = None
            return
        self._run_fn = self._run_fns[run_kernel(p.threads)]
        self._run_fn.set_attribute(self.cuda.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                   self.run_shared)
        if self.src.size < slots * self.n:
            self.src.gpudata.free()
            self.src = self.ga.empty(slots * self.n, np.uint32)
        self.run_words.fill(0)
        self._local_fn.prepared_async_call(
            self.grid, (BLOCK, 1, 1), self.stream, np.int32(self.n), np.int32(self.c.width),
            np.int32(p.tile_w), np.int32(p.tile_h), np.int32(p.halo), np.int32(slots),
            self.rowlen[self.cur].gpudata, self.syn[self.cur]["pre"].gpudata, self.src.gpudata,
            self.run_words.gpudata)
        self._check_run()
        gap = int(self.c.trefract.min()) + 1
        self.block_capacity = p.tile_w * p.tile_h * (-(-self.sub_steps // gap) + 1)
        size = p.blocks * self.block_capacity
        if self.segments.size < size:
            self.segments.gpudata.free()
            self.segments = self.ga.empty(size, np.uint64)
        if self.block_spikes.size < p.blocks:
            self.block_spikes.gpudata.free()
            self.block_spikes = self.ga.empty(p.blocks, np.uint32)
        if self.host_spikes is None:            # page-locked: copied while the next launch runs
            self.host_words = self.cuda.pagelocked_empty(3, np.uint32)
            self.host_spikes = self.cuda.pagelocked_empty(self.capacity, np.uint64)
            self.spike_buffers.append(self.ga.empty(self.capacity, np.uint64))

    def _check_run(self) -> None:
        """Wait for the stream; raise on net_run's or net_local's status."""
        self.stream.synchronize()
        status = int(self.run_words.get()[0])
        if status:
            raise RuntimeError({1: "net_run: a block waited past its limit for its neighbours' spikes (a bug)",
                                2: "net_run: a synapse reaches beyond its block's halo (a bug)"}.get(
                                    status, f"net_run: status {status}"))

    # ---- stepping -----------------------------------------------------------------------
    def advance(self, nsteps: int) -> tuple[np.ndarray, np.ndarray]:
        parts = [self.sub_steps] * (nsteps // self.sub_steps)
        if nsteps % self.sub_steps:
            parts.append(nsteps % self.sub_steps)
        if self.plan is not None:
            pairs = self._run_tiles(parts)
        else:
            pairs = [unpack_spikes(self._run_chunks(part)) for part in parts]
        if not pairs:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        # in launch order; unsorted inside a chunk (net_step) or a launch (net_run)
        return np.concatenate([s for s, _ in pairs]), np.concatenate([i for _, i in pairs])

    def _run_chunks(self, nsteps: int) -> np.ndarray:
        """``nsteps`` steps (at most ``sub_steps``) of net_step launches; the packed spikes."""
        end = self.step + nsteps
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
        self.stream.synchronize()
        count = int(self.nspikes.get()[0])
        if count > self.capacity:
            raise RuntimeError(OVERFLOW)
        spikes = self.spikes[:count].get() if count else np.zeros(0, np.uint64)
        self.nspikes.fill(0)
        return spikes

    def _run_tiles(self, parts: list[int]) -> list[tuple[np.ndarray, np.ndarray]]:
        """Each part (at most ``sub_steps`` steps) in one launch of net_run; the spikes of each.
        A part's spikes are copied back and unpacked while the next part runs."""
        import pycuda.driver as cuda

        out, pending = [], None
        with RUN_LOCK:
            for k, nsteps in enumerate(parts):
                self._launch_tiles(nsteps, k % 2)
                done = cuda.Event()
                done.record(self.stream)
                if pending is not None:
                    out.append(self._collect(*pending))
                pending = (k % 2, done)
            if pending is not None:
                out.append(self._collect(*pending))
        return out

    def _launch_tiles(self, nsteps: int, buf: int) -> None:
        """Queue net_run over ``nsteps`` steps and net_compact into spike buffer ``buf``."""
        p, syn = self.plan, self.syn[self.cur]
        chunks = -(-nsteps // self.chunk)
        last = nsteps - (chunks - 1) * self.chunk
        self._run_fn.prepared_async_call(
            (p.blocks, 1), (p.threads, 1, 1), self.stream,
            np.int32(self.n), np.int32(self.c.width), np.int32(self.c.height), np.int32(p.tiles_x),
            np.int32(p.tile_w), np.int32(p.tile_h), np.int32(p.halo), np.int32(self.run_slots),
            np.int32(p.synapse_stride), np.int32(self.chunks_run), np.int32(chunks),
            np.int32(self.step), np.int32(last), np.uint64(self.seed),
            self.V.gpudata, self.refrac.gpudata, self.gE.gpudata, self.gI.gpudata, self.vth.gpudata,
            self.vreset.gpudata, self.inoise.gpudata, self.tref.gpudata, self.inh.gpudata,
            self.hist[self.parity].gpudata, self.hist[1 - self.parity].gpudata, self.pub.gpudata,
            self.rowlen[self.cur].gpudata, self.src.gpudata, syn["W"].gpudata, syn["u"].gpudata,
            syn["r"].gpudata, syn["last"].gpudata, self.counts.gpudata, self.segments.gpudata,
            self.block_spikes.gpudata, np.uint32(self.block_capacity), self.run_words.gpudata,
            shared_size=self.run_shared)
        self._compact_fn.prepared_async_call(
            (p.blocks, 1), (256, 1, 1), self.stream, np.int32(p.blocks), np.uint32(self.block_capacity),
            self.block_spikes.gpudata, self.segments.gpudata, self.spike_buffers[buf].gpudata,
            np.intp(int(self.run_words.gpudata) + 4 * (1 + buf)))
        self.parity ^= 1
        self.chunks_run = (self.chunks_run + chunks) % (1 << 31)
        self.step += nsteps
        self.launches += 1

    def _collect(self, buf: int, done) -> tuple[np.ndarray, np.ndarray]:
        """Once the launch that filled spike buffer ``buf`` is ``done``: its spikes, copied on a
        second stream (the next launch keeps running)."""
        import pycuda.driver as cuda

        done.synchronize()
        cuda.memcpy_dtoh_async(self.host_words, self.run_words.gpudata, self.copy_stream)
        self.copy_stream.synchronize()
        status, count = int(self.host_words[0]), int(self.host_words[1 + buf])
        if status:
            self._check_run()
        if count == 0xFFFFFFFF:
            raise RuntimeError(OVERFLOW)
        if not count:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        cuda.memcpy_dtoh_async(self.host_spikes[:count], self.spike_buffers[buf].gpudata, self.copy_stream)
        self.copy_stream.synchronize()
        return unpack_spikes(self.host_spikes[:count])

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
                *self.rowlen, self.spikes, self.nspikes, self.step_base, self.pub, self.run_words,
                self.src, self.segments, self.block_spikes, *self.spike_buffers[1:]]
        bufs += [a for syn in self.syn for a in syn.values()]
        for buf in bufs:
            buf.gpudata.free()
