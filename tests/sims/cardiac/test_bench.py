"""``bench cardiac --paper``'s rows without running the sphere: each method's row carries the
paper's figures and targets, GPU rows their memory floor, and a reference that excites nothing
is refused (its errors would be those of tissue at rest)."""

from __future__ import annotations

import numpy as np
import pytest

from app.sims.cardiac import bench
from app.sims.common.simulation import load_run_config

LEVEL = 2                       # 162 cells: the row logic only; the runs are replaced


def fake_runs(monkeypatch, activation):
    calls = []

    def run_once(cfg, backend):
        calls.append(cfg.solver)
        n = 10 * 4 ** LEVEL + 2
        t = np.linspace(0.0, cfg.protocol.t_end, 50)
        v = -80.0 + 100.0 * np.exp(-((t[:, None] - 10.0) / 3.0) ** 2) * np.ones((1, 3))
        if cfg.solver.precision != "float64":
            v = v + 0.5
        arrays = {"probe_t": t, "probe_V": v, "activation_time": activation(n),
                  "activation_last": activation(n)}
        steps = int(round(cfg.protocol.t_end / cfg.solver.dt))
        return arrays, {"steps_accepted": steps, "steps_rejected": 0, "wall_seconds": 0.5}

    monkeypatch.setattr(bench, "run_once", run_once)
    monkeypatch.setattr(bench, "hbm_bandwidth", lambda: 3.35e12)
    return calls


def test_rows_carry_the_paper_targets_and_on_a_gpu_the_floor(monkeypatch):
    calls = fake_runs(monkeypatch, lambda n: np.where(np.arange(n) < n - 2, np.linspace(2.0, 180.0, n), np.nan))
    _, base = load_run_config(bench.PRESET)
    out = bench.paper_rows(base, LEVEL, 300.0, "cuda", every=True)
    assert len(out["rows"]) == len(bench.cases(True)) == 23         # the paper's 19 and four GRL1 steps
    assert calls[0].method == "bs32" and calls[0].precision == "float64"     # the reference first
    assert len(calls) == 1 + 2 * 23                                          # each case warmed up on CUDA
    rlfe = next(r for r in out["rows"] if r["method"] == "rlfe" and r["dt"] == 0.05)
    assert rlfe["paper"]["seconds"] == 11.2 and rlfe["target_seconds"] == 0.3
    assert out["row_bytes_per_slot"] == 4             # int16 offsets and half weights (node_order.py)
    assert out["floor_bytes_per_cell_step"] == 2 * 21 * 4 + 4 * out["neighbour_width"] + 4 + 32
    assert rlfe["floor_seconds"] == pytest.approx(out["floor_bytes_per_cell_step"] * 162 * 6000 / 3.35e12)
    te21 = next(r for r in out["rows"] if r["method"] == "te21" and r["at"] == 1e-2)
    assert te21["paper"] is None and "floor_seconds" not in te21       # the paper's 'fail'; adaptive: no floor
    assert min(rlfe["i_abs_error"], rlfe["i_rel_error"], rlfe["rrms"]) > 0          # float32 runs differ
    ref = out["reference"]
    assert ref["s1_excited_fraction"] == pytest.approx(160 / 162) and ref["s1_last_activation_ms"] == pytest.approx(2.0 + 178.0 * 159 / 161)


def test_the_cpu_runs_one_setting_per_method_and_a_resting_reference_is_refused(monkeypatch):
    fake_runs(monkeypatch, lambda n: np.linspace(2.0, 180.0, n))
    _, base = load_run_config(bench.PRESET)
    out = bench.paper_rows(base, LEVEL, 300.0, "cpu", every=False)
    assert [r["method"] for r in out["rows"]] == ["rlfe", "grl1", "midpoint", "rkf45", "bs32", "te21"]
    assert "floor_bytes_per_cell_step" not in out and all("floor_seconds" not in r for r in out["rows"])
    fake_runs(monkeypatch, lambda n: np.full(n, np.nan))
    with pytest.raises(RuntimeError, match="did not excite"):
        bench.paper_rows(base, LEVEL, 300.0, "cpu", every=False)
    assert bench.paper_size("cuda", False) == (7, 300.0) and bench.paper_size("cpu", False)[0] == 6
