"""Compile the cardiac stage kernel for a model and print what the GPU will execute per
cell-step: registers and spills (``ptxas -v``) and SASS instruction counts (``cuobjdump -sass``):
FP64 (DFMA, DMUL, DADD), FP32, MUFU (transcendental unit), CALLs (slow paths), loads.

    python scripts/cardiac/kernel_counts.py ohara_rudy_2011_endo --real double|float|mixed [--lookup]

Static counts of the stage kernel's code (both sides of every branch), a proxy for the work of
a cell-step that needs no GPU. ``after_model``: the global and local loads issued after the
model's first MUFU instruction, by the kernel function they come from (nvdisasm's line
information): ``reload`` (the final update's re-reads of the old state), ``model`` (table rows,
varying parameters, spills inside the model) and anything else, which a stage kernel should not
have (it issues every other load of a cell-step before the model). nvcc must be on PATH;
cuobjdump (and nvdisasm) too for the SASS counts (``pip install --target DIR
nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm`` provides them in ``DIR/nvidia/cu13/bin``; put
that on PATH). Without them only registers and spills.
"""

from __future__ import annotations

import argparse
import collections
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from app.compute.kernels import COMMON_DIR  # noqa: E402
from app.sims.cardiac.cuda import model_kernel_source  # noqa: E402
from app.sims.cardiac.model import LookupSpec, load_model  # noqa: E402
from app.sims.cardiac.solvers import METHODS  # noqa: E402

GROUPS = {
    "fp64": ("DFMA", "DMUL", "DADD"), "fp32": ("FFMA", "FMUL", "FADD"), "mufu": ("MUFU",),
    "call": ("CALL",), "loads": ("LDG", "LD", "LDL", "LDC"), "spill": ("LDL", "STL"),
}


def counts(model_name: str, real: str, lookup: LookupSpec | None, method: str = "rlfe",
           kernel: str = "stage0", dt: float = 0.01, table_path: bool = False,
           max_registers: int = 0) -> dict:
    """Registers, spills and SASS counts of ``kernel``; ``table_path``: only the code a cell
    inside the table runs (the direct-evaluation branch compiled out), what a cell-step costs."""
    model = load_model(model_name)
    if lookup is not None:      # as the engines build it (engine.fused_model): RLFE tabulates gate updates
        model = model.with_lookup(lookup, rl_step=dt if method == "rlfe" else None)
    compute = "float" if real == "mixed" else real          # mixed: double states, float model
    src, defines = model_kernel_source(model, METHODS[method], "double" if real == "mixed" else real,
                                       163842, 6, 100, 2, compute=compute)
    if table_path:
        src, n = re.subn(r"(bool model_in_table\([^)]*\)\n\{\n)", r"\1    return true;\n", src)
        assert n == 1, "no table in this kernel"
    with tempfile.TemporaryDirectory() as tmp:
        cu, cubin = Path(tmp) / "cardiac.cu", Path(tmp) / "cardiac.cubin"
        cu.write_text(src)
        cmd = ["nvcc", "-arch=sm_90", "-cubin", "-O3", "-std=c++17", "--use_fast_math", "-lineinfo", "-Xptxas", "-v",
               *([f"-maxrregcount={max_registers}"] if max_registers else []),
               f"-I{COMMON_DIR}", *(f"-D{k}={v}" for k, v in defines.items()), "-o", str(cubin), str(cu)]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
        info = proc.stderr.split(f"Function properties for {kernel}")[1].split("ptxas info    : Compiling")[0]
        regs = int(re.search(r"Used (\d+) registers", info).group(1))
        spill = [int(x) for x in re.findall(r"(\d+) bytes spill (?:stores|loads)", info)]
        out = {"registers": regs, "spill_stores": spill[0], "spill_loads": spill[1]}
        if shutil.which("cuobjdump") and shutil.which("nvdisasm"):
            sass = subprocess.run(["cuobjdump", "-sass", "-fun", kernel, str(cubin)], capture_output=True,
                                  text=True, check=True).stdout
            ops = collections.Counter(m.split(".")[0] for m in re.findall(
                r"^\s+/\*[0-9a-f]+\*/\s+(?:@!?U?P[0-9T] )?([A-Z0-9_.]+)", sass, re.M))
            out["instructions"] = sum(ops.values())
            out.update({g: sum(ops[o] for o in names) for g, names in GROUPS.items()})
            out["after_model"] = loads_after_model(cubin, src, kernel)
    return out


def loads_after_model(cubin: Path, src: str, kernel: str) -> dict[str, int]:
    """The LDG/LD/LDL instructions after the model's first MUFU, counted by the source function
    of the innermost kernel line they come from (``model`` for the printed model)."""
    lines = src.splitlines()
    model = range(next(i for i, text in enumerate(lines) if "GATE_TABLE[" in text) + 1,
                  next(i for i, text in enumerate(lines) if text.startswith("#define NSTAGE")) + 1)
    owner, current = {}, None
    for i, text in enumerate(lines, 1):
        m = re.match(r'^(?:extern "C" )?__(?:device|global)__.*?\b(\w+)\s*\(', text)
        current = m.group(1) if m and current is None else current
        owner[i] = "model" if i in model else current or "?"
        current = None if text.startswith("}") else current
    dis = subprocess.run(["nvdisasm", "-gi", str(cubin)], capture_output=True, text=True, check=True).stdout
    body = dis.split(f".text.{kernel}:")[1].split("//----")[0]
    chain, fresh, insts = [], True, []
    for text in body.splitlines():
        m = re.match(r'\s*//## File "[^"]+", line (\d+)(?: inlined at "[^"]+", line (\d+))?', text)
        if m:
            chain = [] if fresh else chain
            chain += [int(g) for g in m.groups() if g]
            fresh = False
            continue
        m = re.match(r"\s+/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[0-9T] )?([A-Z0-9_.]+)", text)
        if m:
            fresh = True
            insts.append((m.group(1), [owner.get(c, "?") for c in chain]))
    first = next((i for i, (op, where) in enumerate(insts) if op.startswith("MUFU") and "model" in where), len(insts))
    after = collections.Counter()
    for op, where in insts[first + 1:]:
        if op.split(".")[0] in ("LDG", "LD", "LDL"):
            after[next((w for w in ("reload", "model") if w in where), where[0] if where else "?")] += 1
    return dict(after)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", nargs="?", default="ohara_rudy_2011_endo")
    ap.add_argument("--real", choices=("double", "float", "mixed"), default="double")
    ap.add_argument("--method", default="rlfe")
    ap.add_argument("--lookup", action="store_true", help="voltage lookup tables (solver.lookup_tables)")
    ap.add_argument("--step", type=float, default=LookupSpec.step, help="table step, mV")
    ap.add_argument("--max-registers", type=int, default=0, help="nvcc -maxrregcount (0: the default)")
    args = ap.parse_args()
    spec = LookupSpec(step=args.step) if args.lookup else None
    variants = [("whole kernel", False)] + ([("table path", True)] if spec else [])
    for label, table_path in variants:
        row = counts(args.model, args.real, spec, args.method, table_path=table_path,
                     max_registers=args.max_registers)
        print(f"{args.model} {args.real} {args.method} lookup={'on' if spec else 'off'} {label}: "
              + "  ".join(f"{k} {v}" for k, v in row.items()), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
