"""``python -m app bench ssa``: decay-dimerization throughput on CUDA and on the CPU engine,
the GPU histograms at t_end checked against the CPU engine's within the self-distance band, and
the issue-14 rows: the same network imported from SBML vs written in YAML, every DSMTS case at
2^20 realizations (CUDA), and tau-leaping vs the direct method (speed-up and histogram distance
against the direct method's own 99 % band) at 2^16 realizations.

The tau rows alone (under a minute on an H100)::

    python -c "from app.sims.ssa.bench import tau_only; tau_only()"
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np

from app.compute.device import backend_context, cuda_status, resolve_backend
from app.sims.common.bench_record import save_bench
from app.sims.common.simulation import PRESETS, load_run_config
from app.sims.ssa.simulation import SSASimulation
from app.sims.ssa.stats import DISTANCE_CONVENTION, common_histograms, distance, expected_self_distance, null_band

PRESET = PRESETS / "ssa" / "00-decay-dimerization.yaml"
PEER_T10 = {"S1": (2740.4, 53.0), "S2": (17593.8, 103.5), "S3": (12222.9, 96.4)}  # GillesPy2, 1000 runs
COMPARE_BINS = 10


def run_case(backend: str, realizations: int, algorithm: str = "direct", t_end: float = 10.0,
             seed: int = 2024, epsilon: float = 0.03, sbml: str | None = None,
             samples: int | None = None) -> tuple[SSASimulation, dict]:
    """Run the dimer preset (or it as an SBML file) to t_end (at the preset's 101 sample times
    unless ``samples`` is given); the finished simulation and its summary."""
    _, cfg = load_run_config(PRESET)
    if sbml is not None:
        cfg = dataclasses.replace(cfg, model=None, sbml=sbml)
    cfg = dataclasses.replace(cfg, ensemble=dataclasses.replace(
        cfg.ensemble, realizations=realizations, algorithm=algorithm, t_end=t_end, seed=seed,
        epsilon=epsilon, samples=samples or cfg.ensemble.samples))
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


def compiled_cpu_rows(results: dict, t_end: float, quick: bool) -> None:
    """The compiled engine on 1, 2, 4, ... threads (per-thread rows), its compile time, and
    GillesPy2's SSACSolver on one core in the same run where it is installed."""
    from app.compute.cpu_threads import compile_seconds, thread_counts, threads
    from app.sims.ssa import peer_gillespy2
    from app.sims.ssa.compiled import warm_up

    results["compile"] = compile_seconds("app.sims.ssa.compiled:warm_up")
    warm_up()
    per_thread = 8 if quick else 64
    reactions_per_realization = None
    rates = {}
    for n in thread_counts():
        with threads(n):
            _, summary = run_case("cpu", per_thread * n, "direct", t_end, seed=7)
        results["cases"].append({"engine": "cpu", "threads": n, **summary})
        rates[n] = summary["reactions_per_second"]
        reactions_per_realization = summary["reactions_fired"] / summary["realizations"]
    top = max(rates)
    results["scaling"] = {"threads": top, "speedup": rates[top] / rates[1],
                          "efficiency": rates[top] / rates[1] / top}
    if peer_gillespy2.available():
        _, cfg = load_run_config(PRESET)
        peer = peer_gillespy2.run(cfg.network(), 4 if quick else 40, t_end, 101)
        rate = peer["trajectories"] * reactions_per_realization / peer["wall_seconds"]
        results["cases"].append({"engine": "gillespy2-ssac", "threads": 1, "algorithm": "direct",
                                 "realizations": peer["trajectories"],
                                 "reactions_fired": int(peer["trajectories"] * reactions_per_realization),
                                 "wall_seconds": peer["wall_seconds"], "reactions_per_second": rate,
                                 "build_seconds": peer["build_seconds"]})
        results["peer_ratio_per_core"] = rates[1] / rate
        print(f"# GillesPy2 SSACSolver: {rate:.3g} reactions/s on one core "
              f"(expected reactions from our run; C++ build {peer['build_seconds']:.1f} s excluded)")


def sbml_rows(results: dict, backend: str, realizations: int, t_end: float) -> None:
    """The dimer exported to SBML and imported again against the YAML network (same seed; the
    fastest of three alternating runs of each)."""
    import tempfile

    from app.sims.ssa.sbml_export import export_sbml

    _, cfg = load_run_config(PRESET)
    with tempfile.TemporaryDirectory() as folder:
        path = str(export_sbml(cfg.model, Path(folder) / "dimer.xml", "decay_dimerization"))
        run_case(backend, min(realizations, 4096), t_end=0.1, sbml=path)     # compile both first
        rows: dict[str, dict] = {}
        for _ in range(3):             # alternate, keep the fastest of each (timing noise)
            for label, sbml in (("yaml", None), ("sbml", path)):
                sim, summary = run_case(backend, realizations, "direct", t_end, seed=5, sbml=sbml)
                sim.close()
                if label not in rows or summary["wall_seconds"] < rows[label]["wall_seconds"]:
                    rows[label] = summary
    results["sbml_vs_yaml"] = {"realizations": realizations, "yaml_seconds": rows["yaml"]["wall_seconds"],
                               "sbml_seconds": rows["sbml"]["wall_seconds"],
                               "ratio": rows["sbml"]["wall_seconds"] / rows["yaml"]["wall_seconds"],
                               "same_reactions": rows["sbml"]["reactions_fired"] == rows["yaml"]["reactions_fired"]}


def dsmts_rows(results: dict, backend: str, realizations: int) -> None:
    """Every DSMTS case at ``realizations``: wall time and the verdict (false-alarm rate per
    case ``dsmts.ALPHA``), with the suite's excursion counts for reference."""
    from app.sims.ssa import dsmts

    rows = []
    for name in dsmts.cases():
        r = dsmts.run_case(dsmts.load_case(name), backend, realizations, seed=3000 + int(name))
        v = r.verdict
        rows.append({"case": name, "wall_seconds": r.wall_seconds, "tests": v.tests, "max_abs_z": r.max_z,
                     "max_abs_y_std": r.max_y, "threshold": v.threshold, "passed": v.passed,
                     "z_out": r.z_out, "y_out": r.y_out, "reactions": r.reactions})
    results["dsmts"] = {"realizations": realizations, "alpha_per_case": dsmts.ALPHA, "cases": rows}


TAU_EPSILONS = (0.03, 0.02, 0.015, 0.012, 0.01, 0.003)


def fastest(run, repeats: int) -> tuple[SSASimulation, dict]:
    """The fastest of ``repeats`` runs of ``run()`` (same seed, so the same ensemble); the
    others are closed."""
    best = None
    for _ in range(repeats):
        sim, summary = run()
        if best is None or summary["wall_seconds"] < best[1]["wall_seconds"]:
            if best is not None:
                best[0].close()
            best = (sim, summary)
        else:
            sim.close()
    return best


def tau_rows(results: dict, backend: str, realizations: int, t_end: float,
             epsilons: tuple[float, ...] = TAU_EPSILONS, repeats: int = 3, one_interval: bool = True) -> None:
    """Tau-leaping against the direct method on the dimer at t_end: wall time (the fastest of
    ``repeats`` runs of each, after a warm-up of both kernels, so neither pays a compile, a
    module load or a clock ramp), speed-up and histogram distance against the direct method's
    own 99 % self-distance band."""
    for algorithm in ("direct", "tau-leap"):   # one module serves every epsilon
        run_case(backend, min(realizations, 4096), algorithm, 0.1)[0].close()
    direct, summary = fastest(lambda: run_case(backend, realizations, "direct", t_end, seed=31), repeats)
    rows = []
    for eps in epsilons:
        sim, tau = fastest(lambda eps=eps: run_case(backend, realizations, "tau-leap", t_end, seed=32,
                                                    epsilon=eps), repeats)
        comparison = compare(sim.final, direct.final, sim.net.species)
        rows.append({"epsilon": eps, "wall_seconds": tau["wall_seconds"],
                     "speedup": summary["wall_seconds"] / tau["wall_seconds"],
                     "reactions_fired": tau["reactions_fired"], "comparison": comparison,
                     "inside": all(c["distance"] <= c["band_99"] for c in comparison)})
        sim.close()
    direct.close()
    results["tau_leap"] = {"realizations": realizations, "direct_seconds": summary["wall_seconds"],
                           "rows": rows}
    if not one_interval:
        return
    # the same two runs in one sample interval (one launch each): the kernels alone, without
    # the per-interval launches, copies and host waits the 101-sample runs pay
    one = {}
    for algorithm, eps in (("direct", 0.03), ("tau-leap", 0.01)):
        sim, single = fastest(lambda algorithm=algorithm, eps=eps: run_case(
            backend, realizations, algorithm, t_end, seed=33, epsilon=eps, samples=2), repeats)
        sim.close()
        one[algorithm] = single["wall_seconds"]
    results["tau_leap"]["one_interval"] = {"direct_seconds": one["direct"], "tau_seconds_eps_0.01": one["tau-leap"]}


def print_issue14_rows(results: dict) -> None:
    if "sbml_vs_yaml" in results:
        r = results["sbml_vs_yaml"]
        print(f"\nSBML import vs YAML (dimer, {r['realizations']} realizations): YAML {r['yaml_seconds']:.3f} s, "
              f"SBML {r['sbml_seconds']:.3f} s, ratio {r['ratio']:.3f}, same reactions: {r['same_reactions']}")
    if "dsmts" in results:
        d = results["dsmts"]
        print(f"\nDSMTS, {d['realizations']} realizations per case, false-alarm rate <= "
              f"{d['alpha_per_case']:g} per case:")
        for c in d["cases"]:
            print(f"  {c['case']}: {c['wall_seconds']:7.3f} s  max |Z| {c['max_abs_z']:.2f}, max |Y/sd| "
                  f"{c['max_abs_y_std']:.2f} vs {c['threshold']:.2f}: {'pass' if c['passed'] else 'FAIL'}"
                  f"  (suite's counts: Z out {c['z_out']}, Y out {c['y_out']})")
    if "tau_leap" in results:
        t = results["tau_leap"]
        print(f"\ntau-leaping vs direct (dimer, {t['realizations']} realizations, direct {t['direct_seconds']:.3f} s):")
        for row in t["rows"]:
            dists = ", ".join(f"{c['species']} D = {c['distance']:.4f} (99% band {c['band_99']:.4f}"
                              f"{'' if c['distance'] <= c['band_99'] else ', OUTSIDE'})" for c in row["comparison"])
            print(f"  eps {row['epsilon']}: {row['wall_seconds']:.4f} s, {row['speedup']:.1f}x; {dists}")
        if "one_interval" in t:
            o = t["one_interval"]
            print(f"  one sample interval (kernels only, no per-sample launches): direct "
                  f"{o['direct_seconds']:.4f} s, eps 0.01 {o['tau_seconds_eps_0.01']:.4f} s, "
                  f"{o['direct_seconds'] / o['tau_seconds_eps_0.01']:.1f}x")
        met = [row["epsilon"] for row in t["rows"] if row["inside"] and row["speedup"] >= 10]
        print(f"  target (>= 10x, every species inside the band): "
              f"{'met at eps ' + ', '.join(map(str, met)) if met else 'not met'}")


def main(backend: str = "auto", out_dir: Path = Path("bench-results"), quick: bool = False) -> int:
    resolved, reason = resolve_backend(backend)
    print(f"# SSA benchmark: decay-dimerization, t_end = {0.5 if quick else 10.0:g}, 101 samples\n# {reason}")
    gpu_sizes = [1 << 14] if quick else [1 << 16, 1 << 20]
    cpu_size = 8 if quick else (16 if resolved != "cuda" else 128)
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
    if resolved == "cuda":
        with backend_context("cuda"):
            sbml_rows(results, "cuda", 1 << 14 if quick else 1 << 20, t_end)
            dsmts_rows(results, "cuda", 1 << 12 if quick else 1 << 20)
            tau_rows(results, "cuda", 1 << 12 if quick else 1 << 16, t_end)
    start = time.perf_counter()
    if resolved != "cuda":
        compiled_cpu_rows(results, t_end, quick)
        sbml_rows(results, "cpu", 16 if quick else 256, t_end)
        tau_rows(results, "cpu", 16 if quick else 512, t_end, (0.03, 0.01), repeats=1, one_interval=False)
        if not quick:
            dsmts_rows(results, "cpu", 1000)
    sim, summary = run_case("cpu-reference", cpu_size, "direct", t_end, seed=99)
    results["cases"].append({"engine": "cpu-reference", "threads": 1, **summary})
    if gpu_final is not None:
        results["comparison"] = compare(gpu_final, sim.final, sim.net.species)
    print(f"\n{'engine':14s} {'threads':>7s} {'algorithm':10s} {'realizations':>12s} {'reactions':>14s} "
          f"{'wall s':>8s} {'reactions/s':>12s} {'per thread':>11s}")
    for c in results["cases"]:
        threads = c.get("threads", 0)
        per = f"{c['reactions_per_second'] / threads:11.4g}" if threads else f"{'-':>11s}"
        print(f"{c['engine']:14s} {threads or '-':>7} {c['algorithm']:10s} {c['realizations']:12d} "
              f"{c['reactions_fired']:14d} {c['wall_seconds']:8.3f} {c['reactions_per_second']:12.4g} {per}")
    if "compile" in results:
        print(f"\ncompiled engine: first use {results['compile']['cold_seconds']:.2f} s (empty cache), "
              f"{results['compile']['cached_seconds']:.3f} s from the on-disk cache")
    if "scaling" in results:
        print(f"scaling 1 -> {results['scaling']['threads']} threads: {results['scaling']['speedup']:.2f}x "
              f"({results['scaling']['efficiency']:.2f} of linear)")
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
    print_issue14_rows(results)
    if "peer_ratio_per_core" in results:
        print(f"compiled engine / GillesPy2 SSACSolver, one core each: {results['peer_ratio_per_core']:.1f}x")
    out = save_bench("ssa", results, out_dir)
    print(f"\nwrote {out} ({time.perf_counter() - start:.0f} s for the CPU part)")
    return 0


def tau_only(realizations: int = 1 << 16, t_end: float = 10.0,
             epsilons: tuple[float, ...] = TAU_EPSILONS, inversion_below: tuple[float, ...] = ()) -> dict:
    """Only the tau-leaping rows on CUDA (the whole bench takes minutes), printed; with
    ``inversion_below``, once per threshold of the device's Poisson inversion (a tuning run)."""
    from app.sims.ssa import cuda as ssa_cuda

    default = ssa_cuda.INVERSION_BELOW
    out: dict = {}
    try:
        with backend_context("cuda"):
            for value in inversion_below or (default,):
                ssa_cuda.INVERSION_BELOW = float(value)
                results: dict = {}
                tau_rows(results, "cuda", realizations, t_end, epsilons)
                print(f"\n# {cuda_status().devices[0].name}; Poisson counts by inversion below a mean of {value:g}")
                print_issue14_rows(results)
                out[float(value)] = results
    finally:
        ssa_cuda.INVERSION_BELOW = default
    return out
