"""Sweep benchmark: Dask's cost on many tiny points, against the same points in one process.

    python -m app bench sweep [--quick]

256 birth-death ensembles of 32 realizations (a few milliseconds each) run three ways: one after
another in this process (``run_point`` called directly, the floor: no scheduling at all), on a
local cluster of one worker (Dask's own overhead), and on one worker per core. Cluster start-up
is counted in the Dask wall times.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

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


def _timed_dask(cfg: Path, out: Path, workers: int) -> float:
    from app.sweep.runner import SweepRun, plan_sweep, start_cluster

    start = time.perf_counter()
    plan = plan_sweep(cfg, out, "cpu")
    cluster = start_cluster("cpu", workers=workers)
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


def main(backend: str = "cpu", out_dir: Path = Path("bench-results"), quick: bool = False) -> int:
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
    (out_dir / "sweep.json").write_text(json.dumps(results, indent=2))
    return 0
