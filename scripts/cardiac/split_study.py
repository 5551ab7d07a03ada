"""Operator splitting (``solver.split_dt``) against the unsplit solver: the N-version slab's
activation times (Niederer et al. 2011) and a planar wave's conduction velocity in a cable, on
the CPU; writes the ``cardiac-split`` benchmark record (docs/user-guide/meshes.md shows it).

    python scripts/cardiac/split_study.py [--dx 0.5 0.2] [--out benchmarks/cpu-2core]
           [--folder runs/split-study] [--quick]
    python scripts/cardiac/split_study.py --crn [--out benchmarks/cpu-2core]

Each N-version run is compared with the unsplit Rush–Larsen forward Euler run at dt 0.005 ms on
the same mesh (the reference) and with the eleven codes' consensus at that dx (mean ± SD,
:data:`app.sims.cardiac.nversion.CONSENSUS`). The cable: ten Tusscher 2006 epicardial cells on
a 10 mm line at the slab's along-fibre diffusivity σ_l/(χ Cm), the velocity fitted to the
activation times between 3 and 7 mm; the reference the unsplit run at dt 0.0025 ms.
``--crn``: the same for CRN cells at the conductivity and spacing of ``bench cardiac --mesh``'s
shell (record ``cardiac-split-crn``).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from app.sims.cardiac import bench_mesh, nversion  # noqa: E402
from app.sims.cardiac.fem import Tissue  # noqa: E402
from app.sims.common.bench_record import save_bench  # noqa: E402

REFERENCE_DT = 0.005
CABLE_REFERENCE_DT = 0.0025
# (split, split_dt, cell dt); split "" = unsplit
RUNS = [("", 0.0, 0.02), ("godunov", 0.05, 0.025), ("strang", 0.05, 0.025),
        ("godunov", 0.1, 0.02), ("strang", 0.1, 0.02), ("godunov", 0.1, 0.025), ("strang", 0.1, 0.025),
        ("godunov", 0.2, 0.02), ("strang", 0.2, 0.02), ("godunov", 0.2, 0.04), ("strang", 0.2, 0.04),
        ("godunov", 0.2, 0.05), ("strang", 0.2, 0.05), ("strang", 0.3, 0.05), ("strang", 0.4, 0.05)]
CABLE_DX = (0.1, 0.2, 0.5)
# ten Tusscher 2006 epi at the slab's along-fibre diffusivity, 10 mm, the velocity over 3-7 mm
TT_CABLE = {"model": "ten_tusscher_model_2006_epi", "diffusivity": Tissue().diffusivity(nversion.SIGMA_L),
            "length_mm": 10.0, "fit_mm": (3.0, 7.0), "t_end": 40.0, "amplitude": nversion.STIM_AMPLITUDE,
            "stimulus_mm": 1.0}
# CRN at the 10^6-node shell's along-fibre conductivity (bench cardiac --mesh), 20 mm, 6-14 mm,
# at that mesh's mean edge (0.6 mm) and half of it
CRN_CABLE = {"model": "courtemanche_ramirez_nattel_1998",
             "diffusivity": Tissue().diffusivity(bench_mesh.CONDUCTIVITY["along"]),
             "length_mm": 20.0, "fit_mm": (6.0, 14.0), "t_end": 60.0, "amplitude": -80.0, "stimulus_mm": 1.5}
CRN_DX = (0.6, 0.3)
CRN_RUNS = [("", 0.0, 0.02), ("strang", 0.2, 0.04), ("strang", 0.3, 0.05), ("strang", 0.4, 0.05)]


def label(split: str, split_dt: float, dt: float) -> str:
    return f"{split} Δt_s {split_dt:g}, dt {dt:g}" if split else f"unsplit dt {dt:g}"


def nversion_rows(dx: float, folder: Path, runs: list) -> dict:
    t_end = 170.0 if dx >= 0.5 else 80.0
    consensus = nversion.CONSENSUS[round(dx, 3)]
    ref = nversion.run(folder, dx, REFERENCE_DT, t_end)
    rows = []
    for split, split_dt, dt in [("", 0.0, REFERENCE_DT), *runs]:
        r = ref if dt == REFERENCE_DT and not split else nversion.run(folder, dx, dt, t_end, split_dt=split_dt,
                                                                     split=split or "godunov")
        act = r["activation_ms"]
        rows.append({"run": label(split, split_dt, dt), "split": split, "split_dt_ms": split_dt, "dt_ms": dt,
                     "activation_ms": act, "wall_seconds": r["wall_seconds"], "stopped": r["stopped"],
                     "max_abs_error_ms": max(abs(act[k] - ref["activation_ms"][k]) for k in act),
                     "max_consensus_sd": max(abs(act[k] - m) / sd for k, (m, sd) in consensus.items())})
        print(f"dx {dx:g}: {rows[-1]['run']:28s} P8 {act['P8']:7.2f} ms, max |Δ| vs reference "
              f"{rows[-1]['max_abs_error_ms']:.2f} ms, max {rows[-1]['max_consensus_sd']:.2f} SD from the consensus, "
              f"{r['wall_seconds']:.0f} s", flush=True)
    return {"dx_mm": dx, "nodes": ref["nodes"], "t_end_ms": t_end, "reference_dt_ms": REFERENCE_DT,
            "consensus": {k: list(v) for k, v in consensus.items()}, "rows": rows}


def cable_velocity(dx: float, dt: float, split_dt: float = 0.0, split: str = "godunov",
                   cable: dict | None = None) -> float:
    """A planar wave's velocity (mm/ms) in a cable (:data:`TT_CABLE` unless ``cable`` says otherwise)."""
    from app.sims.cardiac.config import load_config
    from app.sims.cardiac.simulation import CardiacSimulation
    from app.sims.common.config import parse_yaml
    c = cable or TT_CABLE
    nx = int(round(c["length_mm"] / dx)) + 1
    splitting = f", split_dt: {split_dt:g}, split: {split}" if split_dt > 0 else ""
    text = (f"domain: cardiac\nmesh: {{kind: sheet, nx: {nx}, ny: 1, dx_mm: {dx:g}}}\nD: {c['diffusivity']:.6f}\n"
            f"model: {{file: {c['model']}}}\n"
            f"protocol: {{t_end: {c['t_end']:g}, stimuli: [{{start: 0, duration: 2, amplitude: {c['amplitude']:.6f}, "
            f"region: {{kind: rect, x1: {c['stimulus_mm']:g}}}}}]}}\n"
            f"solver: {{method: rlfe, dt: {dt:g}, precision: float64{splitting}}}\n"
            "output: {random_probes: 0, probe_cells: [0], dt_save: 1.0, activation_threshold: 0.0}\n")
    sim = CardiacSimulation(load_config(parse_yaml(text, "<cable>")), "cpu")
    while not sim.finished:
        sim.advance()
    arrays, _ = sim.results()
    sim.close()
    at = arrays["activation_time"]
    x = np.arange(len(at)) * dx
    sel = (x >= c["fit_mm"][0]) & (x <= c["fit_mm"][1])
    return float(np.polyfit(at[sel], x[sel], 1)[0])


def cable_rows(runs: list, cable: dict | None = None, dxs: tuple = CABLE_DX) -> list[dict]:
    out = []
    for dx in dxs:
        ref = cable_velocity(dx, CABLE_REFERENCE_DT, cable=cable)
        rows = []
        for split, split_dt, dt in runs:
            cv = cable_velocity(dx, dt, split_dt, split or "godunov", cable)
            rows.append({"run": label(split, split_dt, dt), "split": split, "split_dt_ms": split_dt, "dt_ms": dt,
                         "cv_mm_per_ms": cv, "relative_error": cv / ref - 1.0})
            print(f"cable dx {dx:g}: {rows[-1]['run']:28s} CV {cv:.4f} mm/ms ({100 * (cv / ref - 1):+.2f} % "
                  f"against {ref:.4f} at dt {CABLE_REFERENCE_DT:g})", flush=True)
        out.append({"dx_mm": dx, "reference_dt_ms": CABLE_REFERENCE_DT, "reference_cv_mm_per_ms": ref, "rows": rows})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dx", type=float, nargs="+", default=[0.5, 0.2])
    ap.add_argument("--out", default="benchmarks/cpu-2core")
    ap.add_argument("--folder", default="")
    ap.add_argument("--quick", action="store_true", help="the Δt_s 0.1 ms runs only")
    ap.add_argument("--crn", action="store_true",
                    help="only the CRN cable at the 10^6-node shell's conductivity and spacing (cardiac-split-crn)")
    args = ap.parse_args()
    if args.crn:
        path = save_bench("cardiac-split-crn", {
            "engine": "cpu (compiled), float64, Courtemanche-Ramirez-Nattel 1998, RLFE",
            "cable_description": "a 20 mm cable of CRN cells (the along-fibre conductivity of bench cardiac --mesh's "
                                 "shell, whose edges are 0.62 mm on average), the velocity over 6-14 mm",
            "cable": cable_rows(CRN_RUNS, CRN_CABLE, CRN_DX)}, args.out)
        print(f"wrote {path}")
        return 0
    runs = [r for r in RUNS if not args.quick or r[1] in (0.0, 0.1)]
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(args.folder or tmp)
        cable = cable_rows(runs)
        slabs = []
        for dx in args.dx:
            folder = base / f"dx{dx:g}"
            folder.mkdir(parents=True, exist_ok=True)
            slabs.append(nversion_rows(dx, folder, runs))
    path = save_bench("cardiac-split", {"engine": "cpu (compiled), float64, ten Tusscher 2006 epi, RLFE",
                                        "cable": cable, "nversion": slabs}, args.out)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
