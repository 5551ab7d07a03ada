"""What 16-bit operator weights would cost in accuracy (a lever for the mesh bench's memory
traffic, docs/performance/cardiac.md): the N-version slab (Niederer et al. 2011) at the split
the 10^6-node bench runs (Strang, Δt_s 0.2 ms, cell step 0.04 ms, float32) on the CPU engine,
with the operator's weights as assembled (float64, float32 in the run) and rounded to IEEE half
precision and to bfloat16; activation times at P1–P9 against the unrounded run and the codes' consensus.

    python scripts/cardiac/weights16_study.py [--dx 0.5 0.2] [--out benchmarks/cpu-2core]

Writes the ``cardiac-weights16`` benchmark record (a row per mesh and rounding).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from app.sims.cardiac import fem, nversion  # noqa: E402
from app.sims.common.bench_record import save_bench  # noqa: E402


def bfloat16(w: np.ndarray) -> np.ndarray:
    """Round to nearest even bfloat16 (the top 16 bits of a float32)."""
    bits = w.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return rounded.astype(np.uint32).view(np.float32).astype(np.float64)


ROUNDINGS = {"assembled weights": None, "float16 weights": lambda w: w.astype(np.float16).astype(np.float64),
             "bfloat16 weights": bfloat16}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dx", type=float, nargs="+", default=[0.5, 0.2])
    ap.add_argument("--out", default="benchmarks/cpu-2core")
    args = ap.parse_args()
    assemble = fem.operator_arrays
    rows = []
    for dx in args.dx:
        t_end = 170.0 if dx >= 0.5 else 80.0
        consensus = nversion.CONSENSUS[round(dx, 3)]
        base = None
        for name, rounding in ROUNDINGS.items():
            def rounded(raw, tissue, rounding=rounding):
                nbr, w = assemble(raw, tissue)
                if rounding is not None:
                    small = np.abs(w[w != 0]).min()
                    print(f"  weights {np.abs(w[w != 0]).min():.3g}..{np.abs(w).max():.3g} 1/ms; "
                          f"largest relative rounding {np.max(np.abs(rounding(w) - w) / np.where(w, np.abs(w), 1)):.2e}"
                          f"{' (subnormal in float16)' if small < 6.1e-5 else ''}", flush=True)
                    w = rounding(w)
                return nbr, w
            fem.operator_arrays = rounded
            fem._cached_mesh.cache_clear()
            with tempfile.TemporaryDirectory() as tmp:
                r = nversion.run(tmp, dx, 0.04, t_end, precision="float32", split_dt=0.2, split="strang")
            act = r["activation_ms"]
            base = base or act
            delta = max(abs(act[k] - base[k]) for k in act)
            sd = max(abs(act[k] - m) / s for k, (m, s) in consensus.items())
            points = {k: round(act[k], 3) for k in ("P2", "P5", "P8", "P9")}
            rows.append({"dx_mm": dx, "weights": name.split()[0], **points,
                         "max_delta_ms": round(delta, 3), "max_consensus_sd": round(sd, 2)})
            print(f"dx {dx:g} {name:17s} P2 {act['P2']:7.3f} P5 {act['P5']:7.3f} P8 {act['P8']:7.3f} "
                  f"P9 {act['P9']:7.3f} ms; max |Δ| {delta:.3f} ms against the assembled weights; "
                  f"{sd:.2f} SD from the consensus; {r['wall_seconds']:.0f} s", flush=True)
    fem.operator_arrays = assemble
    run = "N-version slab, ten Tusscher 2006 epi, RLFE, Strang Δt_s 0.2 ms, cell step 0.04 ms, float32, CPU engine"
    print(f"wrote {save_bench('cardiac-weights16', {'run': run, 'rows': rows}, Path(args.out))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
