"""The floor of a persistent multi-chunk kernel (GPU machine): the time of one grid-wide
barrier, and of one captured-graph node, against the network engine's chunk.

A kernel that advanced many chunks of ``net_step`` per launch would synchronise all its blocks
once per chunk (every neuron reads its sources' histories of the previous chunk). This times
``ITERS`` barriers of an otherwise empty kernel (a counter and a generation word in global
memory, one thread per block arriving) for a few grid sizes that are resident at once, and
an empty kernel replayed from a graph, so the report can state what one chunk cannot go below
either way. Prints one JSON line.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SOURCE = r"""
__device__ __forceinline__ void grid_barrier(unsigned int* bar, const unsigned int nblocks)
{
    __syncthreads();
    if (threadIdx.x == 0) {
        volatile unsigned int* gen = bar + 1;
        const unsigned int g = *gen;
        __threadfence();
        if (atomicAdd(bar, 1u) == nblocks - 1) {
            bar[0] = 0u;
            __threadfence();
            atomicAdd(bar + 1, 1u);
        } else {
            while (*gen == g) { }
        }
        __threadfence();
    }
    __syncthreads();
}

extern "C" __global__ void barriers(unsigned int* bar, const int iters)
{
    for (int k = 0; k < iters; ++k) grid_barrier(bar, gridDim.x);
}

extern "C" __global__ void empty(const int n, unsigned int* sink)
{
    if (blockIdx.x * blockDim.x + threadIdx.x == n) sink[0] = 1u;
}
"""

ITERS = 111_112          # one 100-s epoch of the network's 9-step chunks


def main() -> int:
    import pycuda.driver as cuda
    import pycuda.gpuarray as ga

    from app.compute.device import backend_context
    from app.compute.graphs import RepeatedPlan
    from app.compute.kernels import load_module
    from app.compute.launch import PackedLaunch

    out: dict = {"iters": ITERS}
    with backend_context("cuda"):
        dev = cuda.Context.get_device()
        sms = dev.get_attribute(cuda.device_attribute.MULTIPROCESSOR_COUNT)
        out["device"], out["sms"] = dev.name(), sms
        mod = load_module(SOURCE, "grid_barrier_floor.cu")
        fn = mod.get_function("barriers")
        fn.prepare("Pi")
        bar = ga.zeros(2, np.uint32)
        start, end = cuda.Event(), cuda.Event()
        for blocks, threads in ((sms, 128), (2 * sms, 128), (4 * sms, 128)):
            fn.prepared_call((blocks, 1), (threads, 1, 1), bar.gpudata, np.int32(100))
            cuda.Context.synchronize()
            start.record()
            fn.prepared_call((blocks, 1), (threads, 1, 1), bar.gpudata, np.int32(ITERS))
            end.record()
            end.synchronize()
            out[f"barrier_us_{blocks}x{threads}"] = end.time_since(start) * 1e3 / ITERS
        stream = cuda.Stream()
        sink = ga.zeros(1, np.uint32)
        n = 80_000                                # net_step's threads at 10,000 neurons
        launch = PackedLaunch(mod.get_function("empty"), "iP", ((n + 127) // 128, 1), (128, 1, 1),
                              stream, [np.int32(n), sink.gpudata])
        repeat = RepeatedPlan(stream, 64)
        for _ in range(2):
            t0 = time.perf_counter()
            repeat.run([launch], 64 * 1000)
            stream.synchronize()
            node = (time.perf_counter() - t0) / 64_000
        out["graph_node_us_625_blocks"] = node * 1e6
        repeat.close()
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
