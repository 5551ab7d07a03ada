"""``python -m app.sims.channel.bench_fit [--backend cpu|cuda|auto] [--quick]``: the issue's
generated-traces case (shipped preset ``recordings-two-state-k``: a two-state K channel from a
Radau integration, activation CSV at 0.1 ms and deactivation ABF at 0.02 ms, 49,932 points)
fitted by CMA-ES and Levenberg-Marquardt on each engine: the recovered-parameter table, the
chi^2 against the best achievable (a local fit started at the true values) and the wall time.
Targets: every parameter within 1 %, chi^2 within 1.5x, < 5 min on 2 CPU cores, < 30 s on an
H100. ``--quick``: the scaled-down case of the CI test."""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from app.compute.device import backend_context, resolve_backend
from app.sims.channel.config import load_config
from app.sims.channel.simulation import ChannelSimulation
from app.sims.common.config import load_yaml, parse_yaml
from app.sims.common.bench_record import save_bench
from app.sims.common.simulation import PRESETS

PRESET = PRESETS / "channel" / "recordings-two-state-k.yaml"


def best_achievable(sim: ChannelSimulation) -> tuple[float, np.ndarray]:
    """Levenberg-Marquardt from the true values to convergence (float64)."""
    lm = sim.make_refiner("lm", sim.model.true_values)
    for _ in range(200):
        lm.step()
        if lm.converged:
            break
    return lm.best, lm.best_params


def fit(cfg, backend: str) -> dict:
    start = time.perf_counter()
    sim = ChannelSimulation(cfg, backend)
    setup = time.perf_counter() - start
    while not sim.finished:
        sim.advance()
    total = time.perf_counter() - start
    row = {"backend": backend, "best_params": sim.best_params.tolist(), "chi2": sim.best_chi2,
           "generations": sim.generation, "refine_iterations": sim.refine_steps,
           "setup_seconds": setup, "wall_seconds": total, "evaluations": sim.evaluations,
           "ci_sd": sim.intervals.sd.tolist() if sim.intervals else None}
    chi2_best, _ = best_achievable(sim)
    row["chi2_best_achievable"] = chi2_best
    sim.close()
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="auto")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--population", type=int, default=None, help="CMA-ES population")
    parser.add_argument("--out", default="bench-results")
    args = parser.parse_args(argv)
    if args.quick:
        from app.sims.channel.reference import write_generated_case
        folder = Path(tempfile.mkdtemp())
        text, _ = write_generated_case(folder, 30.0, 20.0, 20.0)
        cfg = load_config(parse_yaml(text, str(folder / "fit.yaml")))
        cfg = replace(cfg, ga=replace(cfg.ga, population=24, generations=150))
    else:
        cfg = load_config(load_yaml(PRESET))
    if args.population:
        cfg = replace(cfg, ga=replace(cfg.ga, population=args.population))
    backends = ["cpu"]
    resolved, reason = resolve_backend(args.backend)
    print(f"# generated two-state K channel, CMA-ES + LM\n# {reason}")
    if resolved == "cuda":
        backends = ["cuda", "cpu"] if args.backend == "auto" else ["cuda"]
    rows = []
    for backend in backends:
        if backend == "cuda":
            with backend_context("cuda"):
                rows.append(fit(cfg, "cuda"))
        else:
            rows.append(fit(cfg, backend))
    model = cfg.model_()
    true = model.true_values
    print(f"\n{'parameter':10s} {'true':>10s}" + "".join(f" {r['backend'] + ' fit':>14s} {'error %':>9s} {'95% +-':>9s}"
                                                        for r in rows))
    for k, name in enumerate(model.param_names):
        line = f"{name:10s} {true[k]:10.5g}"
        for r in rows:
            value = r["best_params"][k]
            ci = 1.96 * r["ci_sd"][k] if r["ci_sd"] else float("nan")
            line += f" {value:14.7g} {100 * (value / true[k] - 1):+9.4f} {ci:9.2g}"
        print(line)
    for r in rows:
        ratio = r["chi2"] / r["chi2_best_achievable"]
        err = np.max(np.abs(np.array(r["best_params"]) / true - 1))
        r.update(max_relative_error=float(err), chi2_ratio=float(ratio))
        print(f"{r['backend']}: chi2 {r['chi2']:.6g} pA^2 = {ratio:.4f} x best achievable "
              f"{r['chi2_best_achievable']:.6g}; max error {100 * err:.4f} %; {r['generations']} CMA-ES "
              f"generations + {r['refine_iterations']} LM iterations; {r['wall_seconds']:.1f} s "
              f"(setup {r['setup_seconds']:.1f} s)")
    out = save_bench("channel-fit", {"rows": rows, "param_names": list(model.param_names),
                                     "true": true.tolist()}, args.out)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
