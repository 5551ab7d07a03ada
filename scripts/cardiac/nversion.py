"""Run the N-version benchmark slab (Niederer et al. 2011) at the given spacings and print the
activation times at P1–P9 next to the eleven codes' consensus (mean ± SD) for that spacing.

    python scripts/cardiac/nversion.py --dx 0.5 0.2 [--dt 0.01] [--backend cpu|cuda]
           [--folder runs/nversion] [--out nversion.json]

dx 0.1 mm is 442,000 nodes: a GPU run (``--backend cuda``), about a minute of assembly on the host.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from app.sims.cardiac import nversion  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dx", type=float, nargs="+", default=[0.5, 0.2])
    ap.add_argument("--dt", type=float, default=0.01)
    ap.add_argument("--t-end", type=float, default=0.0, help="0: 170 ms at dx 0.5, else 80 ms")
    ap.add_argument("--backend", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--precision", default="float64")
    ap.add_argument("--folder", default="runs/nversion")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    rows = []
    for dx in args.dx:
        folder = Path(args.folder) / f"dx{dx:g}"
        folder.mkdir(parents=True, exist_ok=True)
        t_end = args.t_end or (170.0 if dx >= 0.5 else 80.0)
        if args.backend == "cuda":
            from app.compute.device import backend_context
            with backend_context("cuda"):
                r = nversion.run(folder, dx, args.dt, t_end, "cuda", args.precision)
        else:
            r = nversion.run(folder, dx, args.dt, t_end, "cpu", args.precision)
        rows.append(r)
        ref = nversion.CONSENSUS.get(round(dx, 3), {})
        print(f"dx {dx:g} mm, dt {args.dt:g} ms, {r['nodes']:,} nodes, {args.backend}, "
              f"{r['wall_seconds']:.1f} s")
        for k, v in r["activation_ms"].items():
            m = ref.get(k)
            tail = f"   consensus {m[0]:7.2f} ± {m[1]:5.2f}  ({(v - m[0]) / m[1]:+.2f} SD)" if m else ""
            print(f"  {k}: {v:8.2f} ms{tail}")
        sys.stdout.flush()
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
