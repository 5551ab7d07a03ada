"""``python -m app bench epidermis [--quick]``: the paper's Table 3 cases on the CUDA engine.

Cases (Christley et al. 2010, Table 3; cells of 20 elements, 40 slots, dt = 0.1; the movement
and gene-network tissues are confluent monolayers at a 7 µm pitch, so that about two thirds of
the elements touch another cell, ~1.2 intercellular pairs per element):

- movement model, 128 / 500 / 1000 / 2000 / 5000 cells, 3,000 steps, periodic and no
  boundary, with the cell list and with the paper's centre-cutoff search;
- gene-network model, 128 and 1000 cells, 3,000 steps (periodic);
- the full model from 100 cells for 130,000 steps (after the 500 relaxation steps): final
  cells, layers, suprabasal fraction, wall time; the final tissue is saved as
  ``full_model_final.npz`` (positions, element cell, type, colour, centres, genes) so a
  picture can be rendered off the GPU machine;
- a 100,000-cell movement model (steps per second);
- on the CPU (``--backend cpu``): the compiled engine's 1,000-cell movement case on 1, 2, 4, ...
  threads (300 steps after 20, from the unrelaxed lattice as the CUDA cases), its first-use
  compile time (empty cache, fresh interpreter) and from the on-disk cache, the scaling;
- a small case on the NumPy reference engine.

Timing: each case is warmed up (module load and compile, first grid) by a few steps, then
``run(steps)`` is timed with CUDA events on the engine's stream (and a host clock around it,
which includes the one bounding-box read and the status check per ``run``).

Floor estimate, per live element and step (two force evaluations), printed per case:

- bytes: the design's memory traffic, counted kernel by kernel with every intermediate read
  and written once and neighbour reads served by the caches. Cell list, every evaluation:
  intracellular 25 B, intercellular + update 92 B (sorted position, slot, reference position,
  list length, intracellular force, position read and written, next sorted position) + 4 B a
  list entry; a pair-list build (a fraction of the evaluations, counted on the device): hash
  16 B, scatter 44 B, bin sort 40 B, list 36 B + 4 B an entry, about 24 B per grid bin.
  Contact sums add 16 B at stage 1. The irreducible floor (read and write the positions once)
  is 24 B.
- flops: intracellular (n - 1) pairs x ~30 flops (two exps, a square root, a division) and
  intercellular candidates x ~10 flops + pairs within the cutoff x ~30, per evaluation; the
  candidates are the list entries (and, per build, the elements of the 27 bins).
- launches: 12 (cell list) or 8 (centre cutoff) per step, with the gene network +2 (centres
  and A, the network) or +1 (the network; the centre-cutoff search computes the centres
  anyway). A build's kernels return at once when the list is kept, but are graph nodes all
  the same. The engine replays runs of steps from a captured CUDA graph, so a launch costs the
  device's time per graph node (an empty kernel replayed from a graph, measured), not the
  host's time per launch from Python (also measured, ``launch_s``).

The floor time per step is the largest of bytes/bandwidth (measured with a device-to-device
copy), flops/peak fp32 rate (SMs x clock x 256) and launches x measured time per graph node.

Measured on the H100 (``benchmarks/h100/epidermis-kernels-*.json``, ``epidermis-*.json``): with
the pair list kept between builds the 5,000-cell step is 54 µs, 4x its floor (12 graph nodes of
about 1.1 µs); the intercellular and intracellular kernels take most of it, bound by the latency
of their loads; 100,000 cells: about 4x the bandwidth floor.
"""

from __future__ import annotations

import dataclasses
import os
import time
import traceback
from pathlib import Path

import numpy as np

from app.compute.device import backend_context, resolve_backend
from app.sims.common.bench_record import save_bench
from app.sims.epidermis import model
from app.sims.epidermis.config import EpidermisConfig
from app.sims.epidermis.frame import element_colours

BYTES_PER_EVAL = {"cell_list": 25 + 92, "centre_cutoff": 25 + 56 + 12}
BYTES_PER_BUILD = 16 + 44 + 40 + 36     # hash, scatter, bin sort, list (cell list)
BYTES_PER_ENTRY = 4         # a pair-list entry, written at a build and read at every evaluation
CONTACT_BYTES = 16          # contact sums written at stage 1 (gene modes)
BYTES_PER_BIN = 24          # scan (read + write), range write, histogram clear, per bin
FLOPS_INTRA_PAIR = 30
FLOPS_CANDIDATE = 10
FLOPS_PAIR = 30
FULL_CELLS, FULL_RELAX = 100, 500     # the paper's Fig. 4 run
TABLE3_PITCH = 7.0          # µm: a confluent monolayer (the config default)
COMPILED_CELLS = 1000       # the issue-13 case of the compiled CPU engine (movement model)
COMPILED_TARGET = 1000      # steps/s on the GPU host's 16 cores


def config(cells: int, mode: str = "movement", boundary: str = "periodic",
           search: str = "cell_list", steps: int = 3000, relax: int = 0, pitch: float | None = None,
           **growth) -> EpidermisConfig:
    cfg = EpidermisConfig()
    tissue = dataclasses.replace(cfg.tissue, cells=cells, boundary=boundary)
    if pitch is not None:
        tissue = dataclasses.replace(tissue, pitch=pitch)
    return dataclasses.replace(
        cfg, tissue=tissue,
        growth=dataclasses.replace(cfg.growth, **growth),
        run=dataclasses.replace(cfg.run, mode=mode, search=search, steps=steps, relax_steps=relax))


def initial(cfg: EpidermisConfig, relax: bool = False, engine=None) -> dict:
    """The Table 3 tissue: placed and typed, relaxed first on ``engine`` (CUDA) when asked."""
    if relax:
        if engine is None:
            from app.sims.epidermis.cuda import CudaEngine as engine
        return model.initial_state(cfg, engine=engine)
    return model.type_c1(model.place_cells(cfg), cfg.mechanics.c1_height)


def _time_run(eng, steps: int) -> tuple[float, float]:
    """(event seconds, host seconds) of eng.advance(steps)."""
    import pycuda.driver as cuda

    start, end = cuda.Event(), cuda.Event()
    eng.stream.synchronize()
    t0 = time.perf_counter()
    start.record(eng.stream)
    eng.advance(steps)
    end.record(eng.stream)
    end.synchronize()
    wall = time.perf_counter() - t0
    return end.time_since(start) * 1e-3, wall


def pair_statistics(eng) -> dict:
    """Per element: pairs within the cutoff, intracellular pairs and, with the cell list, the
    pair-list entries (the candidates of an evaluation) and the candidates of a list build
    (the elements of its 27 bins), from the state now."""
    st = eng.state()
    cfg = eng.cfg
    p, cell, _, _ = model.live_elements(st)
    _, S = eng.forces()
    valid = model.valid_mask(st["count"], int(st["n_cells"]), st["pos"].shape[1])
    pairs = float(S[0][:, :int(st["n_cells"])][valid].mean()) if valid.any() else 0.0
    intra = float(np.mean(st["count"][:int(st["n_cells"])]) - 1.0)
    out = {"inter_pairs_per_element": pairs, "intra_pairs_per_element": intra}
    g = eng.grid
    if g is not None and p.shape[0]:
        box = model.box_of(cfg)
        idx = []
        for a, name in enumerate("xyz"):
            v = p[:, a]
            if box and a < 2:
                f = np.floor((v - box * np.floor(v / box)) * g["iw" + name])
            else:
                f = np.floor((v - g["o" + name]) * g["iw" + name])
            idx.append(np.clip(f, 0, g["n" + name] - 1).astype(np.int64))
        nx, ny, nz = g["nx"], g["ny"], g["nz"]
        occ = np.zeros((nz, ny, nx), np.int64)
        np.add.at(occ, (idx[2], idx[1], idx[0]), 1)
        cand = np.zeros(p.shape[0])
        for dz in (-1, 0, 1):
            for dy in (-1, 0, 1):
                for dx in (-1, 0, 1):
                    jz = idx[2] + dz
                    jy = idx[1] + dy
                    jx = idx[0] + dx
                    ok = (jz >= 0) & (jz < nz)
                    if box:
                        jy %= ny
                        jx %= nx
                    else:
                        ok &= (jy >= 0) & (jy < ny) & (jx >= 0) & (jx < nx)
                    cand += np.where(ok, occ[np.clip(jz, 0, nz - 1), np.clip(jy, 0, ny - 1),
                                             np.clip(jx, 0, nx - 1)], 0)
        out["build_candidates_per_element"] = float(cand.mean())
        out["bins_per_element"] = g["bins"] / p.shape[0]
        entries = eng.pair_list()[1]
        out["list_entries_per_element"] = float(np.where(entries < 0, cand.mean(), entries).mean())
    return out


def kernel_breakdown(eng, steps: int = 10) -> dict:
    """Device time per step of each kernel of the step (CUDA events around every launch), after
    one untimed step (the pair-list builds every ``advance`` starts with)."""
    import pycuda.driver as cuda

    eng._prepare()
    plan = eng.plan
    for launch in plan:
        launch()
    eng.step += 1
    ev = [(cuda.Event(), cuda.Event()) for _ in plan]
    acc: dict[str, float] = {}
    for _ in range(steps):
        for (a, b), launch in zip(ev, plan):
            a.record(eng.stream)
            launch()
            b.record(eng.stream)
        eng.stream.synchronize()
        for (a, b), launch in zip(ev, plan):
            acc[launch.name] = acc.get(launch.name, 0.0) + b.time_since(a) * 1e3 / steps
    eng.step += steps
    return {k: round(v, 2) for k, v in sorted(acc.items(), key=lambda kv: -kv[1])}


def floor_estimate(case: dict, stats: dict, device: dict) -> dict:
    """Bytes, flops and launches per step and the floor time they give (see the docstring)."""
    M = case["elements"]
    search, genes = case["search"], case["mode"] != "movement"
    bytes_elem = 2 * BYTES_PER_EVAL[search] + (CONTACT_BYTES if genes else 0)
    flops_build = 0.0
    if "list_entries_per_element" in stats:     # cell list: the list, and its builds
        cand = stats["list_entries_per_element"]
        builds = case.get("pair_list_builds_per_step", 2.0)
        bytes_elem += 2 * BYTES_PER_ENTRY * cand + builds * (
            BYTES_PER_BUILD + BYTES_PER_ENTRY * cand + BYTES_PER_BIN * stats["bins_per_element"])
        flops_build = builds * stats["build_candidates_per_element"] * FLOPS_CANDIDATE
    else:              # centre cutoff: elements of the neighbour cells
        cand = case.get("max_neighbour_cells", 10) * 20
    flops_elem = flops_build + 2 * (stats["intra_pairs_per_element"] * FLOPS_INTRA_PAIR
                                    + cand * FLOPS_CANDIDATE
                                    + stats["inter_pairs_per_element"] * FLOPS_PAIR)
    t_bytes = bytes_elem * M / device["bandwidth_Bps"]
    t_flops = flops_elem * M / device["fp32_flops"]
    t_launch = case["launches_per_step"] * device["graph_node_s"]
    floor = max(t_bytes, t_flops, t_launch)
    return {"bytes_per_element_step": bytes_elem, "flops_per_element_step": flops_elem,
            "candidates_per_element": cand, "floor_bytes_us": t_bytes * 1e6,
            "floor_flops_us": t_flops * 1e6, "floor_launch_us": t_launch * 1e6,
            "floor_us_per_step": floor * 1e6,
            "measured_over_floor": case["us_per_step"] / (floor * 1e6) if floor else None}


def device_ceilings() -> dict:
    """Measured copy bandwidth, nominal fp32 rate, measured time of a tiny kernel launched from
    Python and replayed from a captured graph."""
    import pycuda.driver as cuda
    import pycuda.gpuarray as ga

    dev = cuda.Context.get_device()
    a = cuda.device_attribute
    sms = dev.get_attribute(a.MULTIPROCESSOR_COUNT)
    try:
        clock_hz = dev.get_attribute(a.CLOCK_RATE) * 1e3
    except Exception:                    # attribute dropped by the driver: the H100 SXM boost clock
        clock_hz = 1.98e9
    n = 1 << 28                                           # 1 GiB of float32
    src, dst = ga.empty(n, np.float32), ga.empty(n, np.float32)
    src.fill(1.0)
    start, end = cuda.Event(), cuda.Event()
    cuda.memcpy_dtod(dst.gpudata, src.gpudata, 4 * n)
    start.record()
    reps = 5
    for _ in range(reps):
        cuda.memcpy_dtod(dst.gpudata, src.gpudata, 4 * n)
    end.record()
    end.synchronize()
    bw = 2 * 4 * n * reps / (end.time_since(start) * 1e-3)
    src.gpudata.free()
    dst.gpudata.free()
    # launch time: a one-block kernel with nothing to do (zero rows to copy) queued back to
    # back from Python, and replayed from a captured graph
    from app.compute.graphs import RepeatedPlan
    from app.compute.kernels import load_module
    from app.compute.launch import PackedLaunch
    from app.sims.epidermis.cuda import kernel_defines, kernel_source

    mod = load_module(kernel_source(), "epidermis.cu", kernel_defines(EpidermisConfig()))
    sink = ga.zeros(4, np.int32)
    stream = cuda.Stream()
    launch = PackedLaunch(mod.get_function("epi_copy_rows32"), "iiiPP", (1, 1), (1024, 1, 1),
                          stream, [np.int32(0), np.int32(0), np.int32(0), sink.gpudata, sink.gpudata])
    k = 5000
    repeat = RepeatedPlan(stream, k)

    def one_by_one() -> None:
        for _ in range(k):
            launch()

    times = []
    for queue in (one_by_one, lambda: repeat.run([launch], k)):
        for _ in range(2):                       # the first is the warm-up (and the capture)
            t0 = time.perf_counter()
            queue()
            stream.synchronize()
            t = (time.perf_counter() - t0) / k
        times.append(t)
    repeat.close()
    sink.gpudata.free()
    return {"name": dev.name(), "sms": sms, "clock_ghz": clock_hz * 1e-9,
            "bandwidth_Bps": bw, "fp32_flops": sms * clock_hz * 256.0, "launch_s": times[0],
            "graph_node_s": times[1]}


def cuda_case(label: str, cfg: EpidermisConfig, steps: int, device: dict, relax: bool = False,
              warmup: int = 20, breakdown: bool = False) -> dict:
    from app.sims.epidermis.cuda import CudaEngine

    t0 = time.perf_counter()
    state = initial(cfg, relax=relax)
    setup = time.perf_counter() - t0
    eng = CudaEngine(cfg, state)
    try:
        eng.advance(warmup)
        builds = eng.pair_list()[0]
        gpu_s, wall = _time_run(eng, steps)
        builds = eng.pair_list()[0] - builds
        st = eng.element_counts()
        s = eng.summary()
        row = {"case": label, "engine": "cuda", "mode": cfg.run.mode, "boundary": cfg.tissue.boundary,
               "search": cfg.run.search, "cells": int(cfg.tissue.cells), "elements": int(st.sum()),
               "steps": steps, "gpu_seconds": gpu_s, "wall_seconds": wall,
               "steps_per_second": steps / wall, "us_per_step": gpu_s / steps * 1e6,
               "element_steps_per_second": st.sum() * steps / wall, "setup_seconds": setup,
               "launches_per_step": s["launches_per_step"], "grid": s["grid"],
               "max_neighbour_cells": s["max_neighbour_cells"],
               "pair_list_builds_per_step": builds / steps}
        stats = pair_statistics(eng)
        row.update(stats)
        row.update(floor_estimate(row, stats, device))
        if breakdown:
            row["kernel_us_per_step"] = kernel_breakdown(eng)
            print("   kernels (µs per step): " + ", ".join(
                f"{k} {v:.1f}" for k, v in row["kernel_us_per_step"].items()), flush=True)
    finally:
        eng.close()
    return row


def full_model_case(device: dict, out_dir: Path, steps: int) -> dict:
    from app.sims.epidermis.cuda import CudaEngine

    cfg = config(FULL_CELLS, mode="full", steps=steps, relax=FULL_RELAX)
    t0 = time.perf_counter()
    state = model.initial_state(cfg, engine=CudaEngine)
    relax_s = time.perf_counter() - t0
    eng = CudaEngine(cfg, state)
    try:
        gpu_s, wall = _time_run(eng, steps)
        centres, genes = eng.cells()
        pos, cell, etype = eng.elements()
        s = eng.summary()
    finally:
        eng.close()
    supra = model.suprabasal(genes)
    colour = element_colours(etype, cell, supra)
    layers = model.count_layers(centres[2], cfg.run.layer_thickness)
    out_dir.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out_dir / "full_model_final.npz", positions=pos, element_cell=cell,
                        element_type=etype, element_colour=colour, centres=centres.T,
                        genes=genes.T, box=np.float64(cfg.box), steps=np.int64(steps))
    return {"case": f"full model, {FULL_CELLS} cells, {steps} steps", "engine": "cuda", "mode": "full",
            "boundary": "periodic", "search": "cell_list", "cells_start": FULL_CELLS,
            "cells": int(centres.shape[1]), "elements": int(pos.shape[0]), "layers": int(layers),
            "suprabasal_fraction": float(supra.mean()) if supra.size else 0.0,
            "steps": steps, "gpu_seconds": gpu_s, "wall_seconds": wall,
            "relax_seconds": relax_s, "steps_per_second": steps / wall,
            "us_per_step": gpu_s / steps * 1e6, "launches_per_step": s["launches_per_step"],
            "capacity": s["capacity"]}


def cpu_case(cells: int, steps: int) -> dict:
    from app.sims.epidermis.cpu import CpuEngine

    cfg = config(cells)
    eng = CpuEngine(cfg, model.type_c1(model.place_cells(cfg), cfg.mechanics.c1_height))
    eng.advance(2)
    t0, c0 = time.perf_counter(), time.process_time()
    eng.advance(steps)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    m = int(eng.element_counts().sum())
    return {"case": f"movement {cells} cells (NumPy reference)", "engine": "ref", "mode": "movement",
            "boundary": "periodic", "search": "cell_list", "cells": cells, "elements": m,
            "steps": steps, "wall_seconds": wall, "steps_per_second": steps / wall,
            "cpu_seconds": cpu, "steps_per_cpu_second": steps / cpu,
            "us_per_step": wall / steps * 1e6, "element_steps_per_second": m * steps / wall}


def compiled_case(cells: int, steps: int, threads: int, warmup: int = 20) -> dict:
    """The compiled CPU engine on ``threads`` threads: movement model from the unrelaxed
    lattice (as the CUDA cases), ``warmup`` steps, then ``steps`` timed."""
    from app.sims.epidermis.compiled import CompiledEngine

    cfg = config(cells, pitch=TABLE3_PITCH)
    eng = CompiledEngine(cfg, initial(cfg, relax=False, engine=CompiledEngine))
    eng.advance(warmup)
    t0, c0 = time.perf_counter(), time.process_time()
    eng.advance(steps)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    m = int(eng.element_counts().sum())
    return {"case": f"movement {cells} cells (compiled CPU, {threads} thr)", "engine": "cpu",
            "threads": threads, "mode": "movement", "boundary": "periodic", "search": "cell_list",
            "cells": cells, "elements": m, "steps": steps, "wall_seconds": wall,
            "cpu_seconds": cpu, "steps_per_cpu_second": steps / cpu,
            "steps_per_second": steps / wall, "steps_per_second_per_thread": steps / wall / threads,
            "us_per_step": wall / steps * 1e6, "element_steps_per_second": m * steps / wall}


def compiled_cpu_rows(results: dict, quick: bool) -> None:
    """The compiled engine on 1, 2, 4, ... threads (the 1,000-cell movement case), its compile
    time (empty cache in a fresh interpreter, and from the on-disk cache) and the scaling."""
    from app.compute.cpu_threads import compile_seconds, thread_counts, threads
    from app.sims.epidermis.compiled import warm_up

    results["compile"] = compile_seconds("app.sims.epidermis.compiled:warm_up")
    warm_up()
    print(f"# compiled engine: first use {results['compile']['cold_seconds']:.1f} s (empty cache), "
          f"{results['compile']['cached_seconds']:.2f} s from the on-disk cache", flush=True)
    rates = {}
    for n in thread_counts():
        with threads(n):
            row = _attempt(results, compiled_case, COMPILED_CELLS, 30 if quick else 300, n)
        if row:
            rates[n] = row["steps_per_second"]
    for c in results["cases"]:
        if c.get("threads"):
            print(f"#   {c['threads']:3d} threads: {c['steps_per_second']:8.1f} steps/s wall, "
                  f"{c['steps_per_second_per_thread']:7.1f} per thread; {c['steps_per_cpu_second']:7.1f} "
                  "steps per CPU-second (the process's CPU time: on a loaded machine the "
                  "one-thread rate a free core would give)", flush=True)
    if 1 in rates:
        top = max(rates)
        one = next(c for c in results["cases"] if c.get("threads") == 1)
        per_core = one["steps_per_cpu_second"]
        results["scaling"] = {"threads": top, "speedup": rates[top] / rates[1],
                              "efficiency": rates[top] / rates[1] / top,
                              "one_thread_steps_per_cpu_second": per_core,
                              "sixteen_times_one_core": 16 * per_core}
        print(f"# {COMPILED_CELLS} cells, movement: one thread {rates[1]:.1f} steps/s wall, "
              f"{per_core:.1f} steps per CPU-second; 1 -> {top} threads {rates[top] / rates[1]:.2f}x "
              f"wall ({results['scaling']['efficiency']:.2f} of linear); 16 x the one-core rate: "
              f"{16 * per_core:.0f} steps/s (linear; target {COMPILED_TARGET:,} on the GPU host's "
              "16 cores)", flush=True)


def smoke() -> None:
    """A few steps of every engine path on tiny tissues (for compute-sanitizer runs)."""
    from app.sims.epidermis.cuda import CudaEngine

    with backend_context("cuda"):
        for boundary, search in (("periodic", "cell_list"), ("none", "centre_cutoff")):
            cfg = config(9, mode="full", boundary=boundary, search=search, interval=5,
                         delta_low=10.0)
            cfg = dataclasses.replace(cfg, tissue=dataclasses.replace(
                cfg.tissue, max_elements=24, elements=20))
            eng = CudaEngine(cfg, initial(cfg))
            eng.advance(26)
            eng.forces()
            eng.cells()
            eng.elements()
            print(boundary, search, "cells", eng.n_cells, "capacity", eng.capacity, flush=True)
            eng.close()


def _attempt(results: dict, fn, *args, **kw) -> dict | None:
    try:
        row = fn(*args, **kw)
    except Exception as exc:             # one failing case must not lose the others
        traceback.print_exc()
        label = args[0] if args and isinstance(args[0], str) else getattr(fn, "__name__", "case")
        results["errors"].append(f"{label}: {type(exc).__name__}: {exc}")
        return None
    results["cases"].append(row)
    _print_row(row)
    return row


HEADER = (f"{'case':44s} {'eng':4s} {'cells':>6s} {'elements':>8s} {'steps':>7s} {'wall s':>8s} "
          f"{'steps/s':>9s} {'us/step':>8s} {'floor us':>8s} {'x floor':>7s}")


def _print_row(c: dict) -> None:
    floor = c.get("floor_us_per_step")
    ratio = c.get("measured_over_floor")
    print(f"{c['case']:44s} {c['engine']:4s} {c['cells']:6d} {c['elements']:8d} {c['steps']:7d} "
          f"{c['wall_seconds']:8.3f} {c['steps_per_second']:9.1f} {c['us_per_step']:8.1f} "
          f"{'' if floor is None else f'{floor:8.1f}':>8s} {'' if ratio is None else f'{ratio:7.1f}':>7s}",
          flush=True)


def markdown(results: dict) -> str:
    d = results.get("device") or {}
    lines = ["# Epidermis benchmark", "",
             f"Device: {d.get('name', 'none')}; copy bandwidth {d.get('bandwidth_Bps', 0) / 1e9:.0f} GB/s, "
             f"fp32 peak {d.get('fp32_flops', 0) / 1e12:.1f} TFLOP/s, launch from Python "
             f"{d.get('launch_s', 0) * 1e6:.1f} µs, graph node {d.get('graph_node_s', 0) * 1e6:.1f} µs", "",
             "| case | engine | cells | elements | steps | wall s | steps/s | µs/step | floor µs | bytes/elem·step | flops/elem·step | candidates | pairs | × floor |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for c in results["cases"]:
        def f(key, fmt):
            v = c.get(key)
            return "" if v is None else format(v, fmt)
        lines.append(f"| {c['case']} | {c['engine']} | {c['cells']} | {c['elements']} | {c['steps']} | "
                     f"{c['wall_seconds']:.3f} | {c['steps_per_second']:.1f} | {c['us_per_step']:.1f} | "
                     f"{f('floor_us_per_step', '.1f')} | {f('bytes_per_element_step', '.0f')} | "
                     f"{f('flops_per_element_step', '.0f')} | {f('candidates_per_element', '.1f')} | "
                     f"{f('inter_pairs_per_element', '.1f')} | {f('measured_over_floor', '.1f')} |")
    full = [c for c in results["cases"] if c.get("mode") == "full"]
    for c in full:
        lines += ["", f"Full model: {c['cells_start']} → {c['cells']} cells, {c['layers']} layers, "
                      f"suprabasal fraction {c['suprabasal_fraction']:.2f}, {c['steps']} steps in "
                      f"{c['wall_seconds']:.1f} s (relaxation {c['relax_seconds']:.1f} s)."]
    if results["errors"]:
        lines += ["", "Errors:", *[f"- {e}" for e in results["errors"]]]
    return "\n".join(lines) + "\n"


def main(backend: str = "auto", out_dir: Path = Path("bench-results"), quick: bool = False) -> int:
    resolved, reason = resolve_backend(backend)
    print(f"# Epidermis benchmark\n# {reason}", flush=True)
    out_dir = Path(out_dir)
    results: dict = {"device": None, "cases": [], "errors": [], "cpu_cores": os.cpu_count(),
                     "quick": quick}
    steps = 300 if quick else 3000
    print(HEADER, flush=True)
    if resolved == "cuda":
        with backend_context("cuda"):
            device = device_ceilings()
            results["device"] = device
            sizes = [128, 1000] if quick else [128, 500, 1000, 2000, 5000]
            for cells in sizes:
                for boundary in ("periodic", "none"):
                    for search in ("cell_list", "centre_cutoff"):
                        if quick and search == "centre_cutoff" and cells > 128:
                            continue
                        label = f"movement {cells} {boundary} {search}"
                        _attempt(results, cuda_case, label,
                                 config(cells, boundary=boundary, search=search, pitch=TABLE3_PITCH),
                                 steps, device, breakdown=(cells == sizes[-1] and search == "cell_list"))
            for cells in ([128] if quick else [128, 1000]):
                for search in ("cell_list", "centre_cutoff"):
                    _attempt(results, cuda_case, f"genes {cells} periodic {search}",
                             config(cells, mode="genes", search=search, pitch=TABLE3_PITCH),
                             steps, device)
            big = 10_000 if quick else 100_000
            _attempt(results, cuda_case, f"movement {big} periodic cell_list",
                     config(big, pitch=TABLE3_PITCH), 50 if quick else 300, device, warmup=5,
                     breakdown=True)
            _attempt(results, full_model_case, device, out_dir, 20_000 if quick else 130_000)
    else:
        print("# CUDA not used: CPU cases only")
    if resolved == "cpu":
        compiled_cpu_rows(results, quick)
        ref = _attempt(results, cpu_case, COMPILED_CELLS, 5 if quick else 30)   # same case, NumPy
        if ref and "scaling" in results:
            ratio = results["scaling"]["one_thread_steps_per_cpu_second"] / ref["steps_per_cpu_second"]
            results["speedup_over_reference"] = ratio
            print(f"# compiled / NumPy reference, {COMPILED_CELLS} cells, one thread, per CPU-second: "
                  f"{ratio:.1f}x", flush=True)
    _attempt(results, cpu_case, 128, 20 if quick else 200)
    out_dir.mkdir(parents=True, exist_ok=True)
    save_bench("epidermis", results, out_dir)
    (out_dir / "bench.md").write_text(markdown(results))
    print()
    print(markdown(results))
    print(f"wrote {out_dir / 'epidermis.json'}, {out_dir / 'bench.md'}")
    return 0 if not results["errors"] else 1


if __name__ == "__main__":
    import sys

    sys.exit(main(quick="--quick" in sys.argv))
