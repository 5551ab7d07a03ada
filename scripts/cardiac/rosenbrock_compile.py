"""The first-run cost of the Rosenbrock kernel: for each model (a shipped name or a CellML file),
the generated source's size and its compile time with each available CUDA compiler (no GPU
needed; the kernel cache is bypassed), for ``rodas4`` (the model's full Jacobian printed in)
and for ``bs32`` (the explicit single-cell kernel), single cell, float64.

    python scripts/cardiac/rosenbrock_compile.py ToRORd_dynCl_endo.cellml iyer_2004.cellml
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from app.compute import compilers  # noqa: E402
from app.compute.kernels import _options  # noqa: E402
from app.sims.cardiac.config import load_config  # noqa: E402
from app.sims.cardiac.cuda import kernel_source  # noqa: E402
from app.sims.cardiac.engine import Problem  # noqa: E402
from app.sims.common.config import parse_yaml  # noqa: E402


def measure(model: str, method: str, arch: int) -> list[str]:
    started = time.perf_counter()
    cfg = load_config(parse_yaml(f"domain: cardiac\nmodel: {{file: '{model}'}}\nmesh: {{kind: single}}\n"
                                 f"solver: {{method: {method}, precision: float64}}\n"))
    problem = Problem.from_config(cfg)
    src, defines = kernel_source(problem)
    generated = time.perf_counter() - started
    entries = len(problem.model.jacobian_pattern) if problem.model.full_jacobian else 0
    rows = []
    for compiler in compilers.available():
        started = time.perf_counter()
        image = compiler.compile(src, "cardiac.cu", _options(defines, True), arch)
        seconds = time.perf_counter() - started
        rows.append(f"{Path(model).stem}\t{problem.model.n_states}\t{method}\t{entries}\t{len(src)}\t"
                    f"{generated:.2f}\t{type(compiler).__name__}\t{seconds:.1f}\t{len(image.data)}")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+")
    ap.add_argument("--arch", type=int, default=90, help="compute capability (90: H100)")
    args = ap.parse_args()
    print("model\tstates\tmethod\tjacobian entries\tsource chars\tcodegen s\tcompiler\tcompile s\timage bytes")
    for model in args.models:
        for method in ("bs32", "rodas4"):
            for row in measure(model, method, args.arch):
                print(row, flush=True)


if __name__ == "__main__":
    main()
