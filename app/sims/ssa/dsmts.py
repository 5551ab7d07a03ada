"""DSMTS conformance: the SBML Discrete Stochastic Model Test Suite (Evans, Gillespie & Wilkinson
2008) run through the SBML importer on any engine, with a verdict of stated false-alarm rate.

At each of the 51 output times and each species, with N realizations, sample mean m and sample
variance s^2 against the exact mu and sigma: ``Z = sqrt(N) (m - mu) / sigma`` and the suite's
``Y = sqrt(N/2) (s^2 / sigma^2 - 1)``. Points with sigma = 0 (t = 0) are not tests. The suite
asks |Z| < 3 and |Y| < 5 and says "expect a few" excursions; the statistics of one case share
trajectories, so excursions come in clusters and a count of them has no simple law. The verdict
here is one family per case: Z, and Y standardized by its own null SD (Var s^2 = mu4/N -
sigma^4 (N-3)/(N(N-1)), mu4 the sample's fourth central moment at that time), all against
Sidak's threshold for the family (:func:`app.sims.ssa.stats.family_verdict`): a correct engine
fails a case with probability at most ``alpha`` (default 1e-4) whatever the correlation between
times, and the suite of n cases with at most 1 - (1 - alpha)^n (every case has its own seed). The
suite's excursion counts are printed beside it for reference.

``python -m app dsmts [--backend ...] [--realizations N] [--cases 1,5] [--seed S] [--alpha A]
[--suite DIR] [--out table.md]`` prints the table and exits 0 when every case passes, 1 when one
fails or is refused (the reason printed; the other cases still run), 2 on bad input.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from app.sims.ssa.stats import Verdict, family_verdict, variance_z

Z_LIMIT, Y_LIMIT = 3.0, 5.0     # the suite's own ranges (reported, not the verdict)
ALPHA = 1e-4                    # family-wise false-alarm rate per case
MAX_REALIZATIONS = 1 << 26      # as EnsembleSettings.realizations
def suite_dir() -> Path:
    """The suite's folder: $BIOGPU_DSMTS, else ../shared/reference/ssa/dsmts beside the checkout."""
    env = os.environ.get("BIOGPU_DSMTS")
    if env:
        return Path(env)
    root = Path(__file__).resolve().parents[3]
    for base in (root / "shared", root.parent / "shared", Path("/work/shared")):
        if (base / "reference" / "ssa" / "dsmts").is_dir():
            return base / "reference" / "ssa" / "dsmts"
    return root.parent / "shared" / "reference" / "ssa" / "dsmts"


def cases(folder: Path | None = None) -> list[str]:
    folder = folder or suite_dir()
    return sorted(p.name for p in folder.iterdir() if p.is_dir() and p.name.isdigit()) if folder.is_dir() else []


@dataclass(frozen=True)
class Case:
    """One suite case: its model file, output times, species and exact moments."""

    name: str
    model: Path
    times: np.ndarray          # (T,)
    species: tuple[str, ...]
    mean: np.ndarray           # (T, V)
    sd: np.ndarray             # (T, V)


def load_case(name: str, folder: Path | None = None) -> Case:
    folder = (folder or suite_dir()) / name
    settings = {}
    for line in (folder / f"{name}-settings.txt").read_text().splitlines():
        key, _, value = line.partition(":")
        settings[key.strip()] = value.strip()
    species = tuple(s.strip() for s in settings["variables"].split(",") if s.strip())
    with open(folder / f"{name}-results.csv") as fh:
        rows = list(csv.DictReader(fh))
    times = np.array([float(r["time"]) for r in rows])
    mean = np.array([[float(r[f"{s}-mean"]) for s in species] for r in rows])
    sd = np.array([[float(r[f"{s}-sd"]) for s in species] for r in rows])
    return Case(name, folder / f"{name}-sbml-l3v2.xml", times, species, mean, sd)


@dataclass(frozen=True)
class Result:
    """Z and Y of every (time, species) test of one case, and the case's verdict."""

    case: Case
    realizations: int
    z: np.ndarray              # (T, V), nan where sigma = 0
    y: np.ndarray              # the suite's Y
    y_std: np.ndarray          # Y over its null SD: standard normal for a correct engine
    wall_seconds: float
    reactions: int
    seed: int = 0
    alpha: float = ALPHA

    @property
    def tests(self) -> int:
        return int(np.isfinite(self.z).sum())

    @property
    def z_out(self) -> int:
        return int((np.abs(self.z) > Z_LIMIT).sum())

    @property
    def y_out(self) -> int:
        return int((np.abs(self.y) > Y_LIMIT).sum())

    @property
    def verdict(self) -> Verdict:
        return family_verdict(np.concatenate([self.z.ravel(), self.y_std.ravel()]), self.alpha)

    @property
    def max_z(self) -> float:
        return float(np.nanmax(np.abs(self.z))) if self.tests else 0.0

    @property
    def max_y(self) -> float:
        return float(np.nanmax(np.abs(self.y_std))) if self.tests else 0.0


def run_case(case: Case, backend: str = "cpu", realizations: int = 10_000, seed: int = 1,
             alpha: float = ALPHA) -> Result:
    """Run ``case`` with ``realizations`` on ``backend``; Z and Y at every output time."""
    from app.sims.ssa.sbml import load_sbml_network
    from app.sims.ssa.simulation import make_ssa_engine

    net = load_sbml_network(case.model)
    missing = [s for s in case.species if s not in net.species]
    if missing:
        raise ValueError(f"{case.model.name}: no species {', '.join(missing)} in the imported model")
    index = [net.species.index(s) for s in case.species]
    start = time.perf_counter()
    engine = make_ssa_engine(net, backend, realizations, seed, "direct", [index[0]], 16)
    shape = (len(case.times), len(index))
    mean, var, mu4 = np.zeros(shape), np.zeros(shape), np.zeros(shape)
    mean[0] = net.x0[index]
    try:
        for k, t in enumerate(case.times[1:], start=1):   # the engine runs each interval whole
            while not engine.advance(float(t), 1 << 62):
                pass
            st = engine.stats(keep_states=True)               # derived species (rules) applied
            assert st.states is not None
            mean[k], var[k] = st.mean[index], st.var[index]   # the engine's own statistics
            d = st.states[:, index].astype(np.float64) - mean[k]
            d *= d
            mu4[k] = (d * d).mean(axis=0)
        reactions = engine.reactions_fired
    finally:
        engine.close()
    var *= realizations / max(realizations - 1, 1)          # sample variance
    wall = time.perf_counter() - start
    with np.errstate(divide="ignore", invalid="ignore"):
        tested = case.sd > 0
        z = np.where(tested, math.sqrt(realizations) * (mean - case.mean) / case.sd, np.nan)
        y = np.where(tested, math.sqrt(realizations / 2) * (var / case.sd**2 - 1), np.nan)
        y_std = np.where(tested, variance_z(var, case.sd**2, mu4, realizations), np.nan)
    return Result(case, realizations, z, y, y_std, wall, int(reactions), seed, alpha)


@dataclass(frozen=True)
class Refused:
    """A case that could not run, and why."""

    name: str
    reason: str


def suite_alpha(alpha: float, cases: int) -> float:
    """False-alarm rate of the whole suite: independent cases (own seeds), each at most alpha."""
    return -math.expm1(cases * math.log1p(-alpha))


def table(results: list, backend: str, device: str, alpha: float = ALPHA) -> str:
    """The verdict table in Markdown (``results``: :class:`Result` or :class:`Refused`)."""
    ran = [r for r in results if isinstance(r, Result)]
    lines = [f"DSMTS cases run on `{backend}` ({device}). Verdict per case: max |Z| and max |Y/sd(Y)| "
             f"over every output time and species against Sidak's threshold for the case's family, "
             f"false-alarm rate <= {alpha:g} per case. Z out / Y out: the suite's own excursion "
             f"counts (|Z| > {Z_LIMIT:g}, |Y| > {Y_LIMIT:g}), for reference.", "",
             "| case | species | realizations | seed | tests | max abs Z | max abs Y/sd | threshold | verdict "
             "| Z out | Y out | wall s |",
             "|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|"]
    for r in results:
        if isinstance(r, Refused):
            lines.append(f"| {r.name} | | | | | | | | refused: {r.reason} | | | |")
            continue
        v = r.verdict
        lines.append(f"| {r.case.name} | {', '.join(r.case.species)} | {r.realizations} | {r.seed} | "
                     f"{v.tests} | {r.max_z:.2f} | {r.max_y:.2f} | {v.threshold:.2f} | "
                     f"{'pass' if v.passed else 'FAIL'} | {r.z_out} | {r.y_out} | {r.wall_seconds:.2f} |")
    passed = sum(r.verdict.passed for r in ran)
    lines += ["", f"Overall: {'PASS' if passed == len(results) else 'FAIL'}: {passed} of {len(results)} "
              f"cases pass ({len(results) - len(ran)} refused); a correct engine fails this suite with "
              f"probability <= {suite_alpha(alpha, len(results)):.2g}; "
              f"{sum(r.wall_seconds for r in ran):.1f} s in all."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    from app.compute.device import BACKENDS, backend_context, resolve_backend

    parser = argparse.ArgumentParser(
        prog="python -m app dsmts",
        description="DSMTS conformance: run the cases of the SBML Discrete Stochastic Model Test Suite "
                    "(Evans, Gillespie & Wilkinson 2008) on an engine and judge each case's means and "
                    "variances against the exact ones, with a stated false-alarm rate.",
        epilog="Exit codes: 0 every case passes; 1 a case fails or is refused; 2 bad input.")
    parser.add_argument("--backend", default="auto", choices=BACKENDS, help="the engine (default: auto)")
    parser.add_argument("--realizations", type=int, default=10_000, help="realizations per case")
    parser.add_argument("--cases", default="", help="comma-separated case numbers (default: all)")
    parser.add_argument("--seed", type=int, default=1, help="case c runs with seed 1000 * SEED + c")
    parser.add_argument("--alpha", type=float, default=ALPHA,
                        help=f"false-alarm rate per case (default {ALPHA:g})")
    parser.add_argument("--suite", default=None, help=f"folder of the suite (default {suite_dir()})")
    parser.add_argument("--out", default=None, help="write the Markdown table here")
    args = parser.parse_args(argv)
    if not 0 < args.alpha < 1:
        parser.error(f"--alpha {args.alpha} must be in (0, 1)")
    if not 2 <= args.realizations <= MAX_REALIZATIONS:
        parser.error(f"--realizations {args.realizations} must be in [2, {MAX_REALIZATIONS}] (the run config's range)")
    folder = Path(args.suite).expanduser() if args.suite else suite_dir()
    names = cases(folder)
    if not names:
        print(f"error: no DSMTS cases (folders named by number) in {folder} (give --suite or set BIOGPU_DSMTS)")
        return 2
    if args.cases:
        try:
            wanted = [f"{int(c):05d}" for c in args.cases.split(",") if c.strip()]
        except ValueError:
            parser.error(f"--cases {args.cases!r}: give case numbers separated by commas, e.g. 1,19")
        unknown = [c for c in wanted if c not in names]
        if unknown:
            print(f"error: no case {', '.join(unknown)} in {folder}")
            return 2
        names = [n for n in names if n in wanted]
    backend, reason = resolve_backend(args.backend)
    print(f"# {reason}")
    results: list = []
    with backend_context(backend):
        for name in names:
            # a seed per case: cases 1, 2, 8, ... are one model, and must not share trajectories
            seed = args.seed * 1000 + int(name)
            try:
                r = run_case(load_case(name, folder), backend, args.realizations, seed, args.alpha)
            except Exception as exc:        # report the case as refused and go on with the others
                results.append(Refused(name, f"{type(exc).__name__}: {exc}".replace("\n", " ")))
                print(f"{name}: refused: {results[-1].reason}", flush=True)
                continue
            results.append(r)
            print(f"{name}: {r.verdict.describe()}; suite's counts Z out {r.z_out}, Y out {r.y_out}; "
                  f"{r.wall_seconds:.2f} s", flush=True)
    text = table(results, backend, _device(backend), args.alpha)
    print(text)
    if args.out:
        Path(args.out).write_text(text)
        print(f"wrote {args.out}")
    return 0 if all(isinstance(r, Result) and r.verdict.passed for r in results) else 1


def _device(backend: str) -> str:
    from app.compute.device import cpu_device, cuda_status
    return cuda_status().devices[0].name if backend == "cuda" else cpu_device().label
