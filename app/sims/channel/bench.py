"""``python -m app bench channel``: seconds per GA generation for Model B on the paper's
12,500-point protocols (GA operators included), on CUDA for 11,200 / 112,000 / 1,120,000
individuals, the compiled CPU engine on 1..all threads (``--backend cpu``) and the NumPy
reference for a small population; with ``--fig7`` also the paper's
Fig. 7 experiment (generations and wall time to a chi^2 threshold against population size)."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path


from app.compute.device import backend_context, cuda_status, resolve_backend
from app.sims.channel.config import load_config
from app.sims.channel.simulation import ChannelSimulation
from app.sims.common.config import load_yaml
from app.sims.common.bench_record import save_bench
from app.sims.common.simulation import PRESETS

PRESET = PRESETS / "channel" / "00-model-b-surrogate.yaml"
FLOPS_PER_SAMPLE = 2 * 9 + 5     # 3x3 matrix-vector product, open sum, drive, residual square


def config(population: int, generations: int, seed: int = 2012, threshold: float = 0.0):
    cfg = load_config(load_yaml(PRESET))
    return replace(cfg, ga=replace(cfg.ga, population=population, generations=generations,
                                   seed=seed, chi2_threshold=threshold),
                   fit=replace(cfg.fit, uncertainty=False))     # GA generations only


def time_generations(backend: str, population: int, generations: int) -> dict:
    """Seconds per generation after one warm-up generation (breed + evaluate + scores back)."""
    sim = ChannelSimulation.from_config(config(population, generations + 1), backend)
    sim.advance()
    start, cpu = time.perf_counter(), time.process_time()
    while not sim.finished:
        sim.advance()
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    points = sim.protocol.n_points
    sim.close()
    per_gen = elapsed / generations
    return {"engine": backend, "population": population, "generations": generations,
            "seconds_per_generation": per_gen, "generations_per_second": 1 / per_gen,
            "individual_samples_per_second": population * points / per_gen, "data_points": points,
            "cpu_seconds_per_generation": cpu / generations}


def fig7(populations: list[int], threshold: float, max_generations: int, max_seconds: float) -> list[dict]:
    """Best chi^2 against generation and wall time until the threshold (paper: 0.6)."""
    rows = []
    for population in populations:
        sim = ChannelSimulation.from_config(config(population, max_generations, threshold=threshold), "cuda")
        start = time.perf_counter()
        while not sim.finished and time.perf_counter() - start < max_seconds:
            sim.advance()
        rows.append({"population": population, "generations": sim.generation,
                     "reached": bool(sim.best_chi2 <= threshold), "wall_seconds": sim.wall,
                     "best_chi2": sim.best_history, "wall": sim.wall_history})
        sim.close()
        print(f"  population {population:>9,}: {'reached' if rows[-1]['reached'] else 'not reached'} "
              f"chi2 {sim.best_chi2:.3g} after {sim.generation} generations, {sim.wall:.2f} s", flush=True)
    return rows


def compiled_cpu_rows(results: dict, quick: bool) -> None:
    """The compiled engine on 1, 2, 4, ... threads (GA operators included), its compile time
    (empty cache, in a fresh interpreter, and from the on-disk cache) and the scaling."""
    from app.compute.cpu_threads import compile_seconds, cpu_description, thread_counts, threads
    from app.sims.channel.compiled import warm_up

    results["compile"] = compile_seconds("app.sims.channel.compiled:warm_up")
    warm_up()
    results["cpu"] = cpu_description()
    rates, busy = {}, {}
    for n in thread_counts():
        with threads(n):
            case = time_generations("cpu", (256 if quick else 2048) * n, 2 if quick else 3)
        # busy: the process's CPU time over wall time x threads; below 1 where threads wait
        # (serial parts, imbalance), while a per-thread rate falling at busy ~1 means slower cores
        case["busy"] = busy[n] = case["cpu_seconds_per_generation"] / case["seconds_per_generation"] / n
        results["cases"].append({**case, "threads": n})
        rates[n] = case["individual_samples_per_second"]
    top = max(rates)
    efficiency = rates[top] / rates[1] / top
    results["scaling"] = {"threads": top, "speedup": rates[top] / rates[1], "efficiency": efficiency,
                          "busy": busy[top], "busy_thread_speed": efficiency * busy[1] / busy[top]}


def main(backend: str = "auto", out_dir: Path = Path("bench-results"), quick: bool = False,
         fig7_run: bool = False) -> int:
    resolved, reason = resolve_backend(backend)
    print(f"# Channel GA benchmark: Model B, paper protocols (12,500 points)\n# {reason}")
    results: dict = {"device": None, "cases": []}
    if resolved == "cuda":
        results["device"] = cuda_status().devices[0].name
        sizes = [1120] if quick else [11_200, 112_000, 1_120_000]
        with backend_context("cuda"):
            time_generations("cuda", 1120, 1)       # compile and load the module
            for size in sizes:
                results["cases"].append(time_generations("cuda", size, 3 if quick else 10))
            if fig7_run:
                print("\nFig. 7: Model B surrogate data, chi^2 threshold 0.6 pA^2")
                pops = [112, 1120, 11_200, 112_000, 1_120_000]
                results["fig7"] = fig7(pops, 0.6, 10_000, 40.0)
    if resolved != "cuda":
        compiled_cpu_rows(results, quick)
    results["cases"].append({**time_generations("cpu-reference", 56 if quick else 112, 2 if quick else 3),
                             "threads": 1})
    if "cpu" in results:
        print(f"# {results['cpu']}")
    print(f"\n{'engine':14s} {'threads':>7s} {'population':>10s} {'s/generation':>13s} {'gen/s':>8s} "
          f"{'ind*samples/s':>14s} {'per thread':>11s} {'floor s/gen':>12s} {'busy':>5s}")
    for c in results["cases"]:
        floor = c["population"] * c["data_points"] * FLOPS_PER_SAMPLE / 67e12
        c["fp32_floor_seconds"] = floor if c["engine"] == "cuda" else None
        threads = c.get("threads", 0)
        per = f"{c['individual_samples_per_second'] / threads:11.3e}" if threads else f"{'-':>11s}"
        print(f"{c['engine']:14s} {threads or '-':>7} {c['population']:10,d} {c['seconds_per_generation']:13.4f} "
              f"{c['generations_per_second']:8.2f} {c['individual_samples_per_second']:14.3e} {per} "
              f"{floor if c['engine'] == 'cuda' else float('nan'):12.4f} "
              f"{c['busy'] if 'busy' in c else float('nan'):5.2f}")
    if "compile" in results:
        print(f"\ncompiled engine: first use {results['compile']['cold_seconds']:.2f} s (empty cache), "
              f"{results['compile']['cached_seconds']:.3f} s from the on-disk cache")
        print(f"scaling 1 -> {results['scaling']['threads']} threads: {results['scaling']['speedup']:.2f}x "
              f"({results['scaling']['efficiency']:.2f} of linear; the threads busy "
              f"{results['scaling']['busy']:.2f} of the time, a busy thread at "
              f"{results['scaling']['busy_thread_speed']:.2f} of the one-thread speed)")
    out = save_bench("channel", results, out_dir)
    print(f"\nwrote {out}")
    return 0
