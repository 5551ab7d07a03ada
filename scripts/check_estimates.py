"""Estimate against actual for the shipped presets on the CPU (a benchmark, not a test).

    python scripts/check_estimates.py [--max-seconds 120] [--out estimates.json]

For each shipped preset: its estimate on the compiled CPU engine (warm: every engine is
compiled first, so no run pays a compile), the run headless, and actual / estimate. A preset
passes when the actual wall time lies within a factor of 2 of the estimate's middle; presets
whose estimate exceeds ``--max-seconds`` are listed as skipped, and those of a model class
never measured as 'no estimate'. Exit 1 when any run preset is off by more than 2x.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time

from app.sims.common.estimate import estimate_range, estimate_seconds
from app.sims.common.session import Session
from app.sims.common.simulation import DOMAINS, load_run_config, presets
from app.sims.common.warmup import has_compiled_engine, service


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-seconds", type=float, default=120.0)
    parser.add_argument("--domain", action="append", default=None)
    parser.add_argument("--out", default="estimates.json")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    rows, bad = [], 0
    for name in args.domain or list(DOMAINS):
        if has_compiled_engine(name):
            service().request(name)
            service().wait(name)
        for path in presets(name):
            _, cfg = load_run_config(path)
            middle = estimate_seconds(name, cfg, "cpu")
            row = {"preset": f"{name}/{path.stem}", "estimate_s": middle,
                   "range_s": estimate_range(name, cfg, "cpu")}
            if middle is None:
                row["result"] = "no estimate"
            elif middle > args.max_seconds:
                row["result"] = "skipped (longer than --max-seconds)"
            else:
                session = Session(DOMAINS[name], cfg, "cpu", handover=False)
                start = time.perf_counter()
                session.run()
                row["actual_s"] = time.perf_counter() - start
                row["ratio"] = row["actual_s"] / middle
                row["result"] = "ok" if 0.5 <= row["ratio"] <= 2.0 else "off by more than 2x"
                bad += row["result"] != "ok"
            rows.append(row)
            print(f"{row['preset']:50s} {row['result']:40s} estimate {middle or float('nan'):8.1f} s"
                  + (f", actual {row['actual_s']:8.1f} s, ratio {row['ratio']:.2f}" if "actual_s" in row else ""),
                  flush=True)
    with open(args.out, "w") as out:
        json.dump({"load_average": os.getloadavg(), "rows": rows}, out, indent=2)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
