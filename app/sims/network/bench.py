"""``python -m app bench network``: one 100-s epoch plus the growth update of the 100x100
culture at its equilibrium connectivity (radius 2.001: 464,108 synapses) on CUDA, the
launch and neuron floors, a 1000x1000 culture; with ``--backend cpu`` the same culture on the
compiled CPU engine on 1, 2, 4, ... threads; the 10x10 culture on the CPU engines, and the
same 100x100 network in Brian2 on the CPU cores (where Brian2 is installed)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from app.compute.device import backend_context, cuda_status, resolve_backend
from app.sims.common.bench_record import save_bench
from app.sims.network.config import NetworkConfig
from app.sims.network.model import Constants, build_culture
from app.sims.network.simulation import NetworkSimulation

# Every radius 2.001: the 464,108 synapses of the paper's benchmark (its Table 1), i.e. every
# pair up to distance 4 (at exactly 2.0 the tangent pairs at distance 4 do not overlap: 425,708)
PAPER_RADIUS = 2.001
COMPILED_TARGET = 2.0      # x real time for the compiled CPU engine on the GPU host's 16 cores (issue 13)


def culture_config(width: int, radius: float, epoch_seconds: float = 100.0, epochs: int = 1,
                   slice_seconds: float = 10.0) -> NetworkConfig:
    cfg = NetworkConfig()
    return dataclasses.replace(
        cfg, culture=dataclasses.replace(cfg.culture, width=width, height=width),
        growth=dataclasses.replace(cfg.growth, start_radius=radius),
        run=dataclasses.replace(cfg.run, epochs=epochs, epoch_seconds=epoch_seconds,
                                slice_seconds=slice_seconds),
        analysis=dataclasses.replace(cfg.analysis, spikes="all"))


def engine_case(backend: str, width: int, radius: float, seconds: float, grow: bool = True) -> dict:
    """Engine-level timing: ``seconds`` of activity (spikes read back per slice), then growth."""
    cfg = culture_config(width, radius)
    culture = build_culture(cfg)
    consts = Constants.from_config(cfg)
    t0 = time.perf_counter()
    if backend == "cuda":
        from app.sims.network.cuda import CudaEngine as Engine
    elif backend == "cpu-reference":
        from app.sims.network.cpu import CpuEngine as Engine
    else:
        from app.sims.network.compiled import CompiledEngine as Engine
    eng = Engine(culture, consts, cfg.growth, cfg.run.seed, radius)
    setup = time.perf_counter() - t0
    synapses = eng.n_synapses
    steps = int(round(seconds / cfg.run.dt))
    slice_steps = 100_000 if backend == "cuda" else 10_000
    spikes = 0
    t0, cpu0 = time.perf_counter(), time.process_time()
    done = 0
    while done < steps:
        n = min(slice_steps, steps - done)
        s, _ = eng.advance(n)
        spikes += s.size
        done += n
    run_s, cpu_s = time.perf_counter() - t0, time.process_time() - cpu0
    grow_s = None
    if grow:
        t0 = time.perf_counter()
        eng.grow(seconds)
        grow_s = time.perf_counter() - t0
    row = {"engine": backend, "neurons": culture.n, "radius": radius, "synapses": synapses,
           "sim_seconds": seconds, "run_wall_seconds": run_s, "run_cpu_seconds": cpu_s, "grow_wall_seconds": grow_s,
           "setup_seconds": setup, "spikes": spikes, "mean_rate_hz": spikes / culture.n / seconds,
           "realtime_factor": seconds / run_s, **(eng.summary() if hasattr(eng, "summary") else {})}
    eng.close()
    return row


def launch_floor(launches: int) -> dict:
    """Wall time of ``launches`` empty kernels queued the way net_step is (same grid)."""
    import pycuda.driver as cuda
    import pycuda.gpuarray as ga
    from app.compute.kernels import load_module
    from app.compute.launch import PackedLaunch
    from app.sims.network.cuda import LANES, STEP_BLOCK, kernel_defines, kernel_source

    mod = load_module(kernel_source(), "network.cu", kernel_defines(9))
    sink = ga.zeros(1, np.uint32)
    stream = cuda.Stream()
    n = 10000
    fn = PackedLaunch(mod.get_function("net_noop"), "iiiP", ((n * LANES + STEP_BLOCK - 1) // STEP_BLOCK, 1), (STEP_BLOCK, 1, 1),
                      stream, [n, 0, 9, sink.gpudata], {1: 0, 2: 0})
    for i in range(1000):
        fn(a1=i, a2=9)
    stream.synchronize()
    t0 = time.perf_counter()
    for i in range(launches):
        fn(a1=i, a2=9)
    stream.synchronize()
    wall = time.perf_counter() - t0
    sink.gpudata.free()
    return {"launches": launches, "wall_seconds": wall, "us_per_launch": wall / launches * 1e6}


def simulation_case(backend: str, width: int, radius: float, seconds: float) -> dict:
    """The app's whole path (Simulation.advance: spikes recorded, analysis, growth, frames)."""
    cfg = culture_config(width, radius, epoch_seconds=seconds, slice_seconds=min(10.0, seconds))
    sim = NetworkSimulation(cfg, backend)
    t0 = time.perf_counter()
    while not sim.finished:
        sim.advance()
    wall = time.perf_counter() - t0
    _, summary = sim.results()
    sim.close()
    return {"engine": backend, "case": "simulation", "neurons": summary["neurons"],
            "synapses_after_growth": summary["synapses"], "sim_seconds": seconds,
            "wall_seconds": wall, "realtime_factor": seconds / wall,
            "spikes": summary["spikes_recorded"], "bursts_per_minute": sim.history["epoch_bursts_per_minute"][-1]}


def brian2_case(seconds: float, timeout: float, target: str = "numpy") -> dict:
    cmd = [sys.executable, "-m", "app.sims.network.peer_brian2", "--seconds", str(seconds),
           "--target", target]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, "PYTHONWARNINGS": "ignore"})
    except subprocess.TimeoutExpired:
        return {"target": target, "error": f"did not finish within {timeout:.0f} s"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return {"target": target, "error": " | ".join(tail)}
    return json.loads(lines[-1])


def compiled_cpu_rows(results: dict, quick: bool) -> None:
    """The compiled engine on the 100x100 culture at equilibrium on 1, 2, 4, ... threads (the
    issue-13 rows), its compile time, and the NumPy reference on the same culture (shorter)."""
    from app.compute.cpu_threads import compile_seconds, thread_counts, threads
    from app.sims.network.compiled import warm_up

    results["compile"] = compile_seconds("app.sims.network.compiled:warm_up")
    warm_up()
    print(f"# compiled engine: first use {results['compile']['cold_seconds']:.1f} s (empty cache), "
          f"{results['compile']['cached_seconds']:.2f} s from the on-disk cache", flush=True)
    seconds = 1.0 if quick else 10.0
    factors = {}
    for n in thread_counts():
        with threads(n):
            row = engine_case("cpu", 100, PAPER_RADIUS, seconds, grow=False)
        results["cases"].append({"case": "100x100 equilibrium, compiled CPU", "threads": n, **row})
        factors[n] = row["realtime_factor"]
        print(f"#   {n:2d} threads: {row['realtime_factor']:.2f}x real time "
              f"({row['run_wall_seconds']:.2f} s wall, {row['run_cpu_seconds']:.2f} s CPU, "
              f"{row['spikes']} spikes)", flush=True)
    top = max(factors)
    spikes = {c["spikes"] for c in results["cases"] if c.get("threads") and c["engine"] == "cpu"}
    results["scaling"] = {"threads": top, "realtime_factor": factors[top], "speedup": factors[top] / factors[1],
                          "efficiency": factors[top] / factors[1] / top, "same_spikes": len(spikes) == 1}
    results["cases"].append({"case": "100x100 equilibrium, NumPy reference", "threads": 1,
                             **engine_case("cpu-reference", 100, PAPER_RADIUS, 0.1 if quick else 0.5, grow=False)})


def main(backend: str = "auto", out_dir: Path = Path("bench-results"), quick: bool = False) -> int:
    resolved, reason = resolve_backend(backend)
    print(f"# Cultured-network benchmark\n# {reason}")
    results: dict = {"device": None, "cases": [], "cpu_cores": os.cpu_count()}
    epoch = 10.0 if quick else 100.0
    if resolved == "cuda":
        results["device"] = cuda_status().devices[0].name
        with backend_context("cuda"):
            engine_case("cuda", 10, 1.0, 0.01, grow=False)        # compile and load
            engine_case("cuda", 100, PAPER_RADIUS, 1.0, grow=False)
            launches = int(np.ceil(epoch / 1e-4 / 9))
            results["launch_floor"] = launch_floor(launches)
            results["cases"].append({"case": "100x100 equilibrium, one epoch + growth",
                                     **engine_case("cuda", 100, PAPER_RADIUS, epoch)})
            results["cases"].append({"case": "100x100 no synapses (neuron floor)",
                                     **engine_case("cuda", 100, 0.4, epoch, grow=False)})
            results["cases"].append({"case": "1000x1000 equilibrium",
                                     **engine_case("cuda", 1000, PAPER_RADIUS, 1.0 if quick else 10.0)})
            results["simulation"] = simulation_case("cuda", 100, PAPER_RADIUS, epoch)
    cpu_seconds = 2.0 if quick else 20.0
    if resolved == "cpu":
        compiled_cpu_rows(results, quick)
        results["cases"].append({"case": "10x10 compiled CPU (radius 1.0)",
                                 **engine_case("cpu", 10, 1.0, cpu_seconds)})
    results["cases"].append({"case": "10x10 NumPy reference (radius 1.0)",
                             **engine_case("cpu-reference", 10, 1.0, cpu_seconds)})
    b2_seconds = 0.2 if quick else 2.0
    results["brian2"] = brian2_case(b2_seconds, timeout=120 if quick else 240)
    print(f"\n{'case':42s} {'engine':13s} {'threads':>7s} {'neurons':>8s} {'synapses':>9s} {'sim s':>6s} "
          f"{'wall s':>8s} {'cpu s':>8s} {'grow s':>7s} {'x realtime':>10s} {'rate Hz':>8s} {'launch/s':>8s}")
    for c in results["cases"]:
        grow = c["grow_wall_seconds"]
        print(f"{c['case']:42s} {c['engine']:13s} {c.get('threads', '-'):>7} {c['neurons']:8d} {c['synapses']:9d} "
              f"{c['sim_seconds']:6.1f} {c['run_wall_seconds']:8.3f} {c['run_cpu_seconds']:8.3f} "
              f"{'' if grow is None else f'{grow:7.3f}':>7s} {c['realtime_factor']:10.2f} "
              f"{c['mean_rate_hz']:8.2f} {c.get('launches_per_sim_second', 0):8.0f}")
    if "scaling" in results:
        sc = results["scaling"]
        print(f"\ncompiled CPU, 100x100 equilibrium: {sc['realtime_factor']:.2f}x real time on {sc['threads']} "
              f"threads (target >= {COMPILED_TARGET:g}x on 16 cores); {sc['speedup']:.1f}x the one-thread "
              f"rate ({sc['efficiency']:.2f} of linear); same spikes on every thread count: "
              f"{'yes' if sc['same_spikes'] else 'NO'}")
    if "launch_floor" in results:
        lf = results["launch_floor"]
        print(f"\nlaunch floor: {lf['launches']} empty launches in {lf['wall_seconds']:.3f} s "
              f"({lf['us_per_launch']:.2f} us each)")
        s = results["simulation"]
        print(f"whole app path (Simulation, spikes recorded, bursts, growth): {s['sim_seconds']:.0f} s "
              f"simulated in {s['wall_seconds']:.3f} s ({s['realtime_factor']:.1f}x realtime), "
              f"{s['spikes']} spikes, {s['bursts_per_minute']:.1f} bursts/min")
    b2 = results["brian2"]
    if "error" in b2:
        print(f"\nBrian2: not measured ({b2['error']})")
    else:
        print(f"\nBrian2 {b2['brian2']} ({b2['target']} target), same 100x100 network without growth: "
              f"{b2['sim_seconds']} s simulated in {b2['run_wall_seconds']:.2f} s "
              f"-> {b2['wall_per_sim_second'] * 100:.0f} s per 100-s epoch (rate {b2['mean_rate_hz']:.2f} Hz)")
    out = save_bench("network", results, out_dir)
    print(f"\nwrote {out}")
    return 0
