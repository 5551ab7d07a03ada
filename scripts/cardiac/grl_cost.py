"""The cost of a GRL1 step against an RLFE step, on the same machine in one process: the
cardiac benchmark's sphere (``python -m app bench cardiac``'s preset and ``run_once``) with an
imported model, each method run ``--repeats`` times in turn after a compile run, wall seconds
per step and per cell-step, and the ratio. CUDA (the default where it works) or the compiled
CPU engine.

    python scripts/cardiac/grl_cost.py [--backend cuda|cpu] [--level 7] [--t-end 50] [--out FILE.json]
    python scripts/cardiac/grl_cost.py --backend cpu --level 4 --model CORPUS/ohara_rudy_cipa_v1_2017.cellml

GRL1 evaluates each non-gating state's diagonal Jacobian (printed with the model) and one
φ1 per non-gating state more than RLFE; the state it reads and writes is the same, so on a
memory-bound GPU step the ratio shows what that arithmetic costs. On a model with Markov
chains GRL1 also builds each chain's (n+1)-square matrix and its exponential per cell and step
(``app.sims.cardiac.markov``): ``--model FILE`` (repeatable) times such a CellML file instead of
the cases below (dt 0.05 ms, float32, the ORd stimulus), and the rows name the chains' sizes.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from app.compute.device import backend_context, cuda_status, resolve_backend  # noqa: E402
from app.sims.cardiac.bench import PRESET, make_cfg, run_once  # noqa: E402
from app.sims.cardiac.config import ModelSettings  # noqa: E402
from app.sims.cardiac.model import load_model  # noqa: E402
from app.sims.common.simulation import load_run_config  # noqa: E402

CASES = [  # model file, dt (ms), stimulus amplitude (uA/uF), duration (ms), precision, lookup tables
    ("courtemanche_ramirez_nattel_1998", 0.05, -20.0, 2.0, "float32", False),
    ("ohara_rudy_2011_endo", 0.01, -80.0, 1.0, "float32", False),
    ("ohara_rudy_2011_endo", 0.01, -80.0, 1.0, "float32", True),
    ("maleckar_model_2009", 0.05, -40.0, 2.0, "float32", False),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--level", type=int, default=7, help="sphere level (10·4^level + 2 cells)")
    ap.add_argument("--t-end", type=float, default=50.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--model", action="append", default=[], help="a CellML file to time instead of the cases")
    args = ap.parse_args()
    cases = [(str(Path(f).resolve()), 0.05, -80.0, 1.0, "float32", False) for f in args.model] or CASES
    backend, reason = resolve_backend(args.backend)
    _, base = load_run_config(PRESET)
    device = cuda_status().devices[0].name if backend == "cuda" else "cpu"
    print(f"# {device}: level-{args.level} sphere, {args.t_end:g} ms ({reason})")
    rows = []
    with backend_context(backend):
        for name, dt, amplitude, duration, precision, lookup in cases:
            stimuli = [dataclasses.replace(st, amplitude=amplitude, duration=duration) for st in base.protocol.stimuli]
            cfg = dataclasses.replace(base, model=ModelSettings(file=name),
                                      protocol=dataclasses.replace(base.protocol, stimuli=stimuli))
            seconds: dict[str, list[float]] = {"rlfe": [], "grl1": []}
            steps = 0
            for method in seconds:
                run_once(make_cfg(cfg, args.level, 2.0, method=method, dt=dt, precision=precision,
                                  lookup_tables=lookup), backend)            # compile
            for _ in range(args.repeats):
                for method in seconds:
                    run = make_cfg(cfg, args.level, args.t_end, method=method, dt=dt, precision=precision,
                                   lookup_tables=lookup)
                    _, summary = run_once(run, backend)
                    seconds[method].append(summary["wall_seconds"])
                    steps = summary["steps_accepted"]
            cells = 10 * 4 ** args.level + 2
            best = {m: min(v) for m, v in seconds.items()}
            chains = [len(c) for c in load_model(name).imported.chains]
            row = {"model": Path(name).stem, "chains": chains, "dt": dt, "precision": precision,
                   "lookup_tables": lookup, "cells": cells,
                   "steps": steps, "device": device, "seconds": seconds,
                   "ns_per_cell_step": {m: 1e9 * s / (cells * steps) for m, s in best.items()},
                   "grl1_over_rlfe": best["grl1"] / best["rlfe"]}
            rows.append(row)
            print(f"{Path(name).stem:34s} chains {chains} {precision} tables {'on ' if lookup else 'off'} "
                  f"dt {dt:g}: RLFE "
                  f"{row['ns_per_cell_step']['rlfe']:.3g} ns, GRL1 {row['ns_per_cell_step']['grl1']:.3g} ns "
                  f"per cell-step (best of {args.repeats}): GRL1/RLFE {row['grl1_over_rlfe']:.2f}", flush=True)
    if args.out:
        args.out.write_text(json.dumps({"device": device, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
