"""Where a CUDA channel-GA generation goes (Model B, 12,500 points): the evaluate kernel, the
same kernel with every recorded segment cut to zero steps (rates, exponentials and steady
states only), the breeding kernel and the device median, each timed with CUDA events, and a
whole generation (``ChannelSimulation.advance``) by the host's clock.

Run in a source tree on the GPU machine:
``python scripts/channel_profile.py [--population N] [--out DIR]``; prints the figures and
writes ``DIR/channel-profile.json`` (the benchmarks' record format).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np


def timed(cuda, stream, fn, reps: int = 5) -> float:
    """Median seconds of ``fn()`` on ``stream`` over ``reps`` runs after one warm-up."""
    fn()
    times = []
    for _ in range(reps):
        start, end = cuda.Event(), cuda.Event()
        start.record(stream)
        fn()
        end.record(stream)
        end.synchronize()
        times.append(end.time_since(start) / 1e3)
    return statistics.median(times)


def main(population: int) -> dict:
    import pycuda.driver as cuda

    from app.compute.device import backend_context
    from app.sims.channel import bench, schedule
    from app.sims.channel.simulation import ChannelSimulation

    with backend_context("cuda"):
        sim = ChannelSimulation.from_config(bench.config(population, 20), "cuda")
        eng, stream = sim.engine, sim.engine.stream
        whole = lambda: eng._launch_evaluate(0, eng.size, eng.scores_gpu.gpudata, np.intp(0))  # noqa: E731
        row = {"population": population, "points": eng.n_points, "program": eng.n_prog,
               "evaluate_s": timed(cuda, stream, whole),
               "breed_s": timed(cuda, stream, lambda: eng.advance(1, 0, 0.5, 0.1)),
               "median_s": timed(cuda, stream, eng.median)}
        generations = []
        for _ in range(5):
            start = time.perf_counter()
            sim.advance()
            generations.append(time.perf_counter() - start)
        row["generation_s"] = statistics.median(generations)   # host wall time, all included
        program = schedule.schedule(sim.protocol)
        steps = np.array([0 if (i.kind == schedule.APPLY and i.record >= 0) else i.n for i in program], np.int32)
        ptr, _ = eng.module.get_global("c_prog_n")
        cuda.memcpy_htod(ptr, steps)
        row["setup_only_s"] = timed(cuda, stream, whole)
        row["recorded_steps_s"] = row["evaluate_s"] - row["setup_only_s"]
        sim.close()
    return row


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--population", type=int, default=1_120_000)
    parser.add_argument("--out", type=Path, default=Path("bench-results"))
    args = parser.parse_args()
    from app.sims.common.bench_record import save_bench

    row = main(args.population)
    print(json.dumps(row), flush=True)
    print(f"wrote {save_bench('channel-profile', {'cases': [row]}, args.out)}")
