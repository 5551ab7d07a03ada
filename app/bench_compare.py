"""``python -m app bench compare --against REF``: this tree's headline cases against a reference
tree's, on the same machine, alternately, each in a fresh interpreter.

The reference is a commit (extracted with ``git archive`` into a temporary folder) or an
already extracted tree (``--against-tree PATH``, e.g. on a machine without ``.git``; with
``--against`` too, that names its commit in the output). Every
case runs ``rounds`` times in each tree, the two trees taking turns (reference first in even
rounds, this tree first in odd ones), and each run reports ``reps`` timings after its own
warm-up. A case is slower when the median ratio (this tree / reference) exceeds
``(1 + threshold) * (1 + noise)``, noise being the mean of the two trees' relative spreads
(max - min over median): a 10 % loss must stand out of the run-to-run variation to fail.
Exit status: 0 none slower, 1 a case slower, 2 a case failed in this tree.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARK = "BENCH-RESULT "
THRESHOLD = 0.10


@dataclass(frozen=True)
class Case:
    """A headline case: ``code`` defines ``measure(reps) -> list[float]`` (seconds, after its
    own warm-up) using only names both trees have; ``unit`` says what a second is of."""

    name: str
    domain: str
    device: str            # 'cuda' or 'cpu'
    unit: str
    code: str


CUDA_CTX = "from app.compute.device import backend_context\n"

def _ord_float32_sphere(tables: bool) -> Case:
    """O'Hara-Rudy in float32 on the level-7 sphere, with or without its lookup tables."""
    return Case("cardiac-ord-float32-sphere" + ("" if tables else "-no-tables"), "cardiac", "cuda",
                f"s per run (level-7 sphere, 100 ms, dt 0.01, {'tables' if tables else 'no tables'})",
                CUDA_CTX + f"""
import dataclasses
from app.sims.cardiac import bench
from app.sims.cardiac.config import ModelSettings
from app.sims.common.simulation import load_run_config
def measure(reps):
    _, base = load_run_config(bench.PRESET)
    stimuli = [dataclasses.replace(s, amplitude=-80.0, duration=1.0) for s in base.protocol.stimuli]
    base = dataclasses.replace(base, model=ModelSettings(file="ohara_rudy_2011_endo"),
                               protocol=dataclasses.replace(base.protocol, stimuli=stimuli))
    solver = dict(method="rlfe", dt=0.01, precision="float32", lookup_tables={tables})
    with backend_context("cuda"):
        bench.run_once(bench.make_cfg(base, 7, 2.0, **solver), "cuda")
        cfg = bench.make_cfg(base, 7, 100.0, **solver)
        return [bench.run_once(cfg, "cuda")[1]["wall_seconds"] for _ in range(reps)]
""")


CASES = [
    Case("ssa-dimer-2^20", "ssa", "cuda", "s per run (2^20 realizations, t = 10)", CUDA_CTX + """
from app.sims.ssa import bench
def measure(reps):
    with backend_context("cuda"):
        bench.run_case("cuda", 1 << 16)
        return [bench.run_case("cuda", 1 << 20)[1]["wall_seconds"] for _ in range(reps)]
"""),
    Case("channel-ga-1.12M", "channel", "cuda", "s per generation (1,120,000 x 12,500 points)", CUDA_CTX + """
from app.sims.channel import bench
def measure(reps):
    with backend_context("cuda"):
        bench.time_generations("cuda", 1120, 1)
        return [bench.time_generations("cuda", 1_120_000, 10)["seconds_per_generation"] for _ in range(reps)]
"""),
    Case("cardiac-crn-sphere-rlfe-0.05", "cardiac", "cuda", "s per run (level-7 sphere, 300 ms)", CUDA_CTX + """
from app.sims.cardiac import bench
from app.sims.common.simulation import load_run_config
def measure(reps):
    _, base = load_run_config(bench.PRESET)
    with backend_context("cuda"):
        bench.run_once(bench.make_cfg(base, 7, 2.0, method="rlfe", dt=0.05), "cuda")
        cfg = bench.make_cfg(base, 7, 300.0, method="rlfe", dt=0.05)
        return [bench.run_once(cfg, "cuda")[1]["wall_seconds"] for _ in range(reps)]
"""),
    Case("cardiac-crn-sphere-frames", "cardiac", "cuda",
         "s per run through advance() (level-7 sphere, 100 ms, a frame a ms)", CUDA_CTX + """
import time
from app.sims.cardiac import bench
from app.sims.cardiac.simulation import CardiacSimulation
from app.sims.common.simulation import load_run_config
def loop(cfg):          # the loop the CLI's and the GUI's worker run: a frame per advance()
    sim = CardiacSimulation(cfg, "cuda")
    try:
        start = time.perf_counter()
        while not sim.finished:
            sim.advance()
        return time.perf_counter() - start
    finally:
        sim.close()
def measure(reps):
    _, base = load_run_config(bench.PRESET)
    with backend_context("cuda"):
        loop(bench.make_cfg(base, 7, 2.0, method="rlfe", dt=0.05))
        cfg = bench.make_cfg(base, 7, 100.0, method="rlfe", dt=0.05)
        return [loop(cfg) for _ in range(reps)]
"""),
    _ord_float32_sphere(tables=True),
    _ord_float32_sphere(tables=False),
    Case("network-100x100-epoch", "network", "cuda", "s per epoch (100 s of activity + growth)", CUDA_CTX + """
from app.sims.network import bench
def measure(reps):
    with backend_context("cuda"):
        bench.engine_case("cuda", 20, 2.001, 1.0)
        rows = [bench.engine_case("cuda", 100, 2.001, 100.0, grow=True) for _ in range(reps)]
    return [r["run_wall_seconds"] + r["grow_wall_seconds"] for r in rows]
"""),
    Case("epidermis-5000x3000", "epidermis", "cuda", "s per 3,000 steps (5,000 cells)", CUDA_CTX + """
from app.sims.epidermis import bench
from app.sims.epidermis.cuda import CudaEngine
def measure(reps):
    with backend_context("cuda"):
        cfg = bench.config(5000)
        eng = CudaEngine(cfg, bench.initial(cfg))
        try:
            eng.advance(20)
            return [bench._time_run(eng, 3000)[1] for _ in range(reps)]
        finally:
            eng.close()
"""),
    Case("ssa-cpu-2^10", "ssa", "cpu", "s per run (2^10 realizations, t = 10)", """
from app.sims.ssa import bench
def measure(reps):
    bench.run_case("cpu", 1 << 6, t_end=1.0)
    return [bench.run_case("cpu", 1 << 10)[1]["wall_seconds"] for _ in range(reps)]
"""),
    Case("channel-cpu-512", "channel", "cpu", "s per generation (512 x 12,500 points)", """
from app.sims.channel import bench
def measure(reps):
    bench.time_generations("cpu", 64, 1)
    return [bench.time_generations("cpu", 512, 2)["seconds_per_generation"] for _ in range(reps)]
"""),
    Case("cardiac-cpu-level4", "cardiac", "cpu", "s per run (level-4 sphere, 20 ms, RLFE 0.05)", """
from app.sims.cardiac import bench
from app.sims.common.simulation import load_run_config
def measure(reps):
    _, base = load_run_config(bench.PRESET)
    cfg = bench.make_cfg(base, 4, 20.0, method="rlfe", dt=0.05)
    bench.run_once(bench.make_cfg(base, 4, 1.0, method="rlfe", dt=0.05), "cpu")
    return [bench.run_once(cfg, "cpu")[1]["wall_seconds"] for _ in range(reps)]
"""),
    Case("network-cpu-20x20", "network", "cpu", "s per 2 s of activity + growth (20 x 20)", """
from app.sims.network import bench
def measure(reps):
    bench.engine_case("cpu", 20, 2.001, 0.2)
    rows = [bench.engine_case("cpu", 20, 2.001, 2.0, grow=True) for _ in range(reps)]
    return [r["run_wall_seconds"] + r["grow_wall_seconds"] for r in rows]
"""),
    Case("epidermis-cpu-1000x200", "epidermis", "cpu", "s per 200 steps (1,000 cells)", """
import os
from app.sims.epidermis import bench
def measure(reps):
    threads = len(os.sched_getaffinity(0))
    return [200 / bench.compiled_case(1000, 200, threads)["steps_per_second"] for _ in range(reps)]
"""),
]


def driver(case: Case, reps: int) -> str:
    """The program a tree's interpreter runs for ``case``."""
    return (textwrap.dedent(case.code) + f"\nimport json as _json\nprint({MARK!r} + _json.dumps(measure({reps})),"
            " flush=True)\n")


def run_case(case: Case, tree: Path, reps: int, timeout: float, label: str) -> tuple[list[float] | None, str]:
    """(timings, '') or (None, the failure's last lines) of ``case`` in ``tree``."""
    env = dict(os.environ)
    others = [p for p in env.get("PYTHONPATH", "").split(os.pathsep)
              if p and Path(p).resolve() not in (ROOT, tree.resolve())]
    env["PYTHONPATH"] = os.pathsep.join([str(tree), *others])
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("BIOGPU_COMMIT", label)
    try:
        proc = subprocess.run([sys.executable, "-c", driver(case, reps)], cwd=tree, env=env,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout:g} s"
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(MARK):
            values = json.loads(line[len(MARK):])
            if values and all(isinstance(v, (int, float)) and v > 0 for v in values):
                return [float(v) for v in values], ""
            return None, f"bad timings {values!r}"
    tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-6:])
    return None, f"exit {proc.returncode}: {tail}"


@dataclass
class Verdict:
    ratio: float
    noise: float
    limit: float
    slower: bool


def judge(reference: list[float], current: list[float], threshold: float = THRESHOLD) -> Verdict:
    """Median ratio current / reference against (1 + threshold)(1 + noise)."""
    def spread(values: list[float]) -> float:
        return (max(values) - min(values)) / statistics.median(values)

    ratio = statistics.median(current) / statistics.median(reference)
    noise = 0.5 * (spread(reference) + spread(current))
    limit = (1 + threshold) * (1 + noise)
    return Verdict(ratio, noise, limit, ratio > limit)


def extract(ref: str, into: Path) -> Path:
    """``git archive`` of commit ``ref`` of this repository, unpacked into ``into``."""
    git = shutil.which("git")
    if git is None or not (ROOT / ".git").exists():
        raise SystemExit(f"--against {ref}: this tree ({ROOT}) has no git repository; "
                         "extract the reference elsewhere and pass --against-tree PATH")
    sha = subprocess.run([git, "-C", str(ROOT), "rev-parse", "--verify", f"{ref}^{{commit}}"],
                         capture_output=True, text=True)
    if sha.returncode != 0:
        raise SystemExit(f"--against {ref}: not a commit of {ROOT}: {sha.stderr.strip()}")
    archive = into / "ref.tar"
    with open(archive, "wb") as out:
        subprocess.run([git, "-C", str(ROOT), "archive", "--format=tar", sha.stdout.strip()], stdout=out,
                       check=True)
    tree = into / "tree"
    tree.mkdir()
    with tarfile.open(archive) as tar:
        tar.extractall(tree, filter="data")
    archive.unlink()
    return tree


def select(names: str | None, cuda: bool) -> list[Case]:
    cases = [c for c in CASES if cuda or c.device == "cpu"]
    if names:
        wanted = [n.strip() for n in names.split(",") if n.strip()]
        unknown = [n for n in wanted if not any(n in c.name for c in CASES)]
        if unknown:
            raise SystemExit(f"--cases: no case matches {', '.join(unknown)}; cases: "
                             f"{', '.join(c.name for c in CASES)}")
        cases = [c for c in cases if any(n in c.name for n in wanted)]
    return cases


def compare(reference: Path, ref_label: str, cases: list[Case], rounds: int, reps: int,
            timeout: float, save=lambda rows: None) -> list[dict]:
    """Rows of every case; ``save(rows)`` after each (a long run killed keeps what it measured)."""
    rows: list[dict] = []
    for case in cases:
        runs: dict[str, list[float]] = {"reference": [], "current": []}
        errors: dict[str, str] = {}
        for k in range(rounds):
            order = [("reference", reference, ref_label), ("current", ROOT, "")]
            for side, tree, label in (order if k % 2 == 0 else order[::-1]):
                if side in errors:
                    continue
                values, error = run_case(case, tree, reps, timeout, label)
                if values is None:
                    errors[side] = error
                else:
                    runs[side] += values
        row: dict = {"case": case.name, "domain": case.domain, "device": case.device, "unit": case.unit,
                     "reference_seconds": runs["reference"], "current_seconds": runs["current"],
                     "errors": errors}
        if not errors:
            v = judge(runs["reference"], runs["current"])
            row.update(ratio=v.ratio, noise=v.noise, limit=v.limit, slower=v.slower)
        rows.append(row)
        _print_row(row)
        save(rows)
    return rows


def _fmt(values: list[float]) -> str:
    if not values:
        return f"{'-':>18s}"
    med = statistics.median(values)
    return f"{med:10.4g} ±{100 * (max(values) - min(values)) / med / 2:4.1f}%"


def _print_row(row: dict) -> None:
    if "ratio" in row:
        verdict = "SLOWER" if row["slower"] else ("faster" if row["ratio"] < 1 / row["limit"] else "same")
        tail = f"{row['ratio']:6.3f} (limit {row['limit']:.3f})  {verdict}"
    else:
        tail = "; ".join(f"{side} failed: {err.splitlines()[-1] if err else ''}"
                         for side, err in row["errors"].items())
    print(f"{row['case']:30s} {_fmt(row['reference_seconds'])} {_fmt(row['current_seconds'])}  {tail}",
          flush=True)


def main(against: str | None, against_tree: str | None, out_dir: Path, rounds: int = 2, reps: int = 2,
         names: str | None = None, timeout: float = 300.0) -> int:
    from app.compute.device import cuda_status
    from app.sims.common.bench_record import save_bench

    if against is None and against_tree is None:
        raise SystemExit("bench compare needs --against REF (a commit) or --against-tree PATH")
    if rounds < 1 or reps < 1:
        raise SystemExit("--rounds and --reps must be at least 1")
    status = cuda_status()
    cases = select(names, status.available)
    with tempfile.TemporaryDirectory(prefix="biogpu-ref-") as tmp:
        if against_tree is not None:
            reference = Path(against_tree).resolve()
            if not (reference / "app" / "__init__.py").is_file():
                raise SystemExit(f"--against-tree {against_tree}: no app/__init__.py there (not a source tree)")
            label = against or f"tree:{reference.name}"     # --against names an extracted tree's commit
        else:
            reference, label = extract(against, Path(tmp)), against
        device = status.devices[0].name if status.available else "cpu only"
        print(f"# bench compare: this tree ({ROOT}) against {label} on {device}; {rounds} rounds x {reps} "
              f"timings per tree and case; slower = ratio over (1 + {THRESHOLD:g}) (1 + noise)")
        if not status.available:
            print(f"# CUDA cases skipped: {status.reason}")
        print(f"{'case':30s} {'reference s':>18s} {'this tree s':>18s}  ratio")
        def save(rows: list[dict]) -> Path:
            return save_bench("compare", {"reference": label, "rounds": rounds, "reps": reps,
                                          "threshold": THRESHOLD, "cases": rows}, out_dir)

        rows = compare(reference, label, cases, rounds, reps, timeout, save)
    print(f"\nwrote {save(rows)}")
    if any(row["errors"].get("current") for row in rows):
        return 2
    return 1 if any(row.get("slower") for row in rows) else 0
