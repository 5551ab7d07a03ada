"""What 16-bit gate states would cost in accuracy (a lever for the mesh bench's memory traffic,
docs/performance/cardiac.md): the CUDA split step keeps a node's states in registers over its
cell substeps and stores them once per split step, so storing the Rush–Larsen gates in 16 bits
rounds them once per split step. This runs the N-version slab (Niederer et al. 2011) at the
split the 10^6-node bench runs (Strang, Δt_s 0.2 ms, cell step 0.04 ms, float32) on the CPU
engine with the gates (the states of the model's ``..._gate`` components: probabilities in
[0, 1]) rounded at the end of every split step, and compares the activation
times at P1–P9 with the unrounded run and the codes' consensus. Activation does not see the
slow gates, which set the repolarisation: a strand of 40 nodes (0.25 mm apart) of each of the
N-version model and the mesh bench's CRN runs one beat the same way, and its APD90 is compared
with the unrounded run's. Roundings:

- ``unorm16``: to the nearest k/65535 (a uniform 1.5e-5 grid on [0, 1]);
- ``unorm16-stochastic``: to k/65535 below or above with the probability that keeps the mean
  (no drift where a slow gate's change per step is below the grid);
- ``float16``: to the nearest IEEE half (2^-11 apart just below 1).

    python scripts/cardiac/gates16_study.py [--dx 0.5 0.2] [--strand-ms 500] [--out benchmarks/cpu-2core]

Writes the ``cardiac-gates16`` benchmark record (a row per mesh and rounding) and
``cardiac-gates16-strand`` (a row per model and rounding).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from app.sims.cardiac import nversion  # noqa: E402
from app.sims.cardiac.config import ModelSettings  # noqa: E402
from app.sims.cardiac.model import config_model  # noqa: E402
from app.sims.cardiac.engine import CpuTissue  # noqa: E402
from app.sims.common.bench_record import save_bench  # noqa: E402

UNORM = 65535.0


def unorm16(g: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return np.round(np.clip(g, 0.0, 1.0) * UNORM) / UNORM


def unorm16_stochastic(g: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return np.floor(np.clip(g, 0.0, 1.0) * UNORM + rng.random(g.shape)) / UNORM


def float16(g: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return g.astype(np.float16)


ROUNDINGS = {"float32": None, "unorm16": unorm16, "unorm16-stochastic": unorm16_stochastic, "float16": float16}
STRAND = """domain: cardiac
mesh: {{kind: sheet, nx: 40, ny: 1, dx_mm: 0.25}}
model: {{file: {model}}}
protocol: {{t_end: {t_end:g}, stimuli: [{{start: 1, duration: 2, amplitude: -60,
  region: {{kind: cells, cells: [0, 1]}}}}]}}
solver: {{method: rlfe, dt: 0.04, precision: float32, split_dt: 0.2, split: strang}}
output: {{random_probes: 0, probe_cells: [20], dt_save: 1.0, singularity_delay: 0}}
"""
STRAND_MODELS = ("ten_tusscher_model_2006_epi", "courtemanche_ramirez_nattel_1998")


def bounded_gates(model) -> np.ndarray:
    """State rows of the model's gates that are probabilities (a CellML ``..._gate`` component):
    a state the importer steps by Rush–Larsen because its rate is linear in it need not lie in
    [0, 1] (CRN's Ca_up, in mM)."""
    return np.array([model.n_nongating + i for i, name in enumerate(model.gates)
                     if name.split(".")[0].endswith("_gate")], np.int64)


def with_rounding(name: str, run, *args, **kwargs):
    """``run(*args, **kwargs)`` with the gates (:func:`bounded_gates`) rounded by ``name`` at the
    end of every split step."""
    split_step = CpuTissue._split_step
    rounding, rng = ROUNDINGS[name], np.random.default_rng(2026)

    def rounded(self):
        y = split_step(self)
        if rounding is not None:
            rows = bounded_gates(self.p.model)
            y[rows] = rounding(y[rows], rng).astype(y.dtype)
        return y
    CpuTissue._split_step = rounded
    try:
        return run(*args, **kwargs)
    finally:
        CpuTissue._split_step = split_step


def strand_apd90(model: str, t_end: float) -> np.ndarray:
    """APD90 (ms) of the strand's first beat at every node."""
    from app.sims.cardiac.config import load_config
    from app.sims.cardiac.simulation import CardiacSimulation
    from app.sims.common.config import parse_yaml
    cfg = load_config(parse_yaml(STRAND.format(model=model, t_end=t_end), "strand.yaml"))
    sim = CardiacSimulation(cfg, "cpu")
    try:
        while not sim.finished:
            sim.advance()
        return np.asarray(sim.results()[0]["apd90"], float)
    finally:
        sim.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dx", type=float, nargs="*", default=[0.5, 0.2])
    ap.add_argument("--strand-ms", type=float, default=500.0, help="the strands' run length; 0: none")
    ap.add_argument("--roundings", nargs="+", default=list(ROUNDINGS), choices=list(ROUNDINGS))
    ap.add_argument("--out", default="benchmarks/cpu-2core")
    args = ap.parse_args()
    rows = []
    for dx in args.dx:
        t_end = 170.0 if dx >= 0.5 else 80.0
        consensus = nversion.CONSENSUS[round(dx, 3)]
        base = None
        for name in args.roundings:
            with tempfile.TemporaryDirectory() as tmp:
                r = with_rounding(name, nversion.run, tmp, dx, 0.04, t_end, precision="float32",
                                  split_dt=0.2, split="strang")
            act = r["activation_ms"]
            base = base or act
            delta = max(abs(act[k] - base[k]) for k in act)
            sd = max(abs(act[k] - m) / s for k, (m, s) in consensus.items())
            points = {k: round(act[k], 3) for k in ("P2", "P5", "P8", "P9")}
            rows.append({"dx_mm": dx, "gates": name, **points,
                         "max_delta_ms": round(delta, 3), "max_consensus_sd": round(sd, 2)})
            print(f"dx {dx:g} {name:19s} P2 {act['P2']:7.3f} P5 {act['P5']:7.3f} P8 {act['P8']:7.3f} "
                  f"P9 {act['P9']:7.3f} ms; max |Δ| {delta:.3f} ms against float32 gates; "
                  f"{sd:.2f} SD from the consensus; {r['wall_seconds']:.0f} s", flush=True)
    strands = []
    for model in STRAND_MODELS if args.strand_ms > 0 else ():
        base_apd = None
        for name in args.roundings:
            apd = with_rounding(name, strand_apd90, model, args.strand_ms)
            base_apd = apd if base_apd is None else base_apd
            delta = float(np.nanmax(np.abs(apd - base_apd)))
            strands.append({"model": model, "gates": name, "rounded_states": len(bounded_gates(config_model(
                                ModelSettings(file=model)))), "apd90_mid_ms": round(float(apd[20]), 2),
                            "max_delta_apd90_ms": round(delta, 3),
                            "repolarised": bool(np.isfinite(apd).all())})
            print(f"strand {model} {name:19s} APD90 at the middle {apd[20]:.2f} ms; max |Δ| {delta:.3f} ms "
                  "against float32 gates", flush=True)
    run = ("N-version slab, ten Tusscher 2006 epi, RLFE, Strang Δt_s 0.2 ms, cell step 0.04 ms, float32, "
           "CPU engine; the gates rounded at the end of every split step")
    strand = ("strands of 40 nodes 0.25 mm apart, one beat, the same split and rounding; APD90 of the first beat "
              "(results' apd90)")
    print(f"wrote {save_bench('cardiac-gates16', {'run': run, 'rows': rows}, Path(args.out))}")
    if strands:
        print(f"wrote {save_bench('cardiac-gates16-strand', {'run': strand, 'rows': strands}, Path(args.out))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
