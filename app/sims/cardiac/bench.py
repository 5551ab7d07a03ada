"""``python -m app bench cardiac``: the paper's case (163,842-cell sphere, 300 ms, stimuli at
1 and 250 ms) with every method of Tables 1-5, timed, with the paper's accuracy measures
against a reference run made by the app (tightest setting: Bogacki-Shampine RL in float64,
at = 1e-3, rt = 1e-6, like the paper's Cash-Karp reference at rt 1e-6, at 1e-3)."""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path

import numpy as np

from app.compute.device import backend_context, cuda_status, resolve_backend
from app.sims.cardiac.metrics import accuracy
from app.sims.cardiac.simulation import CardiacSimulation
from app.sims.common.bench_record import save_bench
from app.sims.common.simulation import PRESETS, load_run_config

PRESET = PRESETS / "cardiac" / "01-sphere-paper.yaml"
PAPER = {  # GTX 580, single precision: (time s, steps, I_Rel, I_Abs, RRMS)
    ("rlfe", 0.01): (53.6, 30000, 4e-3, 0.37, 3.05e-2), ("rlfe", 0.025): (21.7, 12000, 2.5e-2, 2.22, 9.8e-2),
    ("rlfe", 0.05): (11.2, 6000, 6.2e-2, 5.38, 1.6e-1), ("rlfe", 0.06): (9.4, 5000, 7.7e-2, 6.65, 1.8e-1),
    ("midpoint", 0.01): (105.8, 30000, 5.5e-3, 0.47, 2.4e-2), ("midpoint", 0.025): (42.6, 12000, 1.4e-3, 0.12, 1.3e-2),
    ("midpoint", 0.05): (21.7, 6000, 1.5e-2, 1.28, 6.1e-2), ("midpoint", 0.06): (18.1, 5000, 2.0e-2, 1.784, 7.7e-2),
    ("rkf45", 1e-2, 1e-4): (45.9, 4480, 9e-3, 0.7869, 3.2e-2), ("rkf45", 1e-1, 1e-2): (36.83, 3565, 1.79e-2, 1.54, 7.2e-2),
    ("rkf45", 1e-1, 1e-1): (36.6, 3448, 1.99e-2, 1.71, 7.5e-2), ("rkf45", 1.0, 0.0): (33.5, 3226, 2.5e-2, 2.21, 9.0e-2),
    ("bs32", 1e-2, 1e-4): (37.7, 6423, 3.2e-4, 0.028, 1.2e-3), ("bs32", 1e-1, 1e-2): (25.2, 4276, 1.2e-2, 1.088, 5.5e-2),
    ("bs32", 1e-1, 1e-1): (24.1, 4054, 1.58e-2, 1.35, 6.7e-2), ("bs32", 1.0, 0.0): (23.0, 3932, 1.8e-2, 1.55, 7.4e-2),
    ("te21", 1e-2, 1e-4): None, ("te21", 1e-1, 1e-2): (33.29, 11614, 4.4e-4, 0.3752, 1.0e-2),
    ("te21", 1e-1, 1e-1): (31.1, 10545, 7e-3, 0.6616, 2.1e-2), ("te21", 1.0, 0.0): (18.59, 6433, 2.4e-2, 2.0, 7.7e-2),
}
PAPER_FIELDS = ("seconds", "steps", "i_rel_error", "i_abs_error", "rrms")
TOLERANCES = [(1e-2, 1e-4), (1e-1, 1e-2), (1e-1, 1e-1), (1.0, 0.0)]
TARGETS = {("rlfe", 0.05): 0.3, ("bs32", 1.0, 0.0): 1.0}   # seconds, the level-7 sphere on one GPU


def floor_bytes(n_states: int, width: int, slot_bytes: int) -> int:
    """Bytes per node per step the fused float32 RLFE step must move at least: the states read
    and written (2 × S × 4 B), the padded operator row (K slots of ``slot_bytes``: a neighbour's
    int16 offset or int32 index and its weight, as the CUDA engine stores them,
    :meth:`~app.sims.cardiac.node_order.NodeOrder.row_bytes_per_slot`), the neighbours' V
    (mostly cache hits: counted once, 4 B) and the activation bookkeeping (~32 B)."""
    return 2 * n_states * 4 + slot_bytes * width + 4 + 32


def split_floor_bytes(n_states: int, width: int, stages: list[int], slot_bytes: int) -> int:
    """Bytes per node per split step (``solver.split_dt``) at least: the states read and written
    once, the cell substeps in registers (2 × S × 4 B), the activation bookkeeping once (~32 B),
    and per diffusion stage (``stages``: each super-step's count; Godunov one super-step, Strang
    two) the operator row (K slots of ``slot_bytes``), the neighbours' V of the previous stage
    (mostly cache hits, 4 B), the stage before that read and the new one written (8 B)."""
    return 2 * n_states * 4 + 32 + sum(stages) * (slot_bytes * width + 4 + 8)


def row_slot_bytes(mesh, precision: str = "float32") -> int:
    """Bytes of an operator-row slot as the CUDA engine stores ``mesh``'s rows in a run of ``precision``."""
    from app.sims.cardiac.node_order import device_order, row_weight_dtype
    real = np.float32 if precision == "float32" else np.float64
    return device_order(mesh.neighbours).row_bytes_per_slot(row_weight_dtype(mesh.inv_d2, real))


def cases(every: bool):
    """The paper's settings of each method (``every``) or one per method (the targets')."""
    steps = [0.01, 0.025, 0.05, 0.06] if every else [0.05]
    out = [dict(method="rlfe", dt=dt) for dt in steps]
    out += [dict(method="grl1", dt=dt) for dt in steps]     # not in the paper: its cost and error against RLFE
    out += [dict(method="midpoint", dt=dt) for dt in ([0.025, 0.05, 0.06] if every else [0.05])]
    for m in ("rkf45", "bs32", "te21"):
        for at, rt in (TOLERANCES if every else [(1.0, 0.0)]):
            out.append(dict(method=m, at=at, rt=rt, dt=0.01))
    return out


def make_cfg(base, level: int, t_end: float, **solver):
    cfg = dataclasses.replace(base, mesh=dataclasses.replace(base.mesh, level=level),
                              protocol=dataclasses.replace(base.protocol, t_end=t_end))
    return dataclasses.replace(cfg, solver=dataclasses.replace(base.solver, **solver))


def run_once(cfg, backend: str) -> tuple[dict, dict]:
    sim = CardiacSimulation(cfg, backend)
    try:
        start, cpu = time.perf_counter(), time.process_time()
        if backend == "cuda":
            sim.engine.run_to_end()
        else:
            while not sim.finished:
                sim.advance()
        wall = time.perf_counter() - start
        cpu = time.process_time() - cpu
        sim.wall = wall
        arrays, summary = sim.results()
    finally:
        sim.close()
    return arrays, {**summary, "cpu_seconds": cpu}


SHEET = """domain: cardiac
mesh: {kind: sheet, nx: %d, ny: %d, dx_mm: 0.25}
protocol: {t_end: %g, stimuli: [{start: 1, duration: 2, amplitude: -40, region: {kind: rect, x1: 0.75}}]}
solver: {method: %s, dt: 0.05, precision: float64, lookup_tables: %s}
output: {random_probes: 0, probe_cells: [0], dt_save: 1.0}
"""


def sheet_throughput(quick: bool) -> list[dict]:
    """Cell-steps/s of the compiled engine on a 100x100 sheet (RLFE, dt 0.05 ms) on 1..all
    threads, without and with voltage lookup tables, GRL1 on all threads (its cost per step
    against RLFE's), and of the NumPy reference on one core: the issue-13 fast-CPU rows. Rates per wall second and per CPU second of the process (the
    second is what a shared machine can compare)."""
    from app.compute.cpu_threads import cold_compile_seconds, thread_counts, threads
    from app.sims.cardiac.config import load_config
    from app.sims.common.config import parse_yaml

    side, t_end = (40, 2.0) if quick else (100, 10.0)
    steps = int(round(t_end / 0.05))
    rows = []
    print(f"# compiled CPU engine: {side}x{side} sheet, RLFE dt 0.05 ms, {steps} steps; first use "
          f"{cold_compile_seconds('app.sims.cardiac.compiled:warm_up'):.1f} s (empty cache)")
    every, most = thread_counts(), [max(thread_counts())]
    for backend, method, lookup, counts in (("cpu", "rlfe", False, every), ("cpu", "rlfe", True, every),
                                            ("cpu", "grl1", False, most), ("cpu", "grl1", True, most),
                                            ("cpu-reference", "rlfe", False, [1])):
        cfg = load_config(parse_yaml(SHEET % (side, side, t_end, method, str(lookup).lower()), "<bench sheet>"))
        for n in counts:
            with threads(n):
                if backend == "cpu":
                    run_once(cfg, backend)                       # compile, build the tables
                _, summary = run_once(cfg, backend)
                cpu = summary["cpu_seconds"]                     # the stepping loop's, all threads
            rate = side * side * steps / summary["wall_seconds"]
            row = {"engine": backend, "method": method, "lookup_tables": lookup, "threads": n, "cells": side * side,
                   "steps": steps, "wall_seconds": summary["wall_seconds"], "cpu_seconds": cpu,
                   "cell_steps_per_second": rate, "cell_steps_per_cpu_second": side * side * steps / cpu}
            rows.append(row)
            print(f"  {backend:14s} {method:5s} tables {'on ' if lookup else 'off'} {n:3d} threads  "
                  f"{summary['wall_seconds']:7.3f} s  {rate:10.3g} cell-steps/s  {rate / n:10.3g} per thread  "
                  f"{row['cell_steps_per_cpu_second']:10.3g} per CPU second", flush=True)
    return rows


def hbm_bandwidth() -> float:
    """The device's peak memory bandwidth (bytes/s): 2 transfers per memory clock over the bus
    (H100 SXM: 2 x 2619 MHz x 5120 bit = 3.35 TB/s)."""
    import pycuda.driver as cuda
    dev = cuda.Context.get_device()
    clock_hz = dev.get_attribute(cuda.device_attribute.MEMORY_CLOCK_RATE) * 1e3
    bus_bytes = dev.get_attribute(cuda.device_attribute.GLOBAL_MEMORY_BUS_WIDTH) / 8
    return 2.0 * clock_hz * bus_bytes


MODEL_CASES = [  # (label, model file, method, dt, stimulus amplitude uA/uF, duration ms, precision, lookup tables)
    ("CRN 1998 (imported CellML)", "courtemanche_ramirez_nattel_1998", "rlfe", 0.05, -20.0, 2.0, "float32", False),
    ("CRN 1998 (imported CellML)", "courtemanche_ramirez_nattel_1998", "rlfe", 0.05, -20.0, 2.0, "float32", True),
    ("CRN 1998 (imported CellML)", "courtemanche_ramirez_nattel_1998", "grl1", 0.05, -20.0, 2.0, "float32", False),
    ("CRN 1998 (imported CellML)", "courtemanche_ramirez_nattel_1998", "grl1", 0.05, -20.0, 2.0, "float32", True),
    ("O'Hara-Rudy 2011 endo", "ohara_rudy_2011_endo", "rlfe", 0.01, -80.0, 1.0, "float64", False),
    ("O'Hara-Rudy 2011 endo", "ohara_rudy_2011_endo", "rlfe", 0.01, -80.0, 1.0, "float64", True),
    ("O'Hara-Rudy 2011 endo", "ohara_rudy_2011_endo", "rlfe", 0.01, -80.0, 1.0, "float32", False),
    ("O'Hara-Rudy 2011 endo", "ohara_rudy_2011_endo", "rlfe", 0.01, -80.0, 1.0, "float32", True),
    ("O'Hara-Rudy 2011 endo", "ohara_rudy_2011_endo", "rlfe", 0.01, -80.0, 1.0, "mixed", True),
    ("O'Hara-Rudy 2011 endo", "ohara_rudy_2011_endo", "grl1", 0.01, -80.0, 1.0, "float32", False),
    ("O'Hara-Rudy 2011 endo", "ohara_rudy_2011_endo", "grl1", 0.01, -80.0, 1.0, "float32", True),
]


def model_rows(base, level: int, t_end: float, backend: str = "cuda", bandwidth: float | None = None) -> list[dict]:
    """Imported models on the sphere, RLFE and GRL1 on CUDA: time, and the bandwidth floor (the state read
    and written once per step at the device's peak memory bandwidth). A run that stops (a
    non-finite state) is a row with its reason."""
    from app.sims.cardiac.engine import RunStopped
    from app.sims.cardiac.config import ModelSettings
    from app.sims.cardiac.model import load_model

    bandwidth = bandwidth or hbm_bandwidth()
    n_cells = 10 * 4 ** level + 2
    rows = []
    for label, name, method, dt, amplitude, duration, precision, lookup in MODEL_CASES:
        model = load_model(name)
        stimuli = [dataclasses.replace(st, amplitude=amplitude, duration=duration) for st in base.protocol.stimuli]
        cfg = dataclasses.replace(base, model=ModelSettings(file=name),
                                  protocol=dataclasses.replace(base.protocol, stimuli=stimuli))
        cfg = make_cfg(cfg, level, t_end, method=method, dt=dt, precision=precision, lookup_tables=lookup)
        run_once(make_cfg(cfg, level, 2.0), backend)   # compile
        try:
            arrays, summary = run_once(cfg, backend)
        except (RunStopped, RuntimeError) as exc:
            print(f"{label:28s} {precision} lookup {'on ' if lookup else 'off'}: stopped: {exc}", flush=True)
            rows.append({"model": label, "file": name, "method": method, "precision": precision,
                         "lookup_tables": lookup, "stopped": str(exc)})
            continue
        steps = summary["steps_accepted"]
        size = 4 if precision == "float32" else 8
        state_bytes = 2 * model.n_states * size * n_cells              # read + write
        floor = steps * state_bytes / bandwidth
        act = arrays["activation_time"]
        row = {"model": label, "file": name, "method": method, "precision": precision, "lookup_tables": lookup,
               "states": model.n_states,
               "gates": model.n_gates,
               "dt": dt, "steps": steps, "wall_seconds": summary["wall_seconds"],
               "bytes_per_step": state_bytes, "bandwidth_bytes_per_s": bandwidth,
               "floor_seconds": floor, "ratio_to_floor": summary["wall_seconds"] / floor,
               "activated_fraction": float(np.isfinite(act).mean()),
               "stopped": summary.get("stopped", {}).get("reason", "")}
        rows.append(row)
        print(f"{label:28s} {model.n_states:3d} states  {precision}  lookup {'on ' if lookup else 'off'}  "
              f"{method.upper()} dt {dt:g}  {steps:6d} steps  "
              f"{summary['wall_seconds']:7.3f} s  floor {floor:6.3f} s ({state_bytes / 1e6:.1f} MB/step at "
              f"{bandwidth / 1e12:.2f} TB/s)  ratio {row['ratio_to_floor']:5.2f}  "
              f"activated {row['activated_fraction']:.3f}{'  STOPPED ' + row['stopped'] if row['stopped'] else ''}",
              flush=True)
    return rows


def paper_rows(base, level: int, t_end: float, resolved: str, every: bool) -> dict:
    """The paper's table (Tables 1-5) on the level-``level`` sphere: a float64 reference run,
    then every method timed, its errors against the reference, the paper's figures beside it
    and, on CUDA, the fixed-step methods' memory floor; what the reference's waves did (how
    much of the sphere S1 and S2 excited, when S1's wave covered it) so the page's claims about
    the case come from the run."""
    from app.sims.cardiac.engine import build_mesh
    from app.sims.cardiac.model import config_model

    n_cells = 10 * 4 ** level + 2
    s2 = max(st.start for st in base.protocol.stimuli)
    out: dict = {"level": level, "n_cells": n_cells, "t_end": t_end, "s2_ms": s2, "backend": resolved,
                 "rows": []}
    if resolved == "cuda":
        mesh = build_mesh(make_cfg(base, level, t_end))
        n_states, slot = config_model(base.model).n_states, row_slot_bytes(mesh)
        out.update(bandwidth_bytes_per_s=hbm_bandwidth(), neighbour_width=mesh.width, states=n_states,
                   row_bytes_per_slot=slot, floor_bytes_per_cell_step=floor_bytes(n_states, mesh.width, slot))
    t0 = time.perf_counter()
    ref_cfg = make_cfg(base, level, t_end, method="bs32", at=1e-3, rt=1e-6, dt=0.005,
                       precision="float64", dt_max=0.5)
    ref, ref_sum = run_once(ref_cfg, resolved)
    act, last = ref["activation_time"], ref["activation_last"]
    s1 = act < s2                                   # NaN (never activated) compares False
    if not s1.any():
        raise RuntimeError(f"the reference run did not excite the level-{level} sphere (the 5° cap holds too few "
                           "cells): its errors would be those of tissue at rest")
    out["reference"] = {**{k: ref_sum[k] for k in ("steps_accepted", "steps_rejected", "wall_seconds")},
                        "method": "bs32", "at": 1e-3, "rt": 1e-6, "precision": "float64",
                        "s1_excited_fraction": float(s1.mean()), "s1_last_activation_ms": float(act[s1].max()),
                        "s2_excited_fraction": float((last >= s2).mean())}
    print(f"reference: bs32 float64 at 1e-3 rt 1e-6: {ref_sum['steps_accepted']} steps, "
          f"{ref_sum['wall_seconds']:.2f} s ({time.perf_counter() - t0:.1f} s with compile); S1 excited "
          f"{s1.mean():.1%} of the cells, the last at {act[s1].max():.1f} ms; S2 excited "
          f"{out['reference']['s2_excited_fraction']:.1%}", flush=True)
    for case in cases(every):
        cfg = make_cfg(base, level, t_end, **case)
        if resolved == "cuda":       # compile (and warm up) outside the timing
            run_once(make_cfg(base, level, 2.0, **case), resolved)
        try:
            arrays, summary = run_once(cfg, resolved)
            acc = accuracy(ref["probe_t"], ref["probe_V"], arrays["probe_t"], arrays["probe_V"])
            row = {**case, "wall_seconds": summary["wall_seconds"], "steps": summary["steps_accepted"],
                   "rejected": summary["steps_rejected"], **acc,
                   "stopped": summary.get("stopped", {}).get("reason", "")}
            if "floor_bytes_per_cell_step" in out and "at" not in case:
                row["floor_seconds"] = (out["floor_bytes_per_cell_step"] * n_cells * row["steps"]
                                        / out["bandwidth_bytes_per_s"])
        except Exception as exc:          # a failing method is a result too (the paper's 'fail')
            row = {**case, "error": str(exc)}
        paper = PAPER.get(_key(row), "absent")
        if paper != "absent":
            row["paper"] = None if paper is None else dict(zip(PAPER_FIELDS, paper))
        if _key(row) in TARGETS:
            row["target_seconds"] = TARGETS[_key(row)]
        out["rows"].append(row)
        _print_row(row)
    return out


def paper(backend: str = "auto", out_dir: Path = Path("bench-results"), quick: bool = False) -> int:
    """``python -m app bench cardiac --paper``: the paper's table alone (``cardiac-paper.json``):
    the level-7 sphere and every setting on CUDA; on the CPU the level-6 sphere (40,962 cells;
    at level 5 the 5° cap is too small to excite) and one setting per method; ``--quick``: that
    for 30 ms."""
    resolved, reason = resolve_backend(backend)
    _, base = load_run_config(PRESET)
    level, t_end = paper_size(resolved, quick)
    print(f"# the paper's case: level-{level} sphere ({10 * 4 ** level + 2} cells), {t_end:g} ms, "
          f"stimuli at 1 and 250 ms\n# {reason}")
    load_before = os.getloadavg()
    with backend_context(resolved):
        results = paper_rows(base, level, t_end, resolved, every=resolved == "cuda" and not quick)
    results.update(quick=quick, load_average_before=load_before, load_average_after=os.getloadavg())
    path = save_bench("cardiac-paper", results, out_dir, cuda=resolved == "cuda")
    print(f"\nwrote {path}")
    return 0


def paper_size(resolved: str, quick: bool) -> tuple[int, float]:
    """(sphere level, t_end ms) of the paper's case on this backend."""
    if quick:
        return 6, 30.0
    return (7 if resolved == "cuda" else 6), 300.0


def main(backend: str = "auto", out_dir: Path = Path("bench-results"), quick: bool = False) -> int:
    resolved, reason = resolve_backend(backend)
    if resolved == "cpu":
        save_bench("cardiac-sheet", {"cases": sheet_throughput(quick)}, out_dir)
    if resolved == "cuda":
        _, base = load_run_config(PRESET)
        level, t_end = paper_size(resolved, quick)
        print(f"# imported models, level-{level} sphere, {t_end:g} ms\n# {reason}")
        with backend_context(resolved):
            models = model_rows(base, level, t_end)
        path = save_bench("cardiac", {"device": cuda_status().devices[0].name, "n_cells": 10 * 4 ** level + 2,
                                      "t_end": t_end, "models": models}, out_dir)
        print(f"\nwrote {path}")
    return paper(backend, out_dir, quick)


def _key(row):
    if "at" in row:
        return (row["method"], row["at"], row["rt"])
    return (row["method"], row["dt"])


def _print_row(row) -> None:
    setting = f"at={row['at']:g} rt={row['rt']:g}" if "at" in row else f"dt={row['dt']:g}"
    paper = PAPER.get(_key(row))
    ptxt = "fail" if paper is None and _key(row) in PAPER else (
        f"paper {paper[0]:6.1f} s {paper[1]:6d} steps I_Rel {paper[2]:.2g} I_Abs {paper[3]:.3g} RRMS {paper[4]:.2g}"
        if paper else "")
    if "error" in row:
        print(f"{row['method']:9s} {setting:18s} ERROR {row['error'][:80]}   | {ptxt}")
        return
    flag = f" STOPPED: {row['stopped']}" if row["stopped"] else ""
    print(f"{row['method']:9s} {setting:18s} {row['wall_seconds']:8.3f} s {row['steps']:6d} steps "
          f"(+{row['rejected']} rej) I_Rel {row['i_rel_error']:.2g} I_Abs {row['i_abs_error']:.3g} "
          f"RRMS {row['rrms']:.2g}{flag}   | {ptxt}", flush=True)


def single_cell(out_dir: Path = Path("bench-results"), quick: bool = False) -> int:
    """``python -m app bench cardiac --single-cell``: every shipped model's single cell, 20 beats
    at 1 Hz with its annotated stimulus (2 models, 3 beats with ``--quick``), the single-cell
    default (``auto``: CVODE on the CPU) against Myokit's CVODES at 1e-8 on this machine, side
    by side: APD90 and seconds (compilation excluded on both sides), with the 1-minute load
    average at each row (a shared machine's load slows both). Needs SUNDIALS for Myokit
    (``apt-get install libsundials-dev``); without it, ours alone."""
    import os
    from app.sims.cardiac import singlecell as sc
    from app.sims.cardiac.model import load_model, shipped_models

    names = [n for n in shipped_models() if n != "courtemanche_1998_ikach"]
    names, beats = (names[:2], 3) if quick else (names, sc.BEATS)
    print(f"# single cells, {beats} beats at 1 Hz, each model's annotated stimulus; ours: the single-cell "
          f"default (auto: CVODE on the CPU); reference: Myokit CVODES at {sc.TOLERANCE:g}; seconds without compilation")
    rows, totals = [], [0.0, 0.0]
    for name in names:
        path = shipped_models()[name]
        model = load_model(name)
        stim = sc.protocol(model, beats)
        mine = sc.ours(path, stim, beats=beats)
        try:
            ref = sc.reference(path, model, stim, beats)
            ref_apd, ref_s = (ref["last"] or {}).get("apd90_ms", float("nan")), ref["seconds"]
        except Exception as exc:           # no SUNDIALS for Myokit: ours alone, said so
            ref_apd, ref_s = float("nan"), float("nan")
            print(f"  ({name}: Myokit CVODES unavailable: {type(exc).__name__}: {str(exc)[:120]})")
        err = 100.0 * (mine.get("apd90_ms", float("nan")) - ref_apd) / ref_apd
        row = {"model": name, "beats": beats, "apd90_ms": mine.get("apd90_ms"), "apd90_cvodes_ms": ref_apd,
               "apd90_error_percent": err, "seconds": mine["engine_seconds"], "seconds_myokit": ref_s,
               "steps": mine["steps_accepted"], "load_average_1min": os.getloadavg()[0]}
        rows.append(row)
        totals[0] += mine["engine_seconds"]
        totals[1] += ref_s if np.isfinite(ref_s) else 0.0
        print(f"{name:48s} APD90 {row['apd90_ms']:8.2f} ms (CVODES {ref_apd:8.2f}, {err:+.3f} %)  "
              f"ours {mine['engine_seconds']:7.2f} s  Myokit {ref_s:7.2f} s  {mine['steps_accepted']:6d} steps  "
              f"load {row['load_average_1min']:.1f}",
              flush=True)
    print(f"total: ours {totals[0]:.2f} s, Myokit {totals[1]:.2f} s")
    path = save_bench("cardiac-single-cell", {"rows": rows, "seconds": totals[0], "seconds_myokit": totals[1]},
                      out_dir, cuda=False)
    print(f"\nwrote {path}")
    return 0
