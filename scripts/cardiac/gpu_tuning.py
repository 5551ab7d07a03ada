"""Time O'Hara-Rudy 2011 on the level-7 sphere (the issue-18 case: RLFE 0.01 ms) on the GPU for
each precision, with and without lookup tables, and for several launch bounds of the stage
kernel (``cuda.STAGE_MIN_BLOCKS``: blocks of 128 threads per SM that ptxas must fit, capping
the registers; "auto": ``cuda.stage_min_blocks``'s choice), and print the time projected to
300 ms against the bandwidth floor.

    python scripts/cardiac/gpu_tuning.py [--t-end 50] [--out bench-results/cardiac-tuning.json]

Each variant compiles once (a 2 ms run, untimed), then runs ``--t-end`` ms (the first stimulus
and upstroke included); fixed steps, so the 300-ms time is the per-step time x 30,000.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from app.compute.device import backend_context  # noqa: E402
from app.sims.cardiac import bench, cuda  # noqa: E402
from app.sims.cardiac.config import ModelSettings  # noqa: E402
from app.sims.cardiac.model import load_model  # noqa: E402
from app.sims.common.simulation import load_run_config  # noqa: E402

VARIANTS = [  # (precision, lookup tables, STAGE_MIN_BLOCKS; None: cuda.stage_min_blocks's choice)
    ("float64", False, None), ("float64", True, 0), ("float64", True, None), ("float64", True, 4),
    ("mixed", True, 0), ("mixed", True, None), ("float32", False, None), ("float32", True, None),
    ("float32", True, 6),
]
MODEL, DT, STEPS_300 = "ohara_rudy_2011_endo", 0.01, 30000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--t-end", type=float, default=50.0)
    ap.add_argument("--out", type=Path, default=Path("bench-results/cardiac-tuning.json"))
    args = ap.parse_args()
    _, base = load_run_config(bench.PRESET)
    stimuli = [dataclasses.replace(st, amplitude=-80.0, duration=1.0) for st in base.protocol.stimuli]
    base = dataclasses.replace(base, model=ModelSettings(file=MODEL),
                               protocol=dataclasses.replace(base.protocol, stimuli=stimuli))
    n_cells = 10 * 4 ** 7 + 2
    rows = []
    with backend_context("cuda"):
        bandwidth = bench.hbm_bandwidth()
        for precision, lookup, min_blocks in VARIANTS:
            cuda.STAGE_MIN_BLOCKS = min_blocks
            label = "auto" if min_blocks is None else str(min_blocks)
            cfg = bench.make_cfg(base, 7, args.t_end, method="rlfe", dt=DT, precision=precision,
                                 lookup_tables=lookup)
            bench.run_once(bench.make_cfg(cfg, 7, 2.0), "cuda")          # compile
            try:
                arrays, summary = bench.run_once(cfg, "cuda")
            except Exception as exc:                                       # a stop is a result
                rows.append({"precision": precision, "lookup_tables": lookup, "min_blocks": label,
                             "stopped": str(exc)})
                print(f"{precision:8s} lookup {lookup!s:5s} min_blocks {label}: stopped: {exc}", flush=True)
                continue
            steps = summary["steps_accepted"]
            per_step = summary["wall_seconds"] / steps
            size = 4 if precision == "float32" else 8
            floor = STEPS_300 * 2 * load_model(MODEL).n_states * size * n_cells / bandwidth
            row = {"precision": precision, "lookup_tables": lookup, "min_blocks": label, "steps": steps,
                   "wall_seconds": summary["wall_seconds"], "projected_300ms_seconds": per_step * STEPS_300,
                   "floor_300ms_seconds": floor, "ratio": per_step * STEPS_300 / floor,
                   "stopped": summary.get("stopped", {}).get("reason", "")}
            rows.append(row)
            print(f"{precision:8s} lookup {lookup!s:5s} min_blocks {label}: {steps} steps "
                  f"{summary['wall_seconds']:.3f} s -> 300 ms {row['projected_300ms_seconds']:.3f} s, floor "
                  f"{floor:.3f} s, ratio {row['ratio']:.2f} {row['stopped']}", flush=True)
    cuda.STAGE_MIN_BLOCKS = None
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
