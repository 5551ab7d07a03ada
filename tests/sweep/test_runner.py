"""Sweeps end to end on a local Dask cluster of CPU workers: table, resume, a killed worker."""

import json
import os
import signal
from pathlib import Path

import numpy as np
import pytest

from app.cli import main
from app.sims.common.config import ConfigError
from app.sweep.runner import SweepRun, plan_sweep, run_point, run_sweep, start_cluster
from app.sweep.table import read_table

pytest.importorskip("distributed")

NETWORK = """
domain: ssa
model:
  species: {X: 0}
  parameters: {k: 10.0, g: 0.2}
  reactions:
    - {name: birth, reactants: {}, products: {X: 1}, rate: k}
    - {name: death, reactants: {X: 1}, products: {}, rate: g}
ensemble: {realizations: REALIZATIONS, t_end: 5.0, samples: 6, seed: 7, histogram_species: [X]}
"""


def _config(tmp_path: Path, sweep: str, realizations: int = 64) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(NETWORK.replace("REALIZATIONS", str(realizations)) + sweep)
    return path


SWEEP = """
sweep:
  parameters:
    - {key: model.parameters.k, values: [5.0, 20.0]}
    - {key: model.parameters.g, values: [0.5, 1.0]}
  replicates: 2
  metrics: [mean, std]
"""


def test_sweep_table_matches_the_immigration_death_law_and_resumes(tmp_path):
    out = tmp_path / "out"
    cfg = _config(tmp_path, SWEEP, realizations=2000)
    result = run_sweep(cfg, out, backend="cpu", workers=2)
    assert result.summary["finished"] == 8 and result.summary["failed"] == 0
    rows = read_table(out / "sweep.csv")
    assert len(rows) == 8 and len({r["name"] for r in rows}) == 8
    assert (out / "sweep.parquet").exists()
    for r in rows:
        k, g = r["model.parameters.k"], r["model.parameters.g"]
        mean = k / g * (1 - np.exp(-g * 5.0))          # Poisson law at t = 5 from X(0) = 0
        assert abs(r["mean_X_t5"] - mean) < 5 * np.sqrt(mean / 2000)
        assert r["std_X_t5"] == pytest.approx(np.sqrt(mean), rel=0.1)
    seeds = {(r["point"], r["replicate"]): r["seed"] for r in rows}
    assert seeds[(0, 0)] == 7 and seeds[(0, 1)] == 8
    assert (out / "points" / "p00003-r01" / "results.npz").exists()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["workers"] == 2 and summary["points"] == 8
    again = run_sweep(cfg, out, backend="cpu", workers=1)
    assert again.summary["reused"] == 8 and again.summary["finished"] == 8


def test_changed_point_is_rerun_not_reused(tmp_path):
    out = tmp_path / "out"
    cfg = _config(tmp_path, SWEEP.replace("replicates: 2", "replicates: 1"))
    run_sweep(cfg, out, backend="cpu", workers=1)
    cfg.write_text(cfg.read_text().replace("[5.0, 20.0]", "[5.0, 30.0]"))
    again = run_sweep(cfg, out, backend="cpu", workers=1)
    assert again.summary["reused"] == 2                 # only k = 5 points are the same runs
    assert {r["model.parameters.k"] for r in read_table(out / "sweep.csv")} == {5.0, 30.0}


def test_a_worker_killed_mid_sweep_still_gives_every_point_once(tmp_path):
    out = tmp_path / "out"
    cfg = _config(tmp_path, """
sweep:
  parameters:
    - {key: model.parameters.k, range: {start: 1, stop: 16, num: 16}}
""", realizations=3000)
    plan = plan_sweep(cfg, out, "cpu")
    cluster = start_cluster("cpu", workers=2)
    killed = []

    def kill_one(row, done, total):
        if done == 3 and not killed:
            pids = cluster.client.run(os.getpid)
            pid = next(p for w, p in pids.items() if p != os.getpid())
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    try:
        result = SweepRun(plan, cluster, kill_one).run()
    finally:
        cluster.close()
    assert killed
    names = [r["name"] for r in result.rows]
    assert sorted(names) == sorted(t.point.name for t in plan.tasks)     # every point, once
    assert all(r["status"] == "ok" for r in result.rows)
    assert len(list((out / "points").glob("*/point.json"))) == 16


def test_plan_refuses_what_cannot_be_swept(tmp_path):
    with pytest.raises(ConfigError, match="not a numeric key"):
        plan_sweep(_config(tmp_path, "sweep:\n  parameters:\n    - {key: ensemble.algorithm, values: [1]}"),
                   tmp_path / "o")
    with pytest.raises(ConfigError, match="unknown metric 'apd90'"):
        plan_sweep(_config(tmp_path, SWEEP.replace("[mean, std]", "[apd90]")), tmp_path / "o")
    with pytest.raises(ConfigError, match=r"sweep point p00001-r00 \(ensemble.realizations=0\)"):
        plan_sweep(_config(tmp_path, "sweep:\n  parameters:\n"
                                     "    - {key: ensemble.realizations, values: [4, 0]}"), tmp_path / "o")
    with pytest.raises(ConfigError, match="no 'sweep:' block"):
        plan_sweep(_config(tmp_path, ""), tmp_path / "o")


def test_a_failing_point_is_a_row_not_the_end_of_the_sweep(tmp_path):
    from dataclasses import replace

    plan = plan_sweep(_config(tmp_path, SWEEP.replace("replicates: 2", "replicates: 1")), tmp_path / "o", "cpu")
    broken = dict(plan.tasks[1].data, ensemble={"realizations": 0})    # fails on the worker
    plan.tasks[1] = replace(plan.tasks[1], data=broken)
    cluster = start_cluster("cpu", workers=1)
    try:
        result = SweepRun(plan, cluster).run()
    finally:
        cluster.close()
    status = {r["name"]: r["status"] for r in result.rows}
    assert status == {"p00000-r00": "ok", "p00001-r00": "failed", "p00002-r00": "ok", "p00003-r00": "ok"}
    failed = next(r for r in result.rows if r["status"] == "failed")
    assert "realizations" in failed["error"] and result.summary["failed"] == 1
    assert row_in_process_is_ok(plan.tasks[0])


def row_in_process_is_ok(task) -> bool:
    row = run_point(task)                  # the worker function runs without Dask as well
    return row["status"] == "ok" and row["worker"] == "in-process"


def test_cli_sweep_writes_the_table(tmp_path, capsys):
    cfg = _config(tmp_path, SWEEP.replace("replicates: 2", "replicates: 1"))
    assert main(["sweep", str(cfg), "--backend", "cpu", "--workers", "1", "--out", str(tmp_path / "o")]) == 0
    text = capsys.readouterr().out
    assert "4 of 4 points finished" in text
    assert main(["sweep", str(cfg), "--backend", "cpu", "--workers", "1", "--out", str(tmp_path / "o")]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("  [")]
    assert len(lines) == 4 and all(" reused " in line and " ok " not in line for line in lines)
    assert main(["sweep", str(cfg), "--workers", "0", "--out", str(tmp_path / "o")]) == 2


def test_closing_the_cluster_does_not_report_the_nanny_killing_a_slow_worker(caplog):
    import logging

    from app.sweep.runner import Cluster

    class SlowLocal:
        def close(self):
            logging.getLogger("distributed.nanny").warning(
                "Worker process still alive after 4.0 seconds, killing")

    class Client:
        def close(self):
            pass

    before = logging.getLogger("distributed.nanny").level
    with caplog.at_level(logging.INFO):
        Cluster(Client(), SlowLocal()).close()
    assert "still alive" not in caplog.text
    assert logging.getLogger("distributed.nanny").level == before


@pytest.mark.gpu
def test_cuda_sweep_batches_points_into_one_task_with_the_same_rows(tmp_path):
    cfg = _config(tmp_path, SWEEP, realizations=256)
    batched = run_sweep(cfg, tmp_path / "b", backend="cuda", workers=1)
    lone = run_sweep(cfg, tmp_path / "l", backend="cuda", workers=1, batch=False)
    assert batched.summary["batched"] and batched.summary["tasks_submitted"] == 1
    assert lone.summary["tasks_submitted"] == 8
    key = lambda r: r["name"]                                       # noqa: E731
    for a, b in zip(sorted(batched.rows, key=key), sorted(lone.rows, key=key)):
        assert a["mean_X_t5"] == b["mean_X_t5"] and a["std_X_t5"] == b["std_X_t5"]


def test_batched_plan_groups_compatible_points_one_batch_per_worker(tmp_path):
    from dataclasses import replace

    plan = plan_sweep(_config(tmp_path, SWEEP), tmp_path / "o", "cpu")
    assert not plan.batch                                   # the CPU engine runs points alone
    plan.batch = True
    todo = [replace(t, pin_by_worker_name=False) for t in plan.tasks]   # copies, as run() makes
    groups = plan.groups(todo, workers=2)
    assert [len(g) for g in groups] == [4, 4]
    assert sorted(t.point.name for g in groups for t in g) == sorted(t.point.name for t in plan.tasks)


def test_a_local_cluster_leaves_this_process_thread_settings_alone():
    """Dask's nanny sets its workers' pre-spawn variables in the parent's os.environ as well, at
    every worker (re)start; numba here would then refuse its next compile ("Cannot set
    NUMBA_NUM_THREADS to a different value"), so that one is never pre-spawn. Each worker still
    gets its share of the cores (the BLAS counts leak back at a restart, as dask documents;
    this process loaded its BLAS before)."""
    before = {name: os.environ.get(name) for name in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS")}
    cluster = start_cluster("cpu", workers=2)
    share = str(max(1, (os.cpu_count() or 1) // 2))
    try:
        assert {name: os.environ.get(name) for name in before} == before
        assert set(cluster.client.run(lambda: os.environ.get("NUMBA_NUM_THREADS")).values()) == {share}
        cluster.client.restart()         # the nanny starts its workers again (as after a killed one)
        assert os.environ.get("NUMBA_NUM_THREADS") == before["NUMBA_NUM_THREADS"]
        assert set(cluster.client.run(lambda: os.environ.get("NUMBA_NUM_THREADS")).values()) == {share}
        assert set(cluster.client.run(lambda: os.environ.get("OMP_NUM_THREADS")).values()) == {share}
    finally:
        cluster.close()
