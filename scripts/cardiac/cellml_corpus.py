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

Usage (SUNDIALS: ``apt-get install libsundials-dev``; check with ``python -m myokit system``)::

    python scripts/cardiac/cellml_corpus.py CORPUS_DIR [--out DIR] [--models a,b] [--table]

Each model's result is a JSON file in ``--out`` (default ``corpus-results/``), skipped when it
exists; ``--table`` writes docs/user-guide/cellml-corpus.md from them.
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

from app.sims.cardiac.singlecell import BEATS, ours, protocol, reference  # noqa: E402

SINGLE_CELL = "{}"                                             # the single-cell defaults: CVODE
TISSUE = "{method: cvode, precision: float64}"                 # implicit, a 2x2 sheet
TABLE = ROOT / "docs" / "user-guide" / "cellml-corpus.md"


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


def _worker(path: str, out: str, redo_ours: bool) -> None:
    previous = json.loads(Path(out).read_text()) if redo_ours and Path(out).exists() else None
    row = one(Path(path), previous)
    Path(out).write_text(json.dumps(row, indent=1, default=float) + "\n")


def run(corpus: Path, out: Path, models: list[str], timeout: float, redo_ours: bool = False,
        reverse: bool = False) -> None:
    out.mkdir(parents=True, exist_ok=True)
    files = sorted(corpus.glob("*.cellml"), reverse=reverse)
    if models:
        files = [f for f in files if f.stem in models]
    ctx = mp.get_context("spawn")
    for f in files:
        target = out / f"{f.stem}.json"
        if target.exists() and not redo_ours:
            continue
        start = time.perf_counter()
        proc = ctx.Process(target=_worker, args=(str(f), str(target), redo_ours))
        proc.start()
        proc.join(timeout)
        if proc.is_alive():
            proc.terminate()
            proc.join()
            target.write_text(json.dumps({"model": f.stem, "timeout_s": timeout}) + "\n")
        print(f"{f.stem:60s} {time.perf_counter() - start:7.1f} s", flush=True)


def _err(ours_apd, ref_apd) -> float:
    if ours_apd is None or ref_apd is None or not (np.isfinite(ours_apd) and np.isfinite(ref_apd)):
        return math.nan
    return 100.0 * (ours_apd - ref_apd) / ref_apd


def _f(x, fmt: str) -> str:
    return "–" if x is None or (isinstance(x, float) and not np.isfinite(x)) else format(x, fmt)


def table(out: Path) -> str:
    rows = [json.loads(p.read_text()) for p in sorted(out.glob("*.json"))]
    lines = ["| model | imported | APD90 ours (ms) | APD90 CVODES (ms) | error | sheet APD90 error (beat 1) "
             "| time ours (s) | time Myokit (s) |", "|---|---|---|---|---|---|---|---|"]
    worst, n_ok, ours_total, ref_total = 0.0, 0, 0.0, 0.0
    for r in rows:
        name = r["model"]
        if "refused" in r:
            lines.append(f"| {name} | refused: {r['refused'].split(': ', 1)[-1]} | | | | | | |")
            continue
        if "timeout_s" in r:
            lines.append(f"| {name} | (not finished within {r['timeout_s']:.0f} s) | | | | | | |")
            continue
        ref = (r.get("reference") or {}).get("last") or {}
        ref_first = ((r.get("reference") or {}).get("beats") or [{}])[0]
        s, sheet = r.get("single", {}), r.get("sheet", {})
        err = _err(s.get("apd90_ms"), ref.get("apd90_ms"))
        sheet_err = _err(sheet.get("apd90_ms"), ref_first.get("apd90_ms")) if r.get("protocol") else math.nan
        note = ""

        def short(text: str) -> str:           # a Markdown cell: the message's last line
            return " ".join(text.strip().splitlines()[-1:]).replace("|", "/")[:160]
        if "error" in s or s.get("stopped"):
            note = f" (single cell: {short(s.get('error') or s.get('stopped'))})"
        if "error" in sheet or sheet.get("stopped"):
            note += f" (sheet: {short(sheet.get('error') or sheet.get('stopped'))})"
        if "reference_error" in r:
            note += f" (Myokit: {short(r['reference_error'])})"
        if r.get("protocol") is None:
            note += " (no annotated stimulus: last spontaneous beat)"
        if np.isfinite(err):
            worst, n_ok = max(worst, abs(err)), n_ok + 1
            ours_total += s.get("engine_seconds") or 0.0
            ref_total += r["reference"]["seconds"]
        lines.append(f"| {name} | yes ({r['states']} states){note} | {_f(s.get('apd90_ms'), '.2f')} | "
                     f"{_f(ref.get('apd90_ms'), '.2f')} | {_f(err, '+.3f')} % | {_f(sheet_err, '+.2f')} % | "
                     f"{_f(s.get('engine_seconds'), '.2f')} | {_f((r.get('reference') or {}).get('seconds'), '.2f')} |")
    summary = (f"{len(rows)} models; {sum('refused' in r for r in rows)} refused; {n_ok} compared: largest "
               f"|APD90 error| {worst:.3f} %; total time ours {ours_total:.1f} s, Myokit {ref_total:.1f} s.")
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
    args = ap.parse_args()
    if args.table:
        print(table(args.out))
        return
    run(args.corpus, args.out, [m for m in args.models.split(",") if m], args.timeout, args.redo_ours, args.reverse)


if __name__ == "__main__":
    main()
