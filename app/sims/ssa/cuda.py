"""The CUDA SSA engine: one realization per thread, statistics reduced on the device.

Per sample interval: one ``ssa_advance`` launch (every realization runs to the sample time
and reduces sums, sums of squares, minima and maxima into device buffers), then one
``ssa_histogram`` launch with bins laid out from the reduced range. Only the statistics come
back to the host, plus the full (S x R) state at the times the user asks for.
"""

from __future__ import annotations

import numpy as np

from app.compute.kernels import load_module
from app.sims.ssa.codegen import kernel_source
from app.sims.ssa.engine import EnsembleEngine, IntervalStats
from app.sims.ssa.model import Network
from app.sims.ssa.stats import Histogram, bin_layout

BLOCK = 128
HIST_BLOCK = 256
INT32_MAX = 2**31 - 1


class CudaEnsemble(EnsembleEngine):
    """R realizations of ``network`` on the current CUDA context (see ``backend_context``)."""

    def __init__(self, network: Network, realizations: int, seed: int, algorithm: str,
                 hist_idx: list[int], bins: int, t0: float = 0.0):
        import pycuda.driver as cuda
        import pycuda.gpuarray as gpuarray

        if network.x0.max(initial=0) > INT32_MAX // 2:
            raise ValueError("the CUDA engine keeps counts in 32-bit integers; initial counts "
                             f"must stay below {INT32_MAX // 2}")
        self.cuda, self.gpuarray = cuda, gpuarray
        self.net, self.realizations, self.seed = network, realizations, seed
        self.hist_idx, self.bins, self.t = hist_idx, bins, t0
        self.reactions_fired = 0
        source = kernel_source(network, hist_idx, algorithm)
        self.module = load_module(source, "ssa.cu", {"SSA_BINS": bins, "SSA_BLOCK": BLOCK})
        self._advance = self.module.get_function("ssa_advance")
        self._advance.prepare("PPiddQPPPP")
        self._histogram = self.module.get_function("ssa_histogram")
        self._histogram.prepare("PiPP")
        s, r, h = network.n_species, realizations, len(hist_idx)
        self.x = gpuarray.to_gpu(np.ascontiguousarray(
            np.broadcast_to(network.x0.astype(np.int32)[:, None], (s, r))))
        self.draws = gpuarray.zeros(r, np.uint64)
        self.shift = gpuarray.to_gpu(network.x0.astype(np.float64))
        self.sums = gpuarray.zeros(2 * s, np.float64)
        self.minmax = gpuarray.zeros(2 * max(h, 1), np.int32)
        self.fired = gpuarray.zeros(1, np.uint64)
        self.lo_width = gpuarray.zeros(2 * max(h, 1), np.int32)
        self.counts = gpuarray.zeros(max(h, 1) * bins, np.uint32)
        self.set_rates(network.rates)
        self._pending: tuple[np.ndarray, np.ndarray] | None = None
        self.stream = cuda.Stream()
        self._grid = ((r + BLOCK - 1) // BLOCK, 1)
        sms = cuda.Context.get_device().get_attribute(cuda.device_attribute.MULTIPROCESSOR_COUNT)
        self._hist_grid = (min((r + HIST_BLOCK - 1) // HIST_BLOCK, 8 * sms), 1)

    def set_rates(self, rates: np.ndarray) -> None:
        ptr, _ = self.module.get_global("c_rate")
        self.cuda.memcpy_htod(ptr, np.asarray(rates, np.float32))

    def advance(self, t_to: float, max_steps: int = 0) -> bool:
        """Run the whole interval in one launch (the launch itself is the bounded slice)."""
        h = len(self.hist_idx)
        self.sums.fill(0)
        self.fired.fill(0)
        self.minmax.set(np.tile(np.array([INT32_MAX, -INT32_MAX - 1], np.int32), max(h, 1)))
        self._advance.prepared_async_call(
            self._grid, (BLOCK, 1, 1), self.stream, self.x.gpudata, self.draws.gpudata,
            np.int32(self.realizations), np.float64(self.t), np.float64(t_to),
            np.uint64(self.seed), self.shift.gpudata, self.sums.gpudata, self.minmax.gpudata,
            self.fired.gpudata)
        self.stream.synchronize()   # releases the GIL while the GPU works
        self.t = t_to
        self.reactions_fired += int(self.fired.get()[0])
        return True

    def stats(self, keep_states: bool) -> IntervalStats:
        r = self.realizations
        sums = self.sums.get()
        s = self.net.n_species
        shift = self.shift.get()
        d1, d2 = sums[:s] / r, sums[s:] / r
        mean = shift + d1
        if (mean < 0).any():
            raise RuntimeError("a species count overflowed the CUDA engine's 32-bit integers; "
                               "use the CPU engine (64-bit) for this model")
        var = np.maximum(d2 - d1 * d1, 0.0)
        self.shift.set(np.round(mean))
        hists = ()
        if self.hist_idx:
            minmax = self.minmax.get().reshape(-1, 2)
            layout = np.array([bin_layout(lo, hi, self.bins) for lo, hi in minmax], np.int32)
            self.lo_width.set(layout.ravel())
            self.counts.fill(0)
            self._histogram.prepared_async_call(
                self._hist_grid, (HIST_BLOCK, 1, 1), self.stream, self.x.gpudata,
                np.int32(r), self.lo_width.gpudata, self.counts.gpudata)
            self.stream.synchronize()
            counts = self.counts.get().reshape(-1, self.bins).astype(np.int64)
            hists = tuple(Histogram(int(lo), int(w), c) for (lo, w), c in zip(layout, counts))
        return IntervalStats(mean, var, hists, self.states() if keep_states else None)

    def states(self) -> np.ndarray:
        return self.x.get().T.astype(np.int64)

    def checkpoint(self) -> dict[str, np.ndarray]:
        ptr, size = self.module.get_global("c_rate")
        rates = np.empty(self.net.n_reactions, np.float32)
        self.cuda.memcpy_dtoh(rates, ptr)
        return {"x": self.states(), "draws": self.draws.get(), "t": np.float64(self.t),
                "rates": rates.astype(np.float64), "reactions_fired": np.int64(self.reactions_fired)}

    def load(self, state: dict[str, np.ndarray]) -> None:
        if np.ptp(np.atleast_1d(state["t"])) != 0:
            raise ValueError("this checkpoint was taken inside a sample interval on the CPU engine; "
                             "resume it on the CPU engine")
        self.x.set(np.ascontiguousarray(np.asarray(state["x"]).T.astype(np.int32)))
        self.draws.set(np.asarray(state["draws"], np.uint64))
        self.t = float(np.max(state["t"]))
        self.reactions_fired = int(state["reactions_fired"])
        self.set_rates(state["rates"])
        self.shift.set(np.round(np.asarray(state["x"], np.float64).mean(axis=0)))

    def close(self) -> None:
        for buf in (self.x, self.draws, self.shift, self.sums, self.minmax, self.fired,
                    self.lo_width, self.counts):
            buf.gpudata.free()
