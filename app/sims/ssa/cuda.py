"""The CUDA SSA engine: one realization per thread, statistics reduced on the device.

Per sample interval: one ``ssa_advance`` launch (every realization runs to the sample time and
reduces sums, sums of squares, minima and maxima into device buffers) and one copy of the tally
(reactions fired per point, overflow flag), the sums and the ranges into pinned memory: a
single host wait per interval, the same for every algorithm. The statistics then take one
``ssa_histogram`` launch with bins laid out from the reduced range, which also clears the
interval's outputs for the next one (where no histogram ran, the next advance launches
``ssa_reset`` first). Only the statistics come back to the host, plus the full (S x R) state
at the times the user asks for.

A launch can hold a batch of P parameter sets of one network (:class:`CudaBatch`): each point's
realizations read its own rate row, seed and initial counts, and reduce into its own statistics,
so a sweep of P points is one launch per sample time instead of P. :class:`CudaEnsemble` is the
engine of one point (a single run is a batch of one).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from app.compute.kernels import load_module
from app.sims.ssa.codegen import kernel_source
from app.sims.ssa.engine import BadPropensity, CountOverflow, EnsembleEngine, IntervalStats
from app.sims.ssa.events import initial_bits
from app.sims.ssa.model import Network
from app.sims.ssa.stats import Histogram, bin_layout

COUNT_LIMIT = 2**30   # SSA_COUNT_LIMIT in kernels/ssa.cu: a realization stops within 64 reactions past it

BLOCK = 128
# tau-leaping: Poisson counts by sequential inversion below this mean, PTRS above (ssa.cu);
# at most 80. A model of the warp cost on the dimer (counts from a host build) favours 64-80
# over 32 (fewer PTRS calls, whose rejections every lane of a warp waits for):
# `python -c "from app.sims.ssa.bench import tau_only; tau_only(inversion_below=(32, 64, 80))"`
INVERSION_BELOW = 64.0
HIST_BLOCK = 256
INT32_MAX = 2**31 - 1


def batch_compatible(a: Network, b: Network) -> bool:
    """Whether two networks differ only in rate constants and initial counts."""
    return a.structure_key() == b.structure_key()


class CudaBatch:
    """P points of one network structure, ``realizations`` each, on the current CUDA context."""

    def __init__(self, networks: Sequence[Network], realizations: int, seeds: Sequence[int],
                 algorithm: str, hist_idx: list[int], bins: int, t0: float = 0.0,
                 epsilon: float = 0.03):
        import pycuda.driver as cuda
        import pycuda.gpuarray as gpuarray

        net = networks[0]
        if any(not batch_compatible(net, other) for other in networks[1:]):
            raise ValueError("a batch holds one network structure (only rates and initial counts "
                             "may differ)")
        if len(seeds) != len(networks):
            raise ValueError("one seed per point")
        points = len(networks)
        if points > 1 and realizations % 32:
            raise ValueError(f"a batch needs a multiple of 32 realizations per point, got {realizations}")
        x0 = np.array([n.x0 for n in networks], np.int64)              # (P, S)
        if x0.max(initial=0) > INT32_MAX // 2:
            raise ValueError("the CUDA engine keeps counts in 32-bit integers; initial counts "
                             f"must stay below {INT32_MAX // 2}")
        if points * realizations > INT32_MAX:
            raise ValueError(f"{points} x {realizations} realizations is more than one launch indexes")
        self.cuda, self.gpuarray = cuda, gpuarray
        self.net, self.points, self.realizations = net, points, realizations
        self.hist_idx, self.bins, self.t = hist_idx, bins, t0
        self.fired_total = np.zeros(points, np.int64)
        source = kernel_source(net, hist_idx, algorithm)
        self.epsilon = np.float32(epsilon)
        self.module = load_module(source, "ssa.cu", {"SSA_BINS": bins, "SSA_BLOCK": BLOCK,
                                                     "SSA_INVERSION_BELOW": f"{INVERSION_BELOW!r}f"})
        self._advance = self.module.get_function("ssa_advance")
        self._advance.prepare("PPiiddPPPPPPPPf")
        self._reset = self.module.get_function("ssa_reset")
        self._reset.prepare("PiPiPi")
        self._histogram = self.module.get_function("ssa_histogram")
        self._histogram.prepare("PiiPPPiPiPi")
        s, h, r_all = net.n_species, max(len(hist_idx), 1), points * realizations
        self.r_all = r_all
        per_realization = np.repeat(x0, realizations, axis=0).T        # (S, P*R)
        self.x = gpuarray.to_gpu(np.ascontiguousarray(per_realization.astype(np.int32)))
        self.draws = gpuarray.zeros(r_all, np.uint64)
        self.event_bits = gpuarray.to_gpu(np.full(r_all, initial_bits(net), np.uint32))
        # the tally: reactions fired per point (uint64), then the overflow flag (int32 in the
        # low half of the last word) and the bad-propensity flag (the high half), read back in one copy
        self.tally = gpuarray.zeros(points + 1, np.uint64)
        self._tally_host = cuda.pagelocked_empty(points + 1, np.uint64)
        self.seeds = gpuarray.to_gpu(np.asarray(seeds, np.uint64))
        self.rates = gpuarray.to_gpu(np.array([n.rates for n in networks], np.float32))
        self._shift = x0.astype(np.float64).ravel()                             # (P*S,), as on the device
        self.shift = gpuarray.to_gpu(self._shift)
        self.sums = gpuarray.zeros(points * 2 * s, np.float64)
        self.minmax = gpuarray.zeros(points * 2 * h, np.int32)
        self.lo_width = gpuarray.zeros(points * 2 * h, np.int32)
        self.counts = gpuarray.zeros(points * h * bins, np.uint32)
        # the interval's sums and ranges come back with the tally, in the advance's one wait
        self._sums_host = cuda.pagelocked_empty(self.sums.size, np.float64)
        self._minmax_host = cuda.pagelocked_empty(self.minmax.size, np.int32)
        self._sums_host[:], self._minmax_host[:] = 0, 0       # as the device buffers start
        self.stream = cuda.Stream()
        self._grid = ((r_all + BLOCK - 1) // BLOCK, 1)
        device = cuda.Context.get_device()
        sms = device.get_attribute(cuda.device_attribute.MULTIPROCESSOR_COUNT)
        self.resident = sms * resident_per_sm(device, self._advance.num_regs, BLOCK)
        per_point = (realizations + HIST_BLOCK - 1) // HIST_BLOCK
        self._hist_grid = (max(1, min(per_point, (8 * sms + points - 1) // points)), points)
        self._stats: tuple[np.ndarray, np.ndarray, list] | None = None
        self._outputs_clear = False    # the histogram launch cleared the interval outputs
        self._x_host: np.ndarray | None = None      # (S, P*R) copy, read once per interval

    def set_rates(self, p: int, rates: np.ndarray) -> None:
        row = np.asarray(rates, np.float32)
        self.cuda.memcpy_htod(int(self.rates.gpudata) + p * row.nbytes, row)

    def point_rates(self, p: int) -> np.ndarray:
        return self.rates.get()[p].astype(np.float64)

    def advance(self, t_to: float) -> None:
        """Every realization of every point to ``t_to`` in one launch."""
        if t_to <= self.t:
            return
        p_n = self.points
        if not self._outputs_clear:
            self._reset.prepared_async_call(
                (max(1, (self.sums.size + 255) // 256), 1), (256, 1, 1), self.stream, *self._clear_args())
        self._outputs_clear = False
        self._advance.prepared_async_call(
            self._grid, (BLOCK, 1, 1), self.stream, self.x.gpudata, self.draws.gpudata,
            np.int32(self.r_all), np.int32(self.realizations), np.float64(self.t), np.float64(t_to),
            self.seeds.gpudata, self.rates.gpudata, self.shift.gpudata, self.sums.gpudata,
            self.minmax.gpudata, self.tally.gpudata, self.event_bits.gpudata,
            int(self.tally.gpudata) + 8 * p_n, self.epsilon)
        self.cuda.memcpy_dtoh_async(self._tally_host, self.tally.gpudata, self.stream)
        self.cuda.memcpy_dtoh_async(self._sums_host, self.sums.gpudata, self.stream)
        if self.hist_idx:
            self.cuda.memcpy_dtoh_async(self._minmax_host, self.minmax.gpudata, self.stream)
        self.stream.synchronize()   # releases the GIL while the GPU works
        flag, bad = (int(v) for v in self._tally_host[p_n:].view(np.int32)[:2])
        if bad:
            self._bad_propensity(bad - 1, t_to)
        if flag:
            raise CountOverflow(self.net.species[flag - 1], COUNT_LIMIT)
        self.t = t_to
        self.fired_total += self._tally_host[:p_n].astype(np.int64)
        self._stats = self._x_host = None

    def _bad_propensity(self, j: int, t_to: float) -> None:
        """Raise for reaction ``j``, whose propensity the kernel found not finite or negative in
        some realization during this interval (the state it stopped in is on the device)."""
        x = self.x.get().T.astype(np.int64)                           # (P*R, S)
        with np.errstate(all="ignore"):
            a = self.net.propensities(x, self.rates.get()[0].astype(np.float64))[:, j]
        hit = np.flatnonzero(~((a >= 0) & (a < np.inf)))
        r = int(hit[0]) if hit.size else 0
        when = f"a time between t = {self.t:.6g} and {t_to:.6g}"
        raise BadPropensity(self.net.reaction_names[j], float(a[r]), when, self.net.species, x[r], r)

    def _clear_args(self) -> tuple:
        """The interval outputs ``ssa_clear`` resets (sums, minmax, reactions fired per point)."""
        return (self.sums.gpudata, np.int32(self.sums.size), self.minmax.gpudata, np.int32(self.minmax.size),
                self.tally.gpudata, np.int32(self.points))

    def _interval_stats(self) -> tuple[np.ndarray, np.ndarray, list]:
        """(mean (P, S), var (P, S), histograms per point) of the last interval, once."""
        if self._stats is not None:
            return self._stats
        r, s, p_n = self.realizations, self.net.n_species, self.points
        sums = self._sums_host.reshape(p_n, 2, s)
        shift = self._shift.reshape(p_n, s)
        d1, d2 = sums[:, 0] / r, sums[:, 1] / r
        mean = shift + d1
        if (mean < 0).any():
            raise RuntimeError("a species count overflowed the CUDA engine's 32-bit integers; "
                               "use the CPU engine (64-bit) for this model")
        var = np.maximum(d2 - d1 * d1, 0.0)
        self._set_shift(np.round(mean).ravel())
        hists: list[tuple[Histogram, ...]] = [() for _ in range(p_n)]
        if self.hist_idx:
            h = len(self.hist_idx)
            minmax = self._minmax_host.reshape(p_n, h, 2)
            layout = np.array([[bin_layout(lo, hi, self.bins) for lo, hi in m] for m in minmax], np.int32)
            self.lo_width.set(layout.ravel())
            self.counts.fill(0)
            self._histogram.prepared_async_call(
                self._hist_grid, (HIST_BLOCK, 1, 1), self.stream, self.x.gpudata,
                np.int32(self.r_all), np.int32(r), self.lo_width.gpudata, self.counts.gpudata,
                *self._clear_args())
            self.stream.synchronize()
            self._outputs_clear = True
            counts = self.counts.get().reshape(p_n, h, self.bins).astype(np.int64)
            hists = [tuple(Histogram(int(lo), int(w), c) for (lo, w), c in zip(layout[p], counts[p]))
                     for p in range(p_n)]
        self._stats = (mean, var, hists)
        return self._stats

    def _set_shift(self, shift: np.ndarray) -> None:
        """The per-point shift the sums are taken about, on the device and its host copy."""
        self._shift = np.ascontiguousarray(shift, np.float64)
        self.shift.set(self._shift)

    def point_stats(self, p: int, keep_states: bool) -> IntervalStats:
        mean, var, hists = self._interval_stats()
        return IntervalStats(mean[p], var[p], hists[p], self.point_states(p) if keep_states else None)

    def point_states(self, p: int) -> np.ndarray:
        """(R, S) int64 counts of point ``p``."""
        r = self.realizations
        if self._x_host is None:
            self._x_host = self.x.get()
        return self._x_host[:, p * r:(p + 1) * r].T.astype(np.int64)

    def point_draws(self, p: int) -> np.ndarray:
        r = self.realizations
        return self.draws.get()[p * r:(p + 1) * r]

    def point_event_bits(self, p: int) -> np.ndarray:
        r = self.realizations
        return self.event_bits.get()[p * r:(p + 1) * r]

    def load_point(self, p: int, x: np.ndarray, draws: np.ndarray, t: float,
                   event_bits: np.ndarray | None = None) -> None:
        """Resume point ``p`` from (R, S) counts and its draw counters."""
        r = self.realizations
        host = self.x.get()
        host[:, p * r:(p + 1) * r] = np.asarray(x).T.astype(np.int32)
        self.x.set(host)
        all_draws = self.draws.get()
        all_draws[p * r:(p + 1) * r] = np.asarray(draws, np.uint64)
        self.draws.set(all_draws)
        if event_bits is not None:
            bits = self.event_bits.get()
            bits[p * r:(p + 1) * r] = np.asarray(event_bits, np.uint32)
            self.event_bits.set(bits)
        shift = self._shift.reshape(self.points, -1).copy()
        shift[p] = np.round(np.asarray(x, np.float64).mean(axis=0))
        self._set_shift(shift.ravel())
        self.t = t
        self._stats = self._x_host = None

    def close(self) -> None:
        for buf in (self.x, self.draws, self.event_bits, self.tally, self.seeds, self.rates, self.shift,
                    self.sums, self.minmax, self.lo_width, self.counts):
            buf.gpudata.free()


def resident_per_sm(device, registers: int, block: int) -> int:
    """Threads of a kernel using ``registers`` per thread that one multiprocessor of ``device``
    holds at once, in whole blocks of ``block`` (the thread and register limits)."""
    import pycuda.driver as cuda

    threads = device.get_attribute(cuda.device_attribute.MAX_THREADS_PER_MULTIPROCESSOR)
    if registers > 0:
        per_sm = device.get_attribute(cuda.device_attribute.MAX_REGISTERS_PER_MULTIPROCESSOR)
        threads = min(threads, per_sm // (registers * block) * block)
    return max(threads, block)


class CudaEnsemble(EnsembleEngine):
    """The engine of one point of a :class:`CudaBatch` (of its own batch of one by default).

    Advancing any point of a shared batch advances them all, once per sample time.
    """

    def __init__(self, network: Network, realizations: int, seed: int, algorithm: str,
                 hist_idx: list[int], bins: int, t0: float = 0.0, *,
                 batch: CudaBatch | None = None, point: int = 0, epsilon: float = 0.03):
        self.batch = batch or CudaBatch([network], realizations, [seed], algorithm, hist_idx, bins, t0,
                                        epsilon)
        self.owns_batch = batch is None
        self.point, self.net, self.realizations = point, network, realizations
        self.at_once = self.batch.resident // self.batch.points

    @property
    def t(self) -> float:
        return self.batch.t

    @property
    def reactions_fired(self) -> int:
        return int(self.batch.fired_total[self.point])

    def set_rates(self, rates: np.ndarray) -> None:
        self.batch.set_rates(self.point, rates)

    def advance(self, t_to: float, max_steps: int = 0) -> bool:
        """Run the whole interval in one launch (the launch itself is the bounded slice)."""
        self.batch.advance(t_to)
        return True

    def stats(self, keep_states: bool) -> IntervalStats:
        return self.batch.point_stats(self.point, keep_states)

    def states(self) -> np.ndarray:
        return self.batch.point_states(self.point)

    def state(self) -> dict[str, np.ndarray]:
        x = self.states()
        return {"x": x, "draws": self.batch.point_draws(self.point),
                # per realization, as the CPU engines keep them (these realizations move in step)
                "t": np.full(len(x), self.t, np.float64), "active": np.ones(len(x), bool),
                "rates": self.batch.point_rates(self.point),
                "events": self.batch.point_event_bits(self.point),
                "reactions_fired": np.int64(self.reactions_fired)}

    def restore(self, state: dict[str, np.ndarray]) -> None:
        if np.ptp(np.atleast_1d(state["t"])) != 0:
            raise ValueError("this checkpoint was taken inside a sample interval on the CPU engine; "
                             "resume it on the CPU engine")
        self.batch.load_point(self.point, state["x"], state["draws"], float(np.max(state["t"])),
                              state.get("events"))
        self.batch.fired_total[self.point] = int(state["reactions_fired"])
        self.set_rates(state["rates"])

    def close(self) -> None:
        if self.owns_batch:
            self.batch.close()
