"""Sweep benchmarks: Dask's cost on many tiny CPU points, and the scaling over GPUs.

    python -m app bench sweep [--quick]              # CPU: Dask against one process
    python -m app bench sweep --backend cuda         # 64 SSA points on 1 GPU, then on every GPU

256 birth-death ensembles of 32 realizations (a few milliseconds each) run three ways: one after
another in this process (``run_point`` called directly, the floor: no scheduling at all), on a
local cluster of one worker (Dask's own overhead), and on one worker per core. Cluster start-up
is counted in the Dask wall times.
"""

from __future__ import annotations

import os

import numpy as np
import tempfile
import time
from pathlib import Path

from app.sims.common.bench_record import save_bench

POINTS_CONFIG = """
domain: ssa
name: sweep benchmark (tiny birth-death points)
model:
  species: {X: 0}
  parameters: {k: 10.0, g: 0.2}
  reactions:
    - {name: birth, reactants: {}, products: {X: 1}, rate: k}
    - {name: death, reactants: {X: 1}, products: {}, rate: g}
ensemble: {realizations: 32, t_end: 2.0, samples: 5, seed: 1, histogram_species: [X]}
sweep:
  parameters:
    - {key: model.parameters.k, range: {start: 1, stop: 100, num: POINTS, scale: log}}
  metrics: [mean, std]
"""


GPU_POINTS_CONFIG = """
domain: ssa
name: sweep benchmark (decay-dimerization, c2 over 64 values)
model:
  species: {S1: 100000, S2: 0, S3: 0}
  parameters: {c1: 1.0, c2: 0.002, c3: 0.5, c4: 0.04}
  reactions:
    - {name: decay, reactants: {S1: 1}, products: {}, rate: c1}
    - {name: dimerize, reactants: {S1: 2}, products: {S2: 1}, rate: c2}
    - {name: dissociate, reactants: {S2: 1}, products: {S1: 2}, rate: c3}
    - {name: convert, reactants: {S2: 1}, products: {S3: 1}, rate: c4}
ensemble: {realizations: REALIZATIONS, t_end: 10.0, samples: 11, seed: 1}
sweep:
  parameters:
    - {key: model.parameters.c2, range: {start: 0.001, stop: 0.004, num: POINTS}}
  metrics: [mean, std, throughput]
"""


def _timed_dask(cfg: Path, out: Path, workers: int, backend: str = "cpu", batch: bool = True) -> float:
    from app.sweep.runner import SweepRun, plan_sweep, start_cluster

    start = time.perf_counter()
    plan = plan_sweep(cfg, out, backend, batch=batch)
    cluster = start_cluster(backend, workers=workers)
    try:
        result = SweepRun(plan, cluster).run()
    finally:
        cluster.close()
    assert result.summary["finished"] == len(plan.tasks), result.summary
    return time.perf_counter() - start


def _timed_in_process(cfg: Path, out: Path) -> float:
    from app.sweep.runner import plan_sweep, run_point
    from app.sweep.table import write_table

    start = time.perf_counter()
    plan = plan_sweep(cfg, out, "cpu")
    rows = [run_point(t) for t in plan.tasks]
    write_table(out, rows, plan.spec.keys)
    return time.perf_counter() - start


def gpu_scaling(out_dir: Path, quick: bool) -> int:
    """64 decay-dimerization points of 2^17 realizations on one GPU, then on every GPU."""
    from app.compute.device import cuda_status

    gpus = len(cuda_status().devices)
    if gpus < 2:
        print("sweep GPU scaling: one GPU here, nothing to compare (run it on a multi-GPU host)")
        return 0
    points, realizations = (8, 1 << 14) if quick else (64, 1 << 17)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        warm, cfg = Path(tmp) / "warm.yaml", Path(tmp) / "sweep.yaml"
        warm.write_text(GPU_POINTS_CONFIG.replace("POINTS", "2").replace("REALIZATIONS", "1024"))
        cfg.write_text(GPU_POINTS_CONFIG.replace("POINTS", str(points))
                       .replace("REALIZATIONS", str(realizations)))
        _timed_dask(warm, Path(tmp) / "warm", gpus, "cuda")   # kernel compiled once, cached on disk
        for batched in (False, True):
            for n in sorted({1, gpus}):
                wall = _timed_dask(cfg, Path(tmp) / f"g{n}{batched}", n, "cuda", batched)
                rows.append((batched, n, wall))
    print(f"sweep GPU scaling: {points} decay-dimerization points x {realizations} realizations "
          f"(t = 10), {cuda_status().devices[0].name} x {gpus}")
    print(f"{'tasks':>22s} {'GPUs':>4s} {'wall s':>8s} {'points/s':>9s} {'speed-up':>9s}")
    results = []
    for batched, n, wall in rows:
        one = next(w for b, g, w in rows if b == batched and g == 1)
        how = "batched (launch/GPU)" if batched else "one task per point"
        print(f"{how:>22s} {n:4d} {wall:8.2f} {points / wall:9.2f} {one / wall:8.2f}x")
        results.append({"batched": batched, "gpus": n, "wall_seconds": wall, "points": points,
                        "realizations": realizations, "speedup": one / wall})
    out_dir.mkdir(parents=True, exist_ok=True)
    save_bench("sweep-gpu", {"rows": results}, out_dir)
    return 0


def _dimer_config(realizations: int, c2: float = 0.002, seed: int = 1):
    from app.sims.common.config import parse_yaml
    from app.sims.ssa.config import load_config

    text = GPU_POINTS_CONFIG.split("sweep:")[0].replace("REALIZATIONS", str(realizations))
    text = text.replace("c2: 0.002", f"c2: {c2!r}").replace("seed: 1", f"seed: {seed}")
    return load_config(parse_yaml(text, "<bench>"))


def batching(out_dir: Path, quick: bool) -> dict:
    """1,000 points x 1,024 realizations in one batch against one ensemble of the same size."""
    from app.compute.device import backend_context
    from app.sims.ssa import batch
    from app.sims.ssa.simulation import SSASimulation

    points, per = (50, 1024) if quick else (1000, 1024)
    cfgs = [_dimer_config(per, float(c2), seed) for seed, c2 in
            enumerate(np.linspace(0.001, 0.004, points), start=1)]
    with backend_context("cuda"):
        batch.run(cfgs[:2])                                     # compile and warm
        start = time.perf_counter()
        results = batch.run(cfgs)
        batch_wall = time.perf_counter() - start
        fired = sum(s["reactions_fired"] for _, s in results)
        single = SSASimulation(_dimer_config(points * per), "cuda")
        start = time.perf_counter()
        while not single.finished:
            single.advance()
        single_wall = time.perf_counter() - start
        _, s1 = single.results()
        single.close()
    row = {"points": points, "realizations_per_point": per, "batch_wall_seconds": batch_wall,
           "batch_reactions_per_second": fired / batch_wall,
           "single_wall_seconds": single_wall,
           "single_reactions_per_second": s1["reactions_fired"] / single_wall}
    row["ratio"] = row["batch_reactions_per_second"] / row["single_reactions_per_second"]
    print(f"SSA batching: {points} points x {per} realizations (decay-dimerization, t = 10, "
          f"c2 from 0.001 to 0.004) in one batch: {batch_wall:.2f} s, "
          f"{row['batch_reactions_per_second']:.3g} reactions/s; one ensemble of {points * per} "
          f"realizations at c2 = 0.002: {single_wall:.2f} s, {row['single_reactions_per_second']:.3g} "
          f"reactions/s; ratio {row['ratio']:.2f}")
    return row


def main(backend: str = "cpu", out_dir: Path = Path("bench-results"), quick: bool = False) -> int:
    from app.compute.device import resolve_backend

    if backend != "cpu" and resolve_backend(backend)[0] == "cuda":
        row = batching(out_dir, quick)
        out_dir.mkdir(parents=True, exist_ok=True)
        save_bench("sweep-batching", row, out_dir)
        return gpu_scaling(out_dir, quick)
    points = 32 if quick else 256
    cores = os.cpu_count() or 1
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / "sweep.yaml"
        cfg.write_text(POINTS_CONFIG.replace("POINTS", str(points)))
        _timed_in_process(cfg, Path(tmp) / "warm")          # imports and first-call costs
        rows = [("one process, no Dask", 1, _timed_in_process(cfg, Path(tmp) / "a"))]
        rows.append(("Dask LocalCluster", 1, _timed_dask(cfg, Path(tmp) / "b", 1)))
        if cores > 1:
            rows.append(("Dask LocalCluster", cores, _timed_dask(cfg, Path(tmp) / "c", cores)))
    base = rows[0][2]
    print(f"sweep benchmark: {points} tiny SSA points (32 realizations each), CPU, {cores} cores")
    print(f"{'how':24s} {'workers':>7s} {'wall s':>8s} {'per point ms':>13s} {'vs one process':>15s}")
    results = []
    for how, workers, wall in rows:
        print(f"{how:24s} {workers:7d} {wall:8.2f} {1e3 * wall / points:13.1f} {wall / base:14.2f}x")
        results.append({"how": how, "workers": workers, "wall_seconds": wall, "points": points,
                        "ratio_to_one_process": wall / base})
    out_dir.mkdir(parents=True, exist_ok=True)
    save_bench("sweep", {"rows": results}, out_dir)
    return 0
