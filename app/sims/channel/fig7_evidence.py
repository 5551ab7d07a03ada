"""``python -m app.sims.channel.fig7_evidence [--backend cpu|cuda] [--quick]``: why our larger
populations need more generations to chi^2 <= 0.6 than the paper's Fig. 7 (Model B, paper
protocols, noise-free surrogate data).

Three measurements:

1. ``scale``: what chi^2 = 0.6 pA^2 means here: for each parameter alone, the relative error
   that raises chi^2 from 0 to 0.6 (Gauss-Newton: chi^2 = d^T J^T J d, noise-free data).
2. ``pool``: the GA's gene pool. One-point crossover only exchanges whole genes and the
   paper's mutation redraws a gene uniformly over its whole range, so every gene value an
   individual can carry is an initial value or a uniform redraw: the pool's spacing near the
   truth (~ range / N) bounds the precision. For each population size: chi^2 of the best
   initial individual, and of the ideal assembly (every gene at the pool value nearest the
   truth): what crossover could reach without luck from mutation.
3. ``ga``: generations to chi^2 thresholds for population sizes x operators (the paper's;
   crossover 0.8; the creep mutation that makes local steps) x seeds, and the fraction of
   distinct values per gene in the population (takeover: how fast the pool collapses).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from app.compute.device import backend_context, resolve_backend
from app.sims.channel import ga
from app.sims.channel.bench import PRESET
from app.sims.channel.config import load_config
from app.sims.channel.optimizers import Box, LevenbergMarquardt
from app.sims.channel.simulation import ChannelSimulation
from app.sims.common.config import load_yaml
from app.sims.common.output import save_json

THRESHOLDS = (60.0, 6.0, 0.6)   # 0.6 with currents 10x, sqrt(10)x and 1x ours
VARIANTS = {"paper": {}, "crossover 0.8": {"crossover": 0.8},
            "creep": {"creep": 0.02, "creep_fraction": 0.9, "mutation": 0.05}}


def base_config(dt: float | None):
    cfg = load_config(load_yaml(PRESET))
    if dt is not None:
        cfg = replace(cfg, protocols=[replace(p, dt=dt) for p in cfg.protocols])
    return replace(cfg, fit=replace(cfg.fit, uncertainty=False))


def chi2_scale(sim: ChannelSimulation) -> dict:
    """Relative error of each parameter alone that gives chi^2 = 0.6, and chi^2 at 1 % error."""
    true = sim.model.true_values
    lm = LevenbergMarquardt(sim.box, sim.exact.simulate, sim.target, sim.weights, true)
    j = lm.jacobian(lm.u) / sim.box.width[None, :]
    curvature = np.einsum("np,np->p", j, j)            # chi^2 per (absolute error)^2
    at_06 = np.sqrt(0.6 / curvature) / np.abs(true)
    at_1pct = curvature * (0.01 * true) ** 2
    return {n: {"relative_error_for_chi2_0.6": float(a), "chi2_at_1pct": float(b)}
            for n, a, b in zip(sim.model.param_names, at_06, at_1pct)}


def pool_floor(sim: ChannelSimulation, sizes: list[int], seeds: list[int]) -> list[dict]:
    """chi^2 of the best initial individual and of the ideal assembly of pool values."""
    m, true = sim.model, sim.model.true_values
    rows = []
    for n in sizes:
        best, assembled = [], []
        for seed in seeds:
            pop = ga.initial_population(seed, n, m.lower, m.upper)
            nearest = pop[np.argmin(np.abs(pop - true), axis=0), np.arange(m.n_params)]
            scores = sim.engine.evaluate_params(np.vstack([nearest[None], pop[:min(n, 20000)]]))
            assembled.append(scores[0])
            best.append(scores[1:].min())
            if n > 20000:          # the best of the rest, in chunks
                for lo in range(20000, n, 20000):
                    best[-1] = min(best[-1], sim.engine.evaluate_params(pop[lo:lo + 20000]).min())
        rows.append({"population": n, "best_initial_chi2": float(np.median(best)),
                     "assembled_chi2": float(np.median(assembled)),
                     "pool_spacing": float(np.median(np.abs(nearest - true) / (m.upper - m.lower)))})
        print(f"  pool N={n:>9,}: best initial chi2 {rows[-1]['best_initial_chi2']:10.4g}   ideal assembly "
              f"{rows[-1]['assembled_chi2']:10.4g}", flush=True)
    return rows


def distinct_fraction(population: np.ndarray) -> float:
    """Median over genes of the number of distinct values in the population, over its size:
    1 for a fresh population, ~1/N once one individual's descendants have taken over."""
    return float(np.median([len(np.unique(population[:, k])) for k in range(population.shape[1])])
                 / len(population))


def ga_runs(cfg, backend: str, sizes: list[int], seeds: list[int], generations: int,
            max_seconds: float) -> list[dict]:
    rows = []
    for name, ops in VARIANTS.items():
        for n in sizes:
            for seed in seeds:
                run = replace(cfg, ga=replace(cfg.ga, population=n, generations=generations, seed=seed,
                                              chi2_threshold=THRESHOLDS[-1], **ops))
                sim = ChannelSimulation(run, backend)
                start = time.perf_counter()
                diversity = {}
                while sim.phase == "search" and time.perf_counter() - start < max_seconds:
                    if sim.generation in (0, 5, 10, 20, 50, 100, 200, 500, 1000):
                        diversity[sim.generation] = distinct_fraction(sim.engine.state()["population"])
                    sim.advance()
                history = np.array(sim.best_history)
                reached = {f"{t:g}": (int(np.argmax(history <= t)) if (history <= t).any() else None)
                           for t in THRESHOLDS}
                rows.append({"variant": name, "population": n, "seed": seed, "generations": sim.generation,
                             "final_chi2": float(history[-1]), "generations_to": reached,
                             "distinct_gene_values": diversity, "wall_seconds": sim.wall})
                sim.close()
                print(f"  {name:14s} N={n:>9,} seed {seed}: chi2 {history[-1]:9.4g} after {sim.generation:5d} "
                      f"generations; generations to {', '.join(f'{k}: {v}' for k, v in reached.items())}; "
                      f"distinct gene values {', '.join(f'g{k}: {v:.3g}' for k, v in diversity.items())}",
                      flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="evidence for the Fig. 7 difference")
    parser.add_argument("--backend", default="auto")
    parser.add_argument("--quick", action="store_true", help="CPU-sized: dt 0.5 ms, small populations")
    parser.add_argument("--dt", type=float, default=None, help="sampling interval (ms) of both families")
    parser.add_argument("--generations", type=int, default=None)
    parser.add_argument("--seconds", type=float, default=None, help="time limit of one GA run")
    parser.add_argument("--out", default="bench-results")
    args = parser.parse_args(argv)
    backend, reason = resolve_backend(args.backend)
    print(f"# Fig. 7 evidence: Model B, paper protocols\n# {reason}")
    quick = args.quick or backend != "cuda"
    cfg = base_config(args.dt or (0.5 if quick else None))
    results: dict = {"backend": backend, "data_points": None}
    with backend_context(backend):
        sim = ChannelSimulation(replace(cfg, ga=replace(cfg.ga, population=2, generations=1)), backend)
        results["data_points"] = int(sim.protocol.n_points)
        results["scale"] = chi2_scale(sim)
        print("chi2 = 0.6 pA^2 alone per parameter (relative error):",
              ", ".join(f"{k} {v['relative_error_for_chi2_0.6']:.2g}" for k, v in results["scale"].items()))
        sizes = [112, 1120, 11_200] if quick else [112, 1120, 11_200, 112_000, 1_120_000]
        results["pool"] = pool_floor(sim, sizes, [1, 2, 3])
        sim.close()
        ga_sizes = [1120, 11_200] if quick else [11_200, 112_000, 1_120_000]
        seeds = [1] if quick else [1, 2]
        results["ga"] = ga_runs(cfg, backend, ga_sizes, seeds, args.generations or (300 if quick else 2000),
                                args.seconds or (40.0 if quick else 20.0))
    out = save_json(Path(args.out) / "channel-fig7-evidence.json", results)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
