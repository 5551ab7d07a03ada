"""The epidermis headline case on the GPU, kernel by kernel: ``benchmarks/<device>/epidermis-kernels-*.json``.

    python scripts/epidermis_kernels.py OUT_DIR

5,000 cells of 20 elements (movement, periodic, cell list) from the unrelaxed lattice, 20 steps
of warm-up, then three runs of 3,000 steps timed with CUDA events (``bench._time_run``); the
pair list's builds during them and its entries per element after; the device time of every
kernel of a step (``bench.kernel_breakdown``: CUDA events around each launch, launched one by
one) and the device ceilings (copy bandwidth, time per graph node).
"""

from __future__ import annotations

import os
import sys

import numpy as np

from app.compute.device import backend_context
from app.sims.common.bench_record import save_bench
from app.sims.epidermis import bench
from app.sims.epidermis.cuda import ROWS, CudaEngine

STEPS, RUNS = 3000, 3


def main(out_dir: str) -> None:
    with backend_context("cuda"):
        ceilings = bench.device_ceilings()
        cfg = bench.config(5000)
        eng = CudaEngine(cfg, bench.initial(cfg))
        try:
            eng.advance(20)
            builds = eng.pair_list()[0]
            runs = [bench._time_run(eng, STEPS)[0] for _ in range(RUNS)]
            builds = eng.pair_list()[0] - builds
            entries = eng.pair_list()[1]
            kernels = bench.kernel_breakdown(eng, 20)
            g = eng.grid
            summary = eng.summary()
        finally:
            eng.close()
    tree = os.environ.get("BIOGPU_COMMIT", "this tree")[:7]
    results = {
        "case": "5,000 cells x 20 elements, movement, periodic, cell list, 3,000 steps",
        "method": "bench._time_run (CUDA events) x 3 after 20 steps; bench.kernel_breakdown: CUDA "
                  "events around every launch of the step, 20 steps launched one by one after one "
                  "untimed step",
        "rows_per_block": ROWS, "gpu_seconds": [round(s, 5) for s in runs],
        "us_per_step": round(float(np.median(runs)) / STEPS * 1e6, 2),
        "launches_per_step": summary["launches_per_step"],
        "pair_list_builds_per_step": round(builds / (RUNS * STEPS), 5),
        "list_entries_mean": round(float(entries[entries >= 0].mean()), 3),
        "list_entries_max": int(entries.max()), "list_overflow_fraction": float((entries < 0).mean()),
        "grid_bins": f"{g['nx']}x{g['ny']}x{g['nz']}",
        "graph_node_us": round(ceilings["graph_node_s"] * 1e6, 3),
        "copy_bandwidth_GBps": round(ceilings["bandwidth_Bps"] / 1e9, 1),
        "rows": [{"tree": tree, "kernel": k, "us_per_step": v} for k, v in kernels.items()]}
    print(results)
    path = save_bench("epidermis-kernels", results, out_dir, cuda=True)
    print(path.replace(path.with_name(f"epidermis-kernels-{tree}.json")))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "bench-results")
