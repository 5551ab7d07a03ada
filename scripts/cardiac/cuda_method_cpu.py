"""The CUDA single-cell method (an adaptive Runge-Kutta pair with Rush-Larsen gates, float64,
``AUTO_SOLVERS["cuda"]`` unless told) on the CPU, fast enough for 20 beats of the whole CellML
corpus at several tolerances: the research loop behind the choice of the CUDA single-cell
default (which tolerance keeps every corpus model within 0.5 % of CVODES at the fewest steps).

The loop is :mod:`app.sims.cardiac.solvers`' step (``rk_step``, ``error_ratio``, ``next_step``)
and the engine's adaptive control (stimulus edges as breakpoints, ``dt_max``, the step floor)
written once more as one compiled function per model, with the model's scalar program: the
engines' per-step overhead (about 1 ms on the CPU engine) would make this sweep take hours.
``--check`` compares it with the app's run (``CardiacSimulation`` on the CPU, the same
settings) on one beat: the same accepted steps and APD90.

Usage::

    python scripts/cardiac/cuda_method_cpu.py CORPUS_DIR --refs DIR --out OUT [--tolerances 1e-6,1e-5]
        [--models a,b] [--jobs 2] [--beats 20] [--no-coupled]   # --no-coupled: RL on coupled gates too
    python scripts/cardiac/cuda_method_cpu.py CORPUS_DIR --check MODEL
    python scripts/cardiac/cuda_method_cpu.py --table OUT --refs DIR

``--refs``: the corpus script's ``DIR/<model>.json`` rows (Myokit CVODES's beats). Results: a JSON
file per (model, tolerance) in OUT, skipped when present.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))     # cellml_corpus

BOUND = 0.5          # % of the CVODES APD90: the single-cell default's bound
RECORD_CAP = 4_000_000

LOOP = '''
@njit(cache=True, error_model='numpy', fastmath={'contract'})
def phi1(z):
    return 1.0 + 0.5 * z if abs(z) < 1e-5 else math.expm1(z) / z


@njit(cache=True, error_model='numpy', fastmath={'contract'})
def stimulus(t, table):
    out = 0.0
    for g in range(table.shape[0]):
        start, dur, amp, period, count = table[g, 0], table[g, 1], table[g, 2], table[g, 3], table[g, 4]
        k = math.floor((t - start) / period)
        if t >= start and k < count and t - start - k * period < dur:
            out += amp
    return out


@njit(cache=True, error_model='numpy', fastmath={'contract'})
def run(y0, p, table, bps, t_end, at, rt, h, dt_min, dt_max, safety, fac_min, fac_max, A, B, BL, C,
        order_low, record_from, rec_t, rec_v):
    ns, ng = NS, NNG
    nga = ns - ng
    s = len(B)
    kn = np.zeros((s, ng))
    ka = np.zeros((s, nga))
    kb = np.zeros((s, nga))
    y = y0.copy()
    ys = y0.copy()
    hi = y0.copy()
    lo = y0.copy()
    t = 0.0
    ib = 0
    acc = 0
    rej = 0
    nrec = 0
    status = 0
    while t < t_end * (1 - 1e-15):
        while ib < len(bps) and bps[ib] <= t * (1 + 1e-12) + 1e-12:
            ib += 1
        nxt = bps[ib] if ib < len(bps) else t_end
        limit = min(nxt, t_end) - t
        hh = min(h, dt_max, limit)
        if h < dt_min:
            status = 2
            break
        for i in range(s):
            for q in range(ng):
                acc_q = 0.0
                for j in range(i):
                    acc_q += A[i, j] * kn[j, q]
                ys[q] = y[q] + hh * acc_q
            for g in range(nga):
                abar = 0.0
                bbar = 0.0
                for j in range(i):
                    abar += A[i, j] * ka[j, g]
                    bbar += A[i, j] * kb[j, g]
                w0 = y[ng + g]
                ys[ng + g] = w0 + hh * (abar * w0 + bbar) * phi1(hh * abar)
            r = cell_rates(ys, stimulus(t + C[i] * hh, table), p)
            for q in range(ng):
                kn[i, q] = r[q]
            for g in range(nga):
                ka[i, g] = r[ng + g]
                kb[i, g] = r[ng + nga + g]
        err = 0.0
        for q in range(ns):
            if q < ng:
                sh = 0.0
                sl = 0.0
                for j in range(s):
                    sh += B[j] * kn[j, q]
                    sl += BL[j] * kn[j, q]
                hi[q] = y[q] + hh * sh
                lo[q] = y[q] + hh * sl
            else:
                g = q - ng
                ah = 0.0
                bh = 0.0
                al = 0.0
                bl = 0.0
                for j in range(s):
                    ah += B[j] * ka[j, g]
                    bh += B[j] * kb[j, g]
                    al += BL[j] * ka[j, g]
                    bl += BL[j] * kb[j, g]
                hi[q] = y[q] + hh * (ah * y[q] + bh) * phi1(hh * ah)
                lo[q] = y[q] + hh * (al * y[q] + bl) * phi1(hh * al)
            e = abs(hi[q] - lo[q]) / (at + rt * abs(y[q]))
            if not (e <= 1e300):
                e = math.inf
            err = max(err, e)
        if not math.isfinite(err):
            h = hh * fac_min
        elif err <= 0.0:
            h = hh * fac_max
        else:
            h = hh * min(fac_max, max(fac_min, safety * err ** (-1.0 / (order_low + 1))))
        if err <= 1.0:
            t = t + hh
            for q in range(ns):
                y[q] = hi[q]
            acc += 1
            if not (abs(y[0]) <= 200.0):
                status = 1
                break
            if t >= record_from and nrec < len(rec_t):
                rec_t[nrec] = t
                rec_v[nrec] = y[0]
                nrec += 1
        else:
            rej += 1
    return t, acc, rej, nrec, status
'''


def loop_source(model) -> str:
    """The generated module: the model's scalar program and :data:`LOOP` for its dimensions."""
    body = LOOP.replace("NS, NNG", f"{model.n_states}, {model.n_nongating}")
    return "\n".join(["import math", "import numpy as np", "from numba import njit", "", "",
                      "@njit(cache=True, error_model='numpy', fastmath={'contract'})",
                      model.python_source("cell_rates"), body])


def run_model(path: Path, stim: dict | None, beats: int, at: float, rt: float, coupled: bool = True,
              method: str = "bs32") -> dict:
    """``beats`` beats of ``path`` at ``at``/``rt`` with the CUDA default's other settings: the
    last beat's metrics, accepted and rejected steps, seconds (compilation excluded)."""
    from app.compute.jit import generated_module
    from app.sims.cardiac.config import AUTO_SOLVERS
    from app.sims.cardiac.metrics import beat_metrics, spontaneous_beat
    from app.sims.cardiac.model import load_model
    from app.sims.cardiac.singlecell import PERIOD
    from app.sims.cardiac.solvers import METHODS

    model = load_model(str(path))
    if coupled:
        model = model.with_coupled_stepped()
    module = generated_module("cuda_method_cpu", loop_source(model))
    tab = METHODS[method]
    s = len(tab.b)
    a = np.zeros((s, s))
    for i, row in enumerate(tab.a):
        a[i, :len(row)] = row
    settings = AUTO_SOLVERS["cuda"]
    if stim is not None:
        table = np.array([[stim["start"], stim["duration"], stim["amplitude"], PERIOD, beats]], float)
        t_end = stim["start"] + beats * PERIOD
        edges = np.concatenate([stim["start"] + np.arange(beats) * PERIOD,
                                stim["start"] + np.arange(beats) * PERIOD + stim["duration"]])
        bps = np.unique(edges[(edges > 0) & (edges < t_end)])
        onset = stim["start"] + (beats - 1) * PERIOD
    else:
        table, t_end, bps, onset = np.zeros((1, 5)), beats * PERIOD, np.zeros(0), None
        table[0, 3] = 1.0
    record_from = (onset - 1.0) if onset is not None else 0.0     # spontaneous: as the reference, all of it
    rec_t, rec_v = np.zeros(RECORD_CAP), np.zeros(RECORD_CAP)
    args = (model.initial_state().astype(np.float64), model.parameter_vector(), table, bps, t_end, at, rt,
            settings["dt"], settings["dt_min"], settings["dt_max"], 0.9, 0.2, 5.0, a, np.array(tab.b),
            np.array(tab.b_low), np.array(tab.c), tab.order_low, record_from, rec_t, rec_v)
    start = time.perf_counter()
    module.run(*(x.copy() if isinstance(x, np.ndarray) else x for x in args[:-2]), np.zeros(4), np.zeros(4))
    compile_s = time.perf_counter() - start
    start = time.perf_counter()
    t, acc, rej, nrec, status = module.run(*args)
    seconds = time.perf_counter() - start
    tt, vv = rec_t[:nrec], rec_v[:nrec]
    out = {"accepted": int(acc), "rejected": int(rej), "seconds": seconds, "compile_seconds": compile_s,
           "t_reached": float(t), "status": ["ok", "blow-up", "step floor"][int(status)], "at": at, "rt": rt}
    if onset is None:
        found = spontaneous_beat(tt, vv)
        if found is None:
            return out
        onset, window = found
    else:
        window = PERIOD
    out.update(beat_metrics(tt, vv, onset, None, window))
    return out


def _reference(refs: Path, stem: str) -> dict | None:
    row = refs / f"{stem}.json"
    return json.loads(row.read_text()) if row.exists() else None


def _job(args) -> None:
    path, out, beats, at, rt, coupled = args
    if Path(out).exists():                 # another runner did it meanwhile
        return
    from app.sims.cardiac.model import load_model
    from app.sims.cardiac.singlecell import protocol
    try:
        stim = protocol(load_model(str(path)), beats)
        row = run_model(Path(path), stim, beats, at, rt, coupled)
    except Exception as exc:
        row = {"error": f"{type(exc).__name__}: {exc}"}
    Path(out).write_text(json.dumps({"model": Path(path).stem, **row}, default=float) + "\n")
    print(f"{Path(path).stem:55s} {at:g} {row.get('apd90_ms', row.get('error'))} {row.get('accepted')} "
          f"{row.get('seconds', 0):.1f} s", flush=True)


def table(out: Path, refs: Path) -> str:
    """Per model and tolerance: the APD90 error against the CVODES reference's last beat,
    accepted steps, seconds; the largest error and the total per tolerance."""
    rows: dict[str, dict[float, dict]] = {}
    for p in sorted(out.glob("*.json")):
        r = json.loads(p.read_text())
        rows.setdefault(r["model"], {})[r.get("at", math.nan)] = r
    tols = sorted({t for v in rows.values() for t in v if np.isfinite(t)}, reverse=True)
    lines = ["| model | " + " | ".join(f"{t:g}: error, steps, s" for t in tols) + " |",
             "|---|" + "---|" * len(tols)]
    worst = {t: 0.0 for t in tols}
    steps = {t: 0 for t in tols}
    secs = {t: 0.0 for t in tols}
    missing = {t: [] for t in tols}
    for name, by_tol in sorted(rows.items()):
        ref = ((_reference(refs, name) or {}).get("reference") or {}).get("last") or {}
        cells = []
        for t in tols:
            r = by_tol.get(t)
            if r is None:
                cells.append("–")
                continue
            if "error" in r or r.get("status") != "ok":
                cells.append(r.get("error") or r["status"])
                missing[t].append(name)
                continue
            ours, theirs = r.get("apd90_ms"), ref.get("apd90_ms")
            err = 100 * (ours - theirs) / theirs if ours and theirs and theirs > 0 and np.isfinite(ours) else math.nan
            if np.isfinite(err):
                worst[t] = max(worst[t], abs(err))
            steps[t] += r["accepted"]
            secs[t] += r["seconds"]
            cells.append(f"{err:+.3f} %, {r['accepted']}, {r['seconds']:.2f}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    summary = [f"{t:g}: largest |error| {worst[t]:.3f} %, steps {steps[t]}, {secs[t]:.1f} s, failed "
               f"{missing[t] or 'none'}" for t in tols]
    return "\n".join(lines + [""] + summary) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("corpus", type=Path, nargs="?")
    ap.add_argument("--refs", type=Path)
    ap.add_argument("--out", type=Path, default=Path("cuda-method-cpu"))
    ap.add_argument("--models", default="")
    ap.add_argument("--tolerances", default="1e-6", help="abs = rel tolerances, comma-separated")
    ap.add_argument("--beats", type=int, default=20)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--reverse", action="store_true", help="smallest files first (a second runner)")
    ap.add_argument("--no-coupled", action="store_true", help="Rush-Larsen on coupled gates too")
    ap.add_argument("--check", default="", help="a model: this loop against the app's run, one beat")
    ap.add_argument("--table", type=Path, help="print the table of the results in this folder")
    args = ap.parse_args()
    if args.table:
        print(table(args.table, args.refs))
        return
    if args.check:
        check(args.corpus / f"{args.check}.cellml", float(args.tolerances.split(",")[0]))
        return
    files = sorted(args.corpus.glob("*.cellml"))
    if args.models:
        files = [f for f in files if f.stem in args.models.split(",")]
    args.out.mkdir(parents=True, exist_ok=True)
    jobs = []
    for tol in (float(x) for x in args.tolerances.split(",")):
        for f in files:
            target = args.out / f"{f.stem}@{tol:g}.json"
            if not target.exists():
                jobs.append((str(f), str(target), args.beats, tol, tol, not args.no_coupled))
    jobs.sort(key=lambda j: Path(j[0]).stat().st_size, reverse=not args.reverse)
    with mp.get_context("spawn").Pool(args.jobs) as pool:
        pool.map(_job, jobs, chunksize=1)


def check(path: Path, tol: float) -> None:
    """This loop and the app's run (CPU engine, bs32 at ``tol``, the CUDA default's other
    settings), one beat: APD90 and accepted steps of each."""
    from app.sims.cardiac.model import load_model
    from app.sims.cardiac.singlecell import ours, protocol
    from cellml_corpus import cuda_solver
    stim = protocol(load_model(str(path)), 1)
    mine = run_model(path, stim, 1, tol, tol)
    app = ours(path, stim, cuda_solver(tol), beats=1)
    print(f"loop: APD90 {mine.get('apd90_ms')} ms, {mine['accepted']} steps, {mine['seconds']:.2f} s; "
          f"app: APD90 {app['apd90_ms']} ms, {app['steps_accepted']} steps, {app['engine_seconds']:.2f} s")


if __name__ == "__main__":
    main()
