"""``python -m app bench ssa``: decay-dimerization throughput on CUDA and on the CPU engine,
and the GPU histograms at t_end checked against the CPU engine's within the self-distance band."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np

from app.compute.device import backend_context, cuda_status, resolve_backend
from app.sims.common.output import save_json
from app.sims.common.simulation import PRESETS, load_run_config
from app.sims.ssa.simulation import SSASimulation
from app.sims.ssa.stats import DISTANCE_CONVENTION, common_histograms, distance, expected_self_distance, null_band

PRESET = PRESETS / "ssa" / "00-decay-dimerization.yaml"
PEER_T10 = {"S1": (2740.4, 53.0), "S2": (17593.8, 103.5), "S3": (12222.9, 96.4)}  # GillesPy2, 1000 runs
COMPARE_BINS = 10


def run_case(backend: str, realizations: int, algorithm: str = "direct", t_end: float = 10.0,
             seed: int = 2024) -> tuple[SSASimulation, dict]:
    """Run the dimer preset to t_end; return the finished simulation and its summary."""
    _, cfg = load_run_config(PRESET)
    cfg = dataclasses.replace(cfg, ensemble=dataclasses.replace(
        cfg.ensemble, realizations=realizations, algorithm=algorithm, t_end=t_end, seed=seed))
    sim = SSASimulation.from_config(cfg, backend)
    while not sim.finished:
        sim.advance()
    _, summary = sim.results()
    return sim, summary


def compare(gpu_final: np.ndarray, cpu_final: np.ndarray, species: tuple[str, ...]) -> list[dict]:
    """Histogram distance per species against the bootstrap 99% band of the same sizes."""
    rows = []
    for s, name in enumerate(species):
        ha, hb = common_histograms(gpu_final[:, s], cpu_final[:, s], COMPARE_BINS)
        pooled = (ha.counts + hb.counts) / (ha.total + hb.total)
        rows.append({"species": name, "distance": distance(ha.counts, hb.counts),
                     "expected_self_distance": expected_self_distance(pooled, ha.total, hb.total),
                     "band_99": null_band(pooled, ha.total, hb.total)})
    return rows


def main(backend: str = "auto", out_dir: Path = Path("bench-results"), quick: bool = False) -> int:
    resolved, reason = resolve_backend(backend)
    print(f"# SSA benchmark: decay-dimerization, t_end = 10, 101 samples\n# {reason}")
    gpu_sizes = [1 << 14] if quick else [1 << 16, 1 << 20]
    cpu_size = 16 if quick else 128
    t_end = 0.5 if quick else 10.0
    results: dict = {"device": None, "cases": [], "convention": DISTANCE_CONVENTION}
    gpu_final = None
    if resolved == "cuda":
        results["device"] = cuda_status().devices[0].name
        with backend_context("cuda"):
            run_case("cuda", 4096, t_end=0.1)          # warm-up: compile and load the module
            for algorithm in ("direct", "logdirect"):
                for r in gpu_sizes:
                    sim, summary = run_case("cuda", r, algorithm, t_end)
                    results["cases"].append({"engine": "cuda", **summary})
                    if algorithm == "direct" and r == gpu_sizes[-1]:
                        gpu_final = sim.final
                        results["gpu_moments"] = {n: (float(sim.mean[-1, i]), float(np.sqrt(sim.var[-1, i])))
                                                  for i, n in enumerate(sim.net.species)}
                    sim.close()
    start = time.perf_counter()
    sim, summary = run_case("cpu", cpu_size, "direct", t_end, seed=99)
    results["cases"].append({"engine": "cpu", **summary})
    if gpu_final is not None:
        results["comparison"] = compare(gpu_final, sim.final, sim.net.species)
    print(f"\n{'engine':6s} {'algorithm':10s} {'realizations':>12s} {'reactions':>14s} "
          f"{'wall s':>8s} {'reactions/s':>12s}")
    for c in results["cases"]:
        print(f"{c['engine']:6s} {c['algorithm']:10s} {c['realizations']:12d} {c['reactions_fired']:14d} "
              f"{c['wall_seconds']:8.3f} {c['reactions_per_second']:12.4g}")
    if "gpu_moments" in results:
        print(f"\nt = {t_end:g} mean (SD), CUDA {gpu_sizes[-1]} realizations vs GillesPy2 1000 runs:")
        for name, (m, sd) in results["gpu_moments"].items():
            peer = PEER_T10.get(name)
            print(f"  {name}: {m:.1f} ({sd:.1f})" + (f"   peer {peer[0]} ({peer[1]})" if peer and not quick else ""))
    if "comparison" in results:
        print(f"\nCUDA vs CPU histograms at t = {t_end:g}, {COMPARE_BINS} common bins, {DISTANCE_CONVENTION}:")
        for row in results["comparison"]:
            verdict = "inside" if row["distance"] <= row["band_99"] else "OUTSIDE"
            print(f"  {row['species']}: D = {row['distance']:.4f}, expected self-distance "
                  f"{row['expected_self_distance']:.4f}, 99% band {row['band_99']:.4f} -> {verdict}")
    out = save_json(Path(out_dir) / "ssa.json", results)
    print(f"\nwrote {out} ({time.perf_counter() - start:.0f} s for the CPU part)")
    return 0
