"""The CUDA GA engine: population, scores and every GA operator stay on the device.

Per generation: ``ch_breed`` (selection, crossover, mutation, elitism) then ``ch_evaluate``
(one thread per individual; protocol in constant memory, target currents read by all threads
in lockstep). Only the scores come back (for the best, the median and the stop test).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from app.compute.kernels import load_module
from app.sims.channel import ga, schedule
from app.sims.channel.codegen import kernel_source
from app.sims.channel.model import ChannelModel
from app.sims.channel.protocol import Protocol
from app.sims.common.engine import EngineBase

BLOCK = 128
MAX_SWEEPS = 128
MAX_OPS = 512
MIN_BLOCKS = 6          # ch_evaluate launch bounds (80 registers, 24 warps an SM: 7.7 ms against 9.6 at 1 on the H200)


def device_bytes(size: int, n_params: int, n_points: int) -> int:
    """Device memory a run needs: two populations, scores, target."""
    return 2 * size * n_params * 4 + size * 4 + n_points * 4


class CudaGA(EngineBase, renamed={"get_population": "state", "set_population": "restore", "breed": "advance"}):
    """Population of ``size`` individuals on the current CUDA context."""

    def __init__(self, model: ChannelModel, protocol: Protocol, target: np.ndarray, size: int, seed: int,
                 weights: np.ndarray | None = None):
        import pycuda.driver as cuda
        import pycuda.gpuarray as gpuarray

        self.cuda, self.gpuarray, self.model, self.seed, self.size = cuda, gpuarray, model, seed, size
        ops = [op for s in protocol.sweeps for op in s.ops]
        if len(protocol.sweeps) > MAX_SWEEPS or len(ops) > MAX_OPS:
            raise ValueError(f"the CUDA engine takes up to {MAX_SWEEPS} sweeps and {MAX_OPS} segments; "
                             f"this protocol has {len(protocol.sweeps)} and {len(ops)}")
        need = device_bytes(size, model.n_params, protocol.n_points)
        free, total = cuda.mem_get_info()
        if need > 0.9 * free:
            raise MemoryError(f"a population of {size:,} needs {need / 2**20:.0f} MiB of GPU memory; "
                              f"{free / 2**20:.0f} MiB of {total / 2**20:.0f} MiB are free")
        self.module = load_module(kernel_source(model), "channel.cu",
                                  {"CH_MAX_SWEEPS": MAX_SWEEPS, "CH_MAX_OPS": MAX_OPS, "CH_BLOCK": BLOCK,
                                   "CH_MIN_BLOCKS": MIN_BLOCKS},
                                  fast_math=False)
        self._constants(protocol)
        self._evaluate = self.module.get_function("ch_evaluate")
        self._evaluate.prepare("PiiiPPiidPP")
        self._radix = self.module.get_function("ch_radix_histogram")
        self._radix.prepare("PiIIiP")
        self._breed = self.module.get_function("ch_breed")
        self._breed.prepare("PPPiiQQQQQf")
        init = self.module.get_function("ch_init")
        self.n_sweeps, self.n_points = len(protocol.sweeps), protocol.n_points
        self.target = gpuarray.to_gpu(np.asarray(target, np.float32))
        self.weights = None if weights is None else gpuarray.to_gpu(np.asarray(weights, np.float32))
        self.norm = float(protocol.n_points if weights is None else np.asarray(weights, np.float64).sum())
        self.pop = gpuarray.empty(model.n_params * size, np.float32)
        self.spare = gpuarray.empty_like(self.pop)
        self.scores_gpu = gpuarray.empty(size, np.float32)
        self.scores = cuda.pagelocked_empty(size, np.float32)
        self.traces_gpu = gpuarray.empty(protocol.n_points, np.float32)
        self.hist = gpuarray.empty(256, np.uint32)
        self.row, self.row_score = gpuarray.empty(model.n_params, np.float32), gpuarray.empty(1, np.float32)
        self.stream = cuda.Stream()
        init(self.pop, np.int32(size), np.uint64(seed), block=(BLOCK, 1, 1), grid=(self._blocks(size), 1))

    def _constants(self, protocol: Protocol) -> None:
        program = schedule.schedule(protocol)
        self.n_prog = len(program)
        code = np.array([i.kind | i.src << 8 | i.dst << 16 for i in program], np.int32)
        for name, values in (("c_prog_v", np.array([i.v for i in program], np.float64)),
                             ("c_prog_vend", np.array([i.v_end for i in program], np.float64)),
                             ("c_prog_tau", np.array([i.tau for i in program], np.float64)),
                             ("c_prog_code", code),
                             ("c_prog_n", np.array([i.n for i in program], np.int32)),
                             ("c_prog_rec", np.array([i.record for i in program], np.int32)),
                             ("c_lower", self.model.lower.astype(np.float32)),
                             ("c_upper", self.model.upper.astype(np.float32))):
            ptr, _ = self.module.get_global(name)
            self.cuda.memcpy_htod(ptr, np.ascontiguousarray(values))

    @staticmethod
    def _blocks(n: int) -> int:
        return (n + BLOCK - 1) // BLOCK

    def _launch_evaluate(self, first: int, count: int, scores, traces, pop=None, stride: int = 0) -> None:
        self._evaluate.prepared_async_call(
            (self._blocks(count), 1), (BLOCK, 1, 1), self.stream, (self.pop if pop is None else pop).gpudata,
            np.int32(stride or self.size), np.int32(first), np.int32(count), self.target.gpudata,
            self.weights.gpudata if self.weights is not None else np.intp(0),
            np.int32(self.n_prog), np.int32(self.n_points), np.float64(self.norm), scores, traces)

    def _batch(self, params: np.ndarray, traces: bool):
        """Scores (and currents) of parameter rows (k, P) held in a scratch population."""
        params = np.atleast_2d(np.asarray(params, np.float32))
        k = len(params)
        one = k == 1        # one row (the best fit, every improving generation): kept buffers,
        #                     since freeing device memory waits for the whole device
        rows = np.ascontiguousarray(params.T).ravel()
        if one:
            self.row.set(rows)
        pop = self.row if one else self.gpuarray.to_gpu(rows)
        scores = self.row_score if one else self.gpuarray.empty(k, np.float32)
        out = (self.traces_gpu if one else self.gpuarray.empty(k * self.n_points, np.float32)) if traces else None
        self._launch_evaluate(0, k, scores.gpudata, out.gpudata if traces else np.intp(0), pop, k)
        result = (scores.get(stream=self.stream).astype(np.float64),
                  out.get(stream=self.stream).reshape(k, self.n_points).astype(np.float64) if traces else None)
        if not one:
            for buf in (pop, scores, out):
                if buf is not None:
                    buf.gpudata.free()
        return result

    def evaluate_params(self, params: np.ndarray) -> np.ndarray:
        """chi^2 (k,) of parameter rows (k, P) (float32 on the device)."""
        return self._batch(params, False)[0]

    def simulate(self, params: np.ndarray) -> np.ndarray:
        """Currents (k, n_points) of parameter rows (k, P), computed on the device."""
        return self._batch(params, True)[1]

    def evaluate(self) -> np.ndarray:
        """Scores of the whole population (float32, in a page-locked host buffer)."""
        self._launch_evaluate(0, self.size, self.scores_gpu.gpudata, np.intp(0))
        self.scores_gpu.get_async(self.stream, self.scores)
        self.stream.synchronize()
        return self.scores

    def traces(self, index: int) -> np.ndarray:
        """Simulated currents of one individual, computed on the device."""
        scratch = self.hist   # the score of this launch is not needed: any 4 bytes will do
        self._launch_evaluate(index, 1, scratch.gpudata, self.traces_gpu.gpudata)
        return self.traces_gpu.get(stream=self.stream).astype(np.float64)

    def median(self) -> float:
        """Median of the last scores by radix selection on the device (as numpy.median)."""
        n = self.size
        lower, counts, digit, rank = self._select((n - 1) // 2)
        if n % 2:
            upper = lower
        elif rank + 1 < counts[digit]:      # the next score ties with the lower median
            upper = lower
        else:                               # the next larger key, from the last histogram if there
            above = np.flatnonzero(counts[digit + 1:])
            key = int(lower.view(np.uint32))
            upper = (np.array([(key & ~255) | (digit + 1 + int(above[0]))], np.uint32).view(np.float32)[0]
                     if len(above) else self._select(n // 2)[0])
        return 0.5 * (float(lower) + float(upper))

    def _select(self, rank: int) -> tuple[np.float32, np.ndarray, int, int]:
        """The rank-th smallest score (0-based), byte by byte from the top; with the last byte's
        histogram, the key's bin and its rank among that bin's keys."""
        prefix, mask = 0, 0
        grid = (min(self._blocks(self.size), 1024), 1)
        for shift in (24, 16, 8, 0):
            self.cuda.memset_d32_async(self.hist.gpudata, 0, 256, self.stream)
            self._radix.prepared_async_call(grid, (256, 1, 1), self.stream, self.scores_gpu.gpudata,
                                            np.int32(self.size), np.uint32(prefix), np.uint32(mask),
                                            np.int32(shift), self.hist.gpudata)
            counts = self.hist.get(stream=self.stream)
            below = np.cumsum(counts)
            digit = int(np.searchsorted(below, rank, side="right"))
            rank -= int(below[digit - 1]) if digit else 0
            prefix |= digit << shift
            mask |= 255 << shift
        return np.array([prefix], np.uint32).view(np.float32)[0], counts, digit, rank

    def advance(self, generation: int, best: int, crossover: float, mutation: float,
                creep: float = 0.0, creep_fraction: float = 0.0) -> None:
        pairs = (self.size + 1) // 2
        self._breed.prepared_async_call(
            (self._blocks(pairs), 1), (BLOCK, 1, 1), self.stream, self.pop.gpudata,
            self.scores_gpu.gpudata, self.spare.gpudata, np.int32(self.size), np.int32(best),
            np.uint64(generation), np.uint64(self.seed), np.uint64(ga.threshold(crossover)),
            np.uint64(ga.threshold(mutation)), np.uint64(ga.threshold(mutation * creep_fraction)),
            np.float32(creep))
        self.pop, self.spare = self.spare, self.pop

    def individual(self, index: int) -> np.ndarray:
        """Parameters of one individual: a column of the population, in one strided copy."""
        out = np.empty(self.model.n_params, np.float32)
        copy = self.cuda.Memcpy2D()
        copy.set_src_device(int(self.pop.gpudata) + 4 * index)
        copy.src_pitch = 4 * self.size
        copy.set_dst_host(out)
        copy.dst_pitch = copy.width_in_bytes = 4
        copy.height = self.model.n_params
        copy(aligned=False)
        return out.astype(np.float64)

    def state(self) -> dict[str, np.ndarray]:
        return {"population": self.pop.get().reshape(self.model.n_params, self.size).T.astype(np.float64)}

    def restore(self, state: dict[str, np.ndarray]) -> None:
        self.pop.set(np.ascontiguousarray(np.asarray(state["population"], np.float32).T).ravel())

    def set_bounds(self, lower: np.ndarray, upper: np.ndarray) -> None:
        """Steering: the search box of the next generations, into the kernels' constants."""
        self.model = replace(self.model, lower=np.asarray(lower, np.float64), upper=np.asarray(upper, np.float64))
        for name, values in (("c_lower", self.model.lower), ("c_upper", self.model.upper)):
            ptr, _ = self.module.get_global(name)
            self.cuda.memcpy_htod(ptr, np.ascontiguousarray(values, np.float32))

    def set_scores(self, scores: np.ndarray) -> None:
        """Scores for ``advance`` when they were computed elsewhere (tests)."""
        self.scores = np.asarray(scores, np.float32)
        self.scores_gpu.set(self.scores)

    def close(self) -> None:
        for buf in (self.target, self.weights, self.pop, self.spare, self.scores_gpu, self.traces_gpu,
                    self.hist, self.row, self.row_score):
            if buf is not None:
                buf.gpudata.free()
