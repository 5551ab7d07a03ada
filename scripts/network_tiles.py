"""Per-chunk time of the CUDA network engine, many chunks per launch (net_run) against one
launch per chunk (net_step), on the 100x100 culture at equilibrium (radius 2.001).

    python scripts/network_tiles.py [--lanes 4,16] [--ablate] [--out FOLDER]

``--lanes`` adds net_run with other thread counts per neuron; ``--ablate`` adds net_run with
parts of a chunk removed (no synapses, no noise, no waiting for the neighbours, none of the
three; the results are wrong, the times say what each part costs) and with a register
budget of 102 instead of 64. Prints and writes (the common bench record, ``network-tiles.json``
in FOLDER) for each run the wall time of one 9,999-step read-back (1,111 chunks), its GPU time
from CUDA events and the microseconds per chunk."""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from app.compute.device import backend_context
from app.sims.common.bench_record import save_bench
from app.sims.network import bench
from app.sims.network import cuda as network_cuda
from app.sims.network.model import Constants, build_culture


VARIANTS = {
    "no-synapses": [("const int len = valid ? rowlen[i] : 0;", "const int len = 0;")],
    "no-noise": [("if (valid && k < pairs) {", "if (false) {")],
    "no-wait": [("while ((unsigned int)(w >> 32) != tag) {", "while (false) {")],
}
VARIANTS["none-of-the-three"] = [edit for edits in VARIANTS.values() for edit in edits]
# not ablations: the engine's kernel for the culture's blocks replaced by another
KERNELS = {"64-registers": "net_run"}         # net_run_narrow (up to 96 registers a thread) -> 64


def ablated_source(name: str) -> str:
    text = network_cuda.read_kernel("network.cu")
    for old, new in VARIANTS[name]:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return text


def measure(tiled: bool, reps: int = 10, lanes: int = network_cuda.LANES, ablate: str = "") -> dict:
    import pycuda.driver as cuda

    planner, default_lanes, source = network_cuda.tile_plan, network_cuda.LANES, network_cuda.kernel_source
    chooser = network_cuda.run_kernel
    network_cuda.LANES = lanes
    if ablate in KERNELS:
        network_cuda.run_kernel = lambda threads: KERNELS[ablate]
    if ablate in VARIANTS:
        network_cuda.kernel_source = lambda: ablated_source(ablate)
    if not tiled:
        network_cuda.tile_plan = lambda *args: None
    try:
        cfg = bench.culture_config(100, bench.PAPER_RADIUS)
        eng = network_cuda.CudaEngine(build_culture(cfg), Constants.from_config(cfg), cfg.growth,
                                      cfg.run.seed, bench.PAPER_RADIUS)
    finally:
        network_cuda.tile_plan, network_cuda.LANES, network_cuda.kernel_source = planner, default_lanes, source
        network_cuda.run_kernel = chooser
    steps = eng.sub_steps
    eng.advance(steps)                                   # warm-up
    start, end = cuda.Event(), cuda.Event()
    walls, gpus, spikes = [], [], 0
    for _ in range(reps):
        t0 = time.perf_counter()
        start.record(eng.stream)
        s, _ = eng.advance(steps)
        end.record(eng.stream)
        end.synchronize()
        walls.append(time.perf_counter() - t0)
        gpus.append(end.time_since(start) * 1e-3)
        spikes += s.size
    chunks = -(-steps // eng.chunk)
    plan = eng.plan
    eng.close()
    wall, gpu = float(np.median(walls)), float(np.median(gpus))
    return {"path": "net_run" if plan is not None else "net_step", "lanes": lanes, "ablated": ablate,
            "steps": steps, "chunks": chunks,
            "wall_seconds": wall, "gpu_seconds_events": gpu, "us_per_chunk_wall": wall / chunks * 1e6,
            "spikes_per_readback": spikes / reps, "epoch_seconds_estimate": wall * 1e6 / steps,
            "plan": None if plan is None else {"tile_w": plan.tile_w, "tile_h": plan.tile_h,
                                               "blocks": plan.blocks, "halo": plan.halo,
                                               "threads": plan.threads}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="bench-results")
    ap.add_argument("--lanes", default="", help="also net_run with these lanes per neuron, e.g. 4,16")
    ap.add_argument("--ablate", action="store_true",
                    help="also net_run without parts of a chunk, and with more registers")
    args = ap.parse_args()
    with backend_context("cuda"):
        rows = [measure(True), measure(False), measure(True)]
        rows += [measure(True, lanes=int(v)) for v in args.lanes.split(",") if v]
        if args.ablate:
            rows += [measure(True, ablate=name) for name in (*VARIANTS, *KERNELS)]
    print(json.dumps(rows, indent=1))
    print(save_bench("network-tiles", {"method": "scripts/network_tiles.py: the engine's advance() of one "
                                       "read-back, median of 10 after a warm-up", "rows": rows},
                     args.out, cuda=True))


if __name__ == "__main__":
    main()
