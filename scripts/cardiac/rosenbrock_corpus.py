"""The Rosenbrock method (``solver.method: rodas4``) on Chaste corpus models, on the CPU or
CUDA (``--backend``), the corpus protocol (20 beats at 1 Hz, the annotated stimulus): APD90 of the last beat against the
Myokit CVODES reference of ``scripts/cardiac/cellml_corpus.py``'s output, and the accepted and
rejected steps (the GPU's cost is steps times the cost of a step).

    python scripts/cardiac/rosenbrock_corpus.py --corpus DIR/cellml --references OUT \
        --models ohara_rudy_cipa_v1_2017,iyer_2004 --tol 1e-6 --backend cuda --budget 300 --out results.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from app.sims.cardiac.singlecell import ours  # noqa: E402


def one(corpus: Path, references: Path, model: str, tol: float, budget: float, dt_max: float,
        backend: str = "cpu") -> dict:
    ref = json.loads((references / f"{model}.json").read_text())
    stim = ref["protocol"]
    started = time.perf_counter()
    solver = f"{{method: rodas4, at: {tol:.6e}, rt: {tol:.6e}, dt_max: {dt_max:.6e}}}"
    run = ours(corpus / f"{model}.cellml", stim, solver, backend=backend, budget_s=budget)
    run["seconds"] = time.perf_counter() - started
    last = ref["reference"]["last"]
    apd = run.get("apd90_ms")
    run["apd90_cvodes_ms"] = last["apd90_ms"]
    run["error_pct"] = None if apd is None else 100.0 * (apd - last["apd90_ms"]) / last["apd90_ms"]
    return {"model": model, "tol": tol, "dt_max": dt_max, "backend": backend, "states": ref["states"], **run}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, required=True, help="the Chaste cellml folder (*.cellml)")
    ap.add_argument("--references", type=Path, required=True, help="cellml_corpus.py's output (<model>.json)")
    ap.add_argument("--models", required=True, help="comma-separated file stems")
    ap.add_argument("--tol", type=float, default=1e-6, help="at = rt")
    ap.add_argument("--dt-max", type=float, default=10.0, help="the largest step (ms; rodas4's default)")
    ap.add_argument("--backend", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--budget", type=float, default=300.0, help="seconds per model before it stops")
    ap.add_argument("--out", type=Path, required=True, help="JSON lines, one row per model (appended)")
    args = ap.parse_args()
    for model in args.models.split(","):
        row = one(args.corpus, args.references, model, args.tol, args.budget, args.dt_max, args.backend)
        print(json.dumps(row), flush=True)
        with args.out.open("a") as fh:
            fh.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
