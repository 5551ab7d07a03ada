"""What the run loop users go through costs on top of the engine: the CLI's and the GUI's worker
call ``Simulation.advance()`` until the run ends, and every call builds a frame (V, the live
activation map, the probe traces) and takes the readouts (pseudo-ECG rows, rotor tracking).

For one configuration this times, in one process after a warm-up that compiles:

- ``engine``: the engine alone (``run_to_end``), as ``python -m app bench`` times it;
- ``loop``: ``advance()`` until finished, as the worker runs it (frames built, nothing drawn);
- ``loop-no-readouts``: the same with the rotor tracker off (``singularity_delay: 0``);

and prints the top functions of a cProfile of the loop. Usage::

    python scripts/cardiac/frame_loop.py sphere [--t-end 300] [--out FOLDER]
    python scripts/cardiac/frame_loop.py shell --nodes 1000000 --t-end 30 --split-dt 0.2 --dt 0.04

With ``--out`` the figures go to ``FOLDER/cardiac-frames-<case>.json`` (``save_bench``: with the
commit, device, driver and compiler).
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import io
import json
import pstats
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from app.compute.device import backend_context  # noqa: E402
from app.sims.cardiac import bench  # noqa: E402
from app.sims.cardiac.simulation import CardiacSimulation  # noqa: E402
from app.sims.common.bench_record import save_bench  # noqa: E402
from app.sims.common.simulation import load_run_config  # noqa: E402


def with_output(cfg, **changes):
    return dataclasses.replace(cfg, output=dataclasses.replace(cfg.output, **changes))


def timed_loop(cfg, backend: str, profile: cProfile.Profile | None = None) -> dict:
    sim = CardiacSimulation(cfg, backend)
    try:
        frames, start = 0, time.perf_counter()
        if profile is not None:
            profile.enable()
        while not sim.finished:
            sim.advance()
            frames += 1
        if profile is not None:
            profile.disable()
        wall = time.perf_counter() - start
    finally:
        sim.close()
    return {"wall_seconds": wall, "frames": frames, "ms_per_frame": 1e3 * wall / max(frames, 1)}


def engine_only(cfg, backend: str) -> float:
    sim = CardiacSimulation(cfg, backend)
    try:
        start = time.perf_counter()
        if hasattr(sim.engine, "run_to_end"):
            sim.engine.run_to_end()
        else:                                                  # the CPU engines
            while not sim.engine.finished:
                sim.engine.advance(1 << 20)
        return time.perf_counter() - start
    finally:
        sim.close()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=["sphere", "shell"])
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--t-end", type=float, default=300.0)
    ap.add_argument("--nodes", type=int, default=1_000_000)
    ap.add_argument("--split-dt", type=float, default=0.2)
    ap.add_argument("--dt", type=float, default=0.04)
    ap.add_argument("--snapshot", type=float, default=1.0, help="snapshot_interval (ms)")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, backend_context(args.backend):
        if args.case == "sphere":
            _, base = load_run_config(bench.PRESET)
            cfg = bench.make_cfg(base, 7, args.t_end, method="rlfe", dt=0.05)
        else:
            from app.sims.cardiac import bench_mesh
            path, points = bench_mesh.write_shell(Path(tmp), args.nodes)
            cfg = bench_mesh.config_for(path, points, args.t_end, args.split_dt, "strang", args.dt)
            cfg = with_output(cfg, singularity_delay=10.0)
        cfg = with_output(cfg, snapshot_interval=args.snapshot)
        warm = dataclasses.replace(cfg, protocol=dataclasses.replace(cfg.protocol, t_end=2.0))
        timed_loop(warm, args.backend)                         # compiles, reads the mesh
        result = {"case": args.case, "t_end_ms": args.t_end, "snapshot_interval_ms": args.snapshot,
                  "readout_every_ms": cfg.output.readout_every, "singularity_delay_ms": cfg.output.singularity_delay,
                  "solver_method": cfg.solver.method, "solver_dt": cfg.solver.dt,
                  "solver_split_dt": cfg.solver.split_dt, "solver_split": cfg.solver.split,
                  "solver_precision": cfg.solver.precision,
                  "engine_seconds": engine_only(cfg, args.backend)}
        if args.case == "shell":
            result["nodes_asked"] = args.nodes
        profile = cProfile.Profile()
        for name, run_cfg, prof in (("loop", cfg, None),
                                    ("loop_no_readouts", with_output(cfg, singularity_delay=0.0), None),
                                    ("loop_profiled", cfg, profile)):
            timed = timed_loop(run_cfg, args.backend, prof)
            result.update({"frames": timed["frames"], f"{name}_seconds": timed["wall_seconds"],
                           f"{name}_ms_per_frame": timed["ms_per_frame"]})
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(args.top)
    print(json.dumps(result, indent=1))
    print(text.getvalue())
    if args.out:
        result["method"] = ("scripts/cardiac/frame_loop.py: after a 2-ms warm-up run, the engine alone "
                            "(run_to_end) and Simulation.advance() until finished (a frame per snapshot_interval), "
                            "with the preset's readouts and with the rotor tracker off, in one process")
        result["profile_top"] = text.getvalue().splitlines()[:12 + args.top]
        save_bench(f"cardiac-frames-{args.case}", result, args.out, cuda=args.backend == "cuda")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
