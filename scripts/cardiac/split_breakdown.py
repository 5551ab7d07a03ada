"""Where a split step's time goes on the 10^6-node shell of ``bench cardiac --mesh`` (CUDA): the
cell-substep kernel and each diffusion super-step timed alone with CUDA events after a warm-up,
their registers and local memory, and the whole step; at rest and after ``--advance-ms`` of the
run (a wave crossing the tissue), for each ``--min-blocks`` (the kernels' launch bound,
``cuda.STAGE_MIN_BLOCKS``; None: the engine's choice) and each ``--rows`` (``engine``: the
engine's node order and row format, int16 offsets where they fit; ``int32``: the file's order
with int32 indices, the engine's fallback, forced for comparison) and each ``--lookup-steps`` (the table's spacing in
mV, ``solver.lookup_step``) and each ``--tables`` (``on``: the bench's lookup tables, ``off``:
the model evaluated directly) and each ``--fuse`` (Strang: ``on``, the engine's, the first half
super-step's last stage done by the cell kernel; ``off``, launched alone); with ``--run-ms``,
each variant's whole run from rest over that many ms as the bench times it (one mesh for all).
Writes ``cardiac-mesh-kernels.json``.

    python scripts/cardiac/split_breakdown.py --split strang --split-dt 0.2 --dt 0.04 --min-blocks none 6 8
    python scripts/cardiac/split_breakdown.py --split godunov --split-dt 0.2 --rows engine int32
    python scripts/cardiac/split_breakdown.py --split strang --split-dt 0.2 --dt 0.04 --lookup-steps 0.02 0.1 \
        --run-ms 100
    python scripts/cardiac/split_breakdown.py --split strang --split-dt 0.2 --dt 0.04 --tables on off --run-ms 100
    python scripts/cardiac/split_breakdown.py --split strang --split-dt 0.2 --dt 0.04 --fuse on off --run-ms 100
"""
import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def timed(engine, launch, n: int = 40) -> float:
    """Microseconds per call of ``launch`` on the engine's stream (after one untimed call)."""
    import pycuda.driver as cuda
    launch()
    engine.stream.synchronize()
    start, end = cuda.Event(), cuda.Event()
    start.record(engine.stream)
    for _ in range(n):
        launch()
    end.record(engine.stream)
    end.synchronize()
    return start.time_till(end) / n * 1e3


def kernel_row(f) -> dict:
    return {"registers": f.num_regs, "local_bytes": f.local_size_bytes}


def breakdown(engine, nodes: int) -> dict:
    """The split step's kernels on the engine's present state (repeating them changes it: this
    is a timing, not a run)."""
    from app.sims.cardiac.cuda import BLOCK
    e, out = engine, {}
    for k in sorted({1, e.p.substeps}):
        us = timed(e, lambda k=k: e._cells.prepared_async_call(
            e._grid, (BLOCK, 1, 1), e.stream, e.YA.gpudata, e.mask.gpudata, e.maps.gpudata, e.cd.gpudata,
            e.ci.gpudata, e.pfield.gpudata, np.int32(e.steps_accepted * e.p.substeps), np.int32(k),
            np.int32(-1), np.float64(0), np.float64(0)))
        out[f"cell_substeps_{k}_us"] = us
    for fraction, plan in sorted(e._rkc_plan.items()):
        out[f"diffusion_{fraction:g}_us"] = timed(e, lambda f=fraction: e._diffuse(f, (-1, 0.0, 0.0)))
        out[f"diffusion_{fraction:g}_stages"] = len(plan)
    out["split_step_us"] = timed(e, e._launch_split_step, 20)
    out["state_GBps_one_substep"] = nodes * e.ns * 2 * e.YA.dtype.itemsize / out["cell_substeps_1_us"] / 1e3
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", default="godunov", choices=("strang", "godunov"))
    ap.add_argument("--split-dt", type=float, default=0.2)
    ap.add_argument("--dt", type=float, default=0.02)
    ap.add_argument("--advance-ms", type=float, default=30.0)
    ap.add_argument("--nodes", type=int, default=None)
    ap.add_argument("--min-blocks", nargs="+", default=["none"], help="launch bounds to try (none: the engine's)")
    ap.add_argument("--rows", nargs="+", default=["engine"], choices=("engine", "int32"),
                    help="operator-row formats to compare (int32: the fallback, forced)")
    ap.add_argument("--lookup-steps", nargs="+", type=float, default=[None],
                    help="lookup-table spacings (mV) to compare (default: the solver's)")
    ap.add_argument("--tables", nargs="+", default=["on"], choices=("on", "off"),
                    help="lookup tables on (the bench's) or off (the model evaluated directly)")
    ap.add_argument("--fuse", nargs="+", default=["on"], choices=("on", "off"),
                    help="Strang: the first half's last stage in the cell kernel (on, the engine's) or alone (off)")
    ap.add_argument("--run-ms", type=float, default=0.0, help="also time each variant's whole run over this many ms")
    ap.add_argument("--out", default="bench-results")
    args = ap.parse_args()
    from app.compute.device import backend_context
    from dataclasses import replace

    from app.sims.cardiac import bench_mesh, cuda
    from app.sims.cardiac.bench import run_once
    from app.sims.cardiac.node_order import NodeOrder, device_order
    from app.sims.cardiac.simulation import CardiacSimulation
    from app.sims.common.bench_record import save_bench
    with tempfile.TemporaryDirectory() as tmp, backend_context("cuda"):
        path, points = bench_mesh.write_shell(Path(tmp), args.nodes or bench_mesh.NODES)
        cfg = bench_mesh.config_for(path, points, args.advance_ms + 10.0, args.split_dt, args.split, args.dt)
        result = {"nodes": len(points), "split": args.split, "split_dt_ms": args.split_dt, "dt_ms": args.dt,
                  "advance_ms": args.advance_ms, "variants": []}
        base = cfg
        for bound, rows, step, tables, fuse in ((b, r, s, t, f) for b in args.min_blocks for r in args.rows
                                                for s in args.lookup_steps for t in args.tables
                                                for f in args.fuse):
            cuda.FUSE_STAGE = fuse == "on"
            cuda.STAGE_MIN_BLOCKS = None if bound == "none" else int(bound)
            cuda.device_order = device_order if rows == "engine" else lambda nbr: NodeOrder.identity(len(nbr))
            cfg = base if step is None else replace(base, solver=replace(base.solver, lookup_step=step))
            cfg = replace(cfg, solver=replace(cfg.solver, lookup_tables=tables == "on"))
            variant: dict = {"min_blocks": bound, "rows": rows, "tables": tables, "fuse": fuse,
                             "lookup_step_mV": cfg.solver.lookup_step if tables == "on" else None}
            for label, advance in (("at_rest", 0.0), ("mid_wave", args.advance_ms)):
                sim = CardiacSimulation(cfg, "cuda")         # a fresh run each: the timing repeats kernels
                engine = sim.engine
                if advance:
                    engine.advance_time(advance)
                variant.update(substeps=engine.p.substeps, cell_substeps=kernel_row(engine._cells),
                               rkc_stage=kernel_row(engine._rkc),
                               stage_cell_substeps=kernel_row(engine._stage_cells),
                               row_bytes_per_slot=engine.row_bytes_per_slot)
                variant[label] = breakdown(engine, len(points))
                print(bound, label, variant, flush=True)
                sim.close()
            if args.run_ms:
                whole = replace(cfg, protocol=replace(cfg.protocol, t_end=args.run_ms))
                summary = run_once(whole, "cuda")[1]
                variant["run"] = {"t_end_ms": args.run_ms, "wall_seconds": summary["wall_seconds"],
                                  "real_time_factor": args.run_ms / (summary["wall_seconds"] * 1e3)}
                print(bound, "run", variant["run"], flush=True)
            result["variants"].append(variant)
        cuda.STAGE_MIN_BLOCKS, cuda.device_order, cuda.FUSE_STAGE = None, device_order, True
    print(result)
    print(f"wrote {save_bench('cardiac-mesh-kernels', result, Path(args.out))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
