"""Every CellML model of a folder (the Chaste cellml repository's ``cellml/``) through the app,
against Myokit's CVODES, and the table of docs/user-guide/cellml-corpus.md.

Per model:

* **import**: ``load_model``; a refusal is a row with its reason.
* **reference**: Myokit's CVODES (SUNDIALS, BDF/Newton) at abs = rel tolerance 1e-8, max step
  1 ms, 20 beats at 1 Hz with the model's annotated stimulus (amplitude, duration and offset
  from the oxmeta annotations, period 1000 ms): the model's stimulus variable is replaced by
  Myokit's pacing variable times the amplitude in the model's units (the importer's stimulus
  scale, checked: dV/dt changes by exactly -amplitude). The last beat is logged every 0.005 ms
  (V and dV/dt) for the metrics; the time is that of a first run (then reset) of all 20 beats logging V at
  every step (Myokit's default), compilation excluded. A model without an annotated stimulus
  runs unpaced for 20 s and its last spontaneous beat is measured.
* **ours, single cell**: the app's run (``CardiacSimulation``, compiled CPU engine) with the
  single-cell default solver (CVODE, :data:`SINGLE_CELL`), the same protocol, the beat metrics
  of its summary; time = engine seconds, compilation (or the numba cache load) excluded.
* **ours, tissue**: a 2x2 sheet (D = 0.06 mm²/ms, every cell paced) with CVODE on the whole
  sheet (its default tolerances) for the first beat, APD90 of cell 0 against the reference's
  first beat (identical cells paced together: the single cell's beat).

Metrics: ``app.sims.cardiac.metrics.beat_metrics`` (APD90 from the time of max dV/dt).

* ``--runs cuda``: the single-cell default on CUDA (``auto``: RODAS4 in float64 at the tolerance
  of :data:`app.sims.cardiac.config.AUTO_SOLVERS`) and the same method at each ``--cuda-tolerances``
  (abs = rel) where it misses the bound, the same protocol; results in ``DIR/cuda/``.
* ``--runs explicit``: the tissue solvers (:data:`EXPLICIT_METHODS`: Rush–Larsen forward Euler
  and the generalized Rush–Larsen GRL1, float32, the tissue default precision) as a single
  cell on the compiled CPU engine (the CUDA stage kernel's method), at each of
  :data:`EXPLICIT_STEPS` until one is within :data:`EXPLICIT_BOUND` of the reference; results
  in ``DIR/explicit/`` (a result already there is kept; ``--redo-ours`` runs it again). The
  table shows the largest step and the method within the bound; where none is, the pair of
  states GRL1 steps apart with the fastest exchange at rest (``stability.split_coupling``), the
  diagnosis. ``--runs explicit-cuda``: the same on CUDA (``DIR/explicit-cuda/``, a column of its own).
* ``--runs rodas4``: the Rosenbrock method (``solver.method: rodas4`` at its defaults, the
  CUDA default) on the CPU, the same protocol; a run stops itself before ``--timeout``
  (``DIR/rodas4/``, a column).

Usage (SUNDIALS: ``apt-get install libsundials-dev``; check with ``python -m myokit system``)::

    python scripts/cardiac/cellml_corpus.py CORPUS_DIR [--out DIR] [--models a,b] [--table]
    python scripts/cardiac/cellml_corpus.py CORPUS_DIR --out DIR --runs cuda,explicit --jobs 15

Each model's result is a JSON file in ``--out`` (default ``corpus-results/``; per kind of run a
subfolder: bundle the folder, e.g. with tar, to bring a GPU machine's results back), skipped when it
exists; ``--table`` writes docs/user-guide/cellml-corpus.md from them (the references come
from the first kind of run; the others need no SUNDIALS).
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from app.sims.cardiac.singlecell import BEATS, ours, protocol, reference  # noqa: E402

SINGLE_CELL = "{}"                                             # the single-cell defaults: CVODE
ROSENBROCK = "{method: rodas4}"                                # RODAS4 at its defaults (on the CPU engines)
TISSUE = "{method: cvode, precision: float64}"                 # implicit, a 2x2 sheet
TABLE = ROOT / "docs" / "user-guide" / "cellml-corpus.md"
EXPLICIT_STEPS = (0.05, 0.01, 0.005)                           # ms: the tissue default, then finer
EXPLICIT_METHODS = ("rlfe", "grl1")                            # tried in this order at each step
EXPLICIT_BOUND = 2.0                                           # % of the CVODES APD90
SINGLE_CELL_BOUND = 0.5                                        # % (the single-cell default)
CLEAN_STOP_S = 30.0         # s: a CUDA run ends itself this long before the runner's kill (MPS-safe)


def one(path: Path, previous: dict | None = None) -> dict:
    """A model's row; with ``previous`` (an earlier row), its reference is kept, ours redone."""
    from app.sims.cardiac.cellml import CellMLImportError
    from app.sims.cardiac.model import load_model

    row: dict = {"model": path.stem}
    try:
        model = load_model(str(path))
    except CellMLImportError as exc:
        row["refused"] = str(exc).replace(str(path), path.name)
        return row
    row["states"], row["gates"] = model.n_states, model.n_gates
    stim = protocol(model)
    row["protocol"] = stim
    if previous is not None and ("reference" in previous or "reference_error" in previous):
        row.update({k: previous[k] for k in ("reference", "reference_error") if k in previous})
    else:
        try:
            row["reference"] = reference(path, model, stim)
        except Exception as exc:           # Myokit's own failure is a result too
            row["reference_error"] = f"{type(exc).__name__}: {exc}"
    for key, solver, mesh, beats in (("single", SINGLE_CELL, "{kind: single}", BEATS),
                                     ("sheet", TISSUE, "{kind: sheet, nx: 2, ny: 2, dx_mm: 0.1}", 1)):
        try:
            row[key] = ours(path, stim, solver, mesh, beats if stim else BEATS)
        except Exception as exc:
            row[key] = {"error": f"{type(exc).__name__}: {str(exc).replace(str(path), path.name)}"}
        if stim is None:
            break                      # a self-oscillating cell: no paced sheet
    return row


def _guarded(path: Path, stim: dict | None, solver: str, **options) -> dict:
    """:func:`ours`, or its error (the file's path shortened to its name)."""
    try:
        return ours(path, stim, solver, **options)
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {str(exc).replace(str(path), path.name)}"}


def _error_pct(result: dict, ref: dict | None) -> float:
    """|APD90 error| in % of ``ref`` (a beat's metrics); inf where either is missing."""
    err = _err(result.get("apd90_ms"), (ref or {}).get("apd90_ms"))
    return abs(err) if np.isfinite(err) else math.inf


def one_cuda(path: Path, tolerances: tuple[float, ...], ref: dict | None, budget_s: float | None = None) -> dict:
    """The single-cell default on CUDA (``auto``); where it misses :data:`SINGLE_CELL_BOUND`
    of the reference's last beat (``ref``: the row of the ``cpu`` run, if any), its method at each
    abs = rel tolerance. A run past ``budget_s`` stops itself: a row saying how far it got."""
    from app.sims.cardiac.config import AUTO_SOLVERS
    from app.sims.cardiac.model import load_model

    stim = protocol(load_model(str(path)))
    auto = _guarded(path, stim, SINGLE_CELL, backend="cuda", budget_s=budget_s)
    if "out_of_time_s" in auto:
        return {"model": path.stem, "timeout_s": auto["out_of_time_s"], "reached": auto}
    row: dict = {"model": path.stem, "auto": auto}
    last = ((ref or {}).get("reference") or {}).get("last")
    if last is None or _error_pct(auto, last) <= SINGLE_CELL_BOUND:    # no reference yet: the default alone
        return row
    for tol in tolerances:
        row[f"{AUTO_SOLVERS['cuda']['method']} {tol:g}"] = _guarded(path, stim, cuda_solver(tol), backend="cuda")
    return row


def cuda_solver(tol: float) -> str:
    """The solver block of the CUDA single-cell default (:data:`AUTO_SOLVERS`) at abs = rel
    tolerance ``tol`` (numbers as YAML reads them: ``1e-06`` would be text)."""
    from app.sims.cardiac.config import AUTO_SOLVERS
    c = {**AUTO_SOLVERS["cuda"], "at": tol, "rt": tol}
    numbers = ", ".join(f"{k}: {v:.15e}" for k, v in c.items() if isinstance(v, float))
    return f"{{method: {c['method']}, {numbers}, precision: {c['precision']}}}"


def one_explicit(path: Path, ref: dict | None, previous: dict | None = None, backend: str = "cpu") -> dict:
    """The tissue solvers (:data:`EXPLICIT_METHODS`, float32) on one cell at each of
    :data:`EXPLICIT_STEPS` until one is within :data:`EXPLICIT_BOUND` of the reference (``ref``:
    the row of the ``cpu`` run; none: the first step and method only); the results in
    ``previous`` (an earlier row) that ran to the end are kept, not run again. The first beat of a paced model
    (tissue runs are short), the 20 s of a self-oscillating one. ``backend`` cuda: on the GPU
    (``--runs explicit-cuda``), the model in float32 as tissue runs evaluate it."""
    from app.sims.cardiac.model import load_model
    from app.sims.cardiac.stability import split_coupling

    stim = protocol(load_model(str(path)))
    ref_beats = ((ref or {}).get("reference") or {}).get("beats") or [None]
    target = ref_beats[0] if stim else ref_beats[-1]
    row: dict = {"model": path.stem}
    for dt in EXPLICIT_STEPS:
        for method in EXPLICIT_METHODS:
            key = f"{method} {dt:g}"
            kept = (previous or {}).get(key)
            if kept and ("error" in kept or kept.get("stopped")):
                kept = None                                      # cheap, and a refusal may now say why
            result = kept or _guarded(
                path, stim, f"{{method: {method}, dt: {dt!r}, precision: float32}}", beats=1 if stim else BEATS,
                backend=backend)
            row[key] = result
            if target is None or _error_pct(result, target) <= EXPLICIT_BOUND:   # no reference yet: the first
                return row
    model = load_model(str(path))
    split = split_coupling(model, model.parameter_vector())       # the diagnosis of a miss
    if split is not None:
        row["split_coupling"] = {"rate_per_ms": split.rate, "states": list(split.states)}
    return row


def one_rosenbrock(path: Path, budget_s: float | None = None) -> dict:
    """The Rosenbrock method (:data:`ROSENBROCK`: rodas4 at its default tolerances) on one cell,
    the corpus protocol; a run past ``budget_s`` stops itself (a row saying how far it got)."""
    from app.sims.cardiac.cellml import CellMLImportError
    from app.sims.cardiac.model import load_model

    try:
        stim = protocol(load_model(str(path)))
    except CellMLImportError as exc:                  # the cpu row says why
        return {"model": path.stem, "refused": str(exc).replace(str(path), path.name)}
    run = _guarded(path, stim, ROSENBROCK, budget_s=budget_s)
    if "out_of_time_s" in run:
        return {"model": path.stem, "timeout_s": run["out_of_time_s"], "reached": run}
    return {"model": path.stem, "rodas4": run}


KINDS: dict[str, Callable[..., dict]] = {"cpu": one, "cuda": one_cuda, "explicit": one_explicit,
                                         "explicit-cuda": one_explicit, "rodas4": one_rosenbrock}


def _worker(kind: str, path: str, out: str, redo_ours: bool, tolerances: tuple[float, ...],
            budget_s: float | None = None) -> None:
    cpu_row = Path(out).parent.parent / Path(out).name       # DIR/<model>.json, the cpu run's
    ref = json.loads(cpu_row.read_text()) if kind != "cpu" and cpu_row.exists() else None
    if kind == "cpu":
        previous = json.loads(Path(out).read_text()) if redo_ours and Path(out).exists() else None
        row = one(Path(path), previous)
    elif kind == "cuda":
        row = one_cuda(Path(path), tolerances, ref, budget_s)
    elif kind == "rodas4":
        row = one_rosenbrock(Path(path), budget_s)
    else:
        previous = json.loads(Path(out).read_text()) if Path(out).exists() else None
        row = one_explicit(Path(path), ref, previous, "cuda" if kind == "explicit-cuda" else "cpu")
    Path(out).write_text(json.dumps(row, indent=1, default=float) + "\n")


def _target(out: Path, kind: str, stem: str) -> Path:
    return out / f"{stem}.json" if kind == "cpu" else out / kind / f"{stem}.json"


def run(corpus: Path, out: Path, models: list[str], timeout: float, redo_ours: bool = False,
        reverse: bool = False, kinds: tuple[str, ...] = ("cpu",), jobs: int = 1,
        tolerances: tuple[float, ...] = ()) -> None:
    """Every (kind, model) not yet in ``out``, ``jobs`` child processes at a time. A CUDA run stops
    itself :data:`CLEAN_STOP_S` before ``timeout`` seconds; any child still alive at ``timeout``
    is killed (a row saying so)."""
    files = sorted(corpus.glob("*.cellml"), reverse=reverse)
    if models:
        files = [f for f in files if f.stem in models]
    tasks = [(k, f) for f in files for k in kinds if redo_ours or not _target(out, k, f.stem).exists()]
    if jobs > 1:                                  # the largest first: fewer stragglers at the end
        tasks.sort(key=lambda task: -task[1].stat().st_size * (-1 if reverse else 1))
    for k in kinds:
        _target(out, k, "x").parent.mkdir(parents=True, exist_ok=True)
    ctx = mp.get_context("spawn")
    running: list[tuple[str, Path, mp.process.BaseProcess, float]] = []
    while tasks or running:
        while tasks and len(running) < jobs:
            k, f = tasks.pop(0)
            budget = max(timeout - CLEAN_STOP_S, 1.0) if k in ("cuda", "rodas4") else None
            proc = ctx.Process(target=_worker, args=(k, str(f), str(_target(out, k, f.stem)), redo_ours,
                                                     tolerances, budget))
            proc.start()
            running.append((k, f, proc, time.perf_counter()))
        time.sleep(0.2)
        for item in list(running):
            k, f, proc, start = item
            if proc.is_alive() and time.perf_counter() - start < timeout:
                continue
            if proc.is_alive():
                proc.terminate()
                proc.join()
                _target(out, k, f.stem).write_text(json.dumps({"model": f.stem, "timeout_s": timeout}) + "\n")
            running.remove(item)
            print(f"{k:8s} {f.stem:60s} {time.perf_counter() - start:7.1f} s", flush=True)


def _err(ours_apd, ref_apd) -> float:
    """The APD90 error in %; nan where either is missing or not a duration (the beat's max dV/dt
    after its repolarisation: no action potential to measure)."""
    if ours_apd is None or ref_apd is None or not (np.isfinite(ours_apd) and np.isfinite(ref_apd)):
        return math.nan
    if ours_apd <= 0 or ref_apd <= 0:
        return math.nan
    return 100.0 * (ours_apd - ref_apd) / ref_apd


def _f(x, fmt: str) -> str:
    return "–" if x is None or (isinstance(x, float) and not np.isfinite(x)) else format(x, fmt)


def _short(text: str) -> str:
    """A Markdown cell: the message's last line."""
    return " ".join(text.strip().splitlines()[-1:]).replace("|", "/")[:160]


def _not_finished(run: dict, steps: bool = True) -> str:
    """A row that stopped itself at its time budget: how far it got (and in how many steps)."""
    got = run.get("reached")
    if not got:
        return f"not finished within {run['timeout_s']:.0f} s"
    taken = f", {got['steps_accepted']:,} steps" if steps else ""
    return (f"not finished within {run['timeout_s']:.0f} s "
            f"(at {got['t_ms'] / 1e3:.1f} of {got['t_end_ms'] / 1e3:.1f} s{taken})")


def _run_cell(res: dict, last: dict) -> tuple[str, float]:
    """One run's APD90 error against ``last``, engine seconds and accepted steps, and that error
    (nan: failed)."""
    if "error" in res or res.get("stopped"):
        return f"failed: {_short(res.get('error') or res['stopped'])}", math.nan
    err = _err(res.get("apd90_ms"), last.get("apd90_ms"))
    return (f"{_f(err, '+.3f')} % ({_f(res.get('engine_seconds'), '.1f')} s, "
            f"{res.get('steps_accepted', 0):,} steps)"), err


def _cuda_cell(run: dict | None, last: dict) -> tuple[str, float]:
    """The CUDA column: the default's cell (and the tighter tolerances tried where it missed),
    and its error (nan: not run)."""
    if not run:
        return "not run", math.nan
    if "timeout_s" in run:
        return _not_finished(run), math.nan
    text, err = _run_cell(run["auto"], last)
    for key, res in run.items():
        if key not in ("model", "auto"):                 # the tighter tolerances tried
            text += f" ({key}: {_f(_err(res.get('apd90_ms'), last.get('apd90_ms')), '+.3f')} %)"
    return text, err


def _rosenbrock_cell(run: dict | None, last: dict) -> tuple[str, float]:
    """The rodas4 column: the run's cell and its error (nan: not run, refused or not finished)."""
    if not run:
        return "not run", math.nan
    if "timeout_s" in run:
        return _not_finished(run, steps=False), math.nan
    if "refused" in run:
        return "refused at import", math.nan
    return _run_cell(run["rodas4"], last)


def _explicit_cell(run: dict | None, target: dict) -> tuple[str, str | float | None]:
    """The tissue-solver column: the error of each method at each step tried, and the first
    (largest step) within :data:`EXPLICIT_BOUND` as "method dt" (None: none; nan: not run)."""
    if not run or "timeout_s" in run:
        return ("not run" if not run else f"not finished within {run['timeout_s']:.0f} s"), math.nan
    if not np.isfinite(_err(1.0, target.get("apd90_ms"))):
        return "no reference APD90 for this beat", math.nan
    parts: list[str] = []
    within: str | None = None
    for dt in EXPLICIT_STEPS:
        for method in EXPLICIT_METHODS:
            res = run.get(f"{method} {dt:g}")
            if res is None:
                continue
            label = f"{method.upper()} {dt:g} ms"
            message = res.get("error") or res.get("stopped")
            refused = re.search(r"is unstable .* mode led by (\S+) by (\S+),", message or "")
            if refused:                                          # the app's refusal of an unstable step
                parts.append(f"{label}: refused, unstable at rest (the mode of {refused[1]} grows "
                             f"×{refused[2]} a step)")
                continue
            if message:
                parts.append(f"{label}: {_short(message)}")
                continue
            err = _err(res.get("apd90_ms"), target.get("apd90_ms"))
            peak = _f(res.get("peak_mV"), ".0f")
            measured = f"{_f(err, '+.2f')} %" if np.isfinite(err) else f"no APD90 (peak {peak} mV)"
            parts.append(f"{label}: {measured}")
            if within is None and np.isfinite(err) and abs(err) <= EXPLICIT_BOUND:
                within = f"{method.upper()} {dt:g} ms"
    text = "; ".join(parts)
    if within is None and len(parts) == len(EXPLICIT_STEPS) * len(EXPLICIT_METHODS):
        split = run.get("split_coupling")
        cause = ""
        if split:
            a, b = split["states"]
            cause = (f"; GRL1 steps apart {a} and {b}, which exchange at {split['rate_per_ms']:.3g}/ms at rest "
                     f"(h·rate {min(EXPLICIT_STEPS) * split['rate_per_ms']:.2g} at {min(EXPLICIT_STEPS):g} ms)")
        text = (f"**not for tissue at ≥ {min(EXPLICIT_STEPS):g} ms** (no method within {EXPLICIT_BOUND:g} %"
                f"{cause}; CVODE up to 400 unknowns): {text}")
    return text, within


def table(out: Path) -> str:
    rows = [json.loads(p.read_text()) for p in sorted(out.glob("*.json"))]
    extra = {k: {p.stem: json.loads(p.read_text()) for p in (out / k).glob("*.json")}
             for k in ("cuda", "explicit", "explicit-cuda", "rodas4")}
    with_cuda, with_explicit_cuda = bool(extra["cuda"]), bool(extra["explicit-cuda"])   # columns where a GPU ran them
    head = ["model", "imported", "APD90 ours (ms)", "APD90 CVODES (ms)", "error"]
    head += ["CUDA default: error (time, steps)"] if with_cuda else []
    with_rosenbrock = bool(extra["rodas4"])
    head += ["rodas4: error (time, steps)"] if with_rosenbrock else []
    head += [f"tissue solvers (float32): error, bound {EXPLICIT_BOUND:g} %"]
    head += ["tissue solvers on CUDA"] if with_explicit_cuda else []
    head += ["sheet APD90 error (beat 1)",
             "time ours (s)", "time Myokit (s)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    blank = " |" * (len(head) - 2)
    worst, n_ok, ours_total, ref_total = 0.0, 0, 0.0, 0.0
    cuda_errs: list[float] = []
    rosenbrock_errs: list[float] = []
    steps: dict[str, int] = {}
    for r in rows:
        name = r["model"]
        if "refused" in r:
            lines.append(f"| {name} | refused: {r['refused'].split(': ', 1)[-1]} |{blank}")
            continue
        if "timeout_s" in r:
            lines.append(f"| {name} | (not finished within {r['timeout_s']:.0f} s) |{blank}")
            continue
        ref = (r.get("reference") or {}).get("last") or {}
        beats = (r.get("reference") or {}).get("beats") or [{}]
        s, sheet = r.get("single", {}), r.get("sheet", {})
        err = _err(s.get("apd90_ms"), ref.get("apd90_ms"))
        sheet_err = _err(sheet.get("apd90_ms"), beats[0].get("apd90_ms")) if r.get("protocol") else math.nan
        note = ""
        if "error" in s or s.get("stopped"):
            note = f" (single cell: {_short(s.get('error') or s.get('stopped'))})"
        if "error" in sheet or sheet.get("stopped"):
            note += f" (sheet: {_short(sheet.get('error') or sheet.get('stopped'))})"
        if "reference_error" in r:
            note += f" (Myokit: {_short(r['reference_error'])})"
        if r.get("protocol") is None:
            note += " (no annotated stimulus: last spontaneous beat)"
        if (ref.get("apd90_ms") or 1.0) <= 0:
            note += f" (reference APD90 {ref['apd90_ms']:.0f} ms: its max dV/dt falls after the repolarisation)"
        if np.isfinite(err):
            worst, n_ok = max(worst, abs(err)), n_ok + 1
            ours_total += s.get("engine_seconds") or 0.0
            ref_total += r["reference"]["seconds"]
        cuda_text, cuda_err = _cuda_cell(extra["cuda"].get(name), ref)
        solver_cells = [cuda_text] if with_cuda else []
        if with_rosenbrock:
            text, rerr = _rosenbrock_cell(extra["rodas4"].get(name), ref)
            solver_cells.append(text)
            if np.isfinite(rerr):
                rosenbrock_errs.append(abs(rerr))
        if ref and np.isfinite(cuda_err):
            cuda_errs.append(abs(cuda_err))
        explicit_text, within = _explicit_cell(extra["explicit"].get(name),
                                               beats[0] if r.get("protocol") else ref)
        if with_explicit_cuda:
            explicit_text += " | " + _explicit_cell(extra["explicit-cuda"].get(name),
                                                    beats[0] if r.get("protocol") else ref)[0]
        if ref and name in extra["explicit"]:
            compared = not isinstance(within, float)
            label = "not compared" if not compared else within or "missed"
            steps[label] = steps.get(label, 0) + 1
        lines.append(f"| {name} | yes ({r['states']} states){note} | {_f(s.get('apd90_ms'), '.2f')} | "
                     f"{_f(ref.get('apd90_ms'), '.2f')} | {_f(err, '+.3f')} % | "
                     f"{''.join(c + ' | ' for c in solver_cells)}{explicit_text} | "
                     f"{_f(sheet_err, '+.2f')} % | "
                     f"{_f(s.get('engine_seconds'), '.2f')} | {_f((r.get('reference') or {}).get('seconds'), '.2f')} |")
    summary = (f"{len(rows)} models; {sum('refused' in r for r in rows)} refused; {n_ok} compared: largest "
               f"|APD90 error| {worst:.3f} %; total time ours {ours_total:.1f} s, Myokit {ref_total:.1f} s.")
    if cuda_errs:
        summary += (f" CUDA default: {len(cuda_errs)} compared, largest |APD90 error| {max(cuda_errs):.3f} %, "
                    f"{sum(e <= SINGLE_CELL_BOUND for e in cuda_errs)} within {SINGLE_CELL_BOUND:g} %.")
    if rosenbrock_errs:
        summary += (f" rodas4: {len(rosenbrock_errs)} compared, largest |APD90 error| {max(rosenbrock_errs):.3f} %, "
                    f"{sum(e <= SINGLE_CELL_BOUND for e in rosenbrock_errs)} within {SINGLE_CELL_BOUND:g} %.")
    if steps:
        summary += (f" Tissue solvers, the largest step within {EXPLICIT_BOUND:g} % (RLFE tried before GRL1; "
                    "missed: not for tissue at these steps): "
                    + ", ".join(f"{label}: {n}" for label, n in sorted(steps.items())) + ".")
    return "\n".join(lines) + "\n\n" + summary + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("corpus", type=Path)
    ap.add_argument("--out", type=Path, default=Path("corpus-results"))
    ap.add_argument("--models", default="")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per model")
    ap.add_argument("--table", action="store_true", help="print the Markdown table of the results in --out")
    ap.add_argument("--redo-ours", action="store_true", help="keep the references in --out, rerun ours")
    ap.add_argument("--reverse", action="store_true", help="models in reverse order (a second runner)")
    ap.add_argument("--runs", default="cpu", help="kinds of run, comma-separated: cpu (references, the CPU "
                    "default, the sheet), cuda (the default on CUDA), explicit (the tissue solvers on the "
                    "CPU), explicit-cuda (the same on CUDA), rodas4 (the Rosenbrock method on the CPU)")
    ap.add_argument("--jobs", type=int, default=1, help="models run at once (child processes)")
    ap.add_argument("--cuda-tolerances", default="",
                    help="--runs cuda: also the default's method at these abs = rel tolerances")
    args = ap.parse_args()
    if args.table:
        print(table(args.out))
        return
    kinds = tuple(k for k in args.runs.split(",") if k)
    unknown = set(kinds) - set(KINDS)
    if unknown:
        ap.error(f"--runs: unknown {', '.join(sorted(unknown))} (choose from {', '.join(KINDS)})")
    tolerances = tuple(float(x) for x in args.cuda_tolerances.split(",") if x)
    run(args.corpus, args.out, [m for m in args.models.split(",") if m], args.timeout, args.redo_ours,
        args.reverse, kinds, args.jobs, tolerances)


if __name__ == "__main__":
    main()
