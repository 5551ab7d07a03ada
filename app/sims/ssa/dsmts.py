"""DSMTS conformance: the SBML Discrete Stochastic Model Test Suite (Evans, Gillespie & Wilkinson
2008) run through the SBML importer on any engine, judged by the suite's rule.

At each of the 51 output times and each species, with N realizations, sample mean m and
sample variance s^2 against the exact mu and sigma: ``Z = sqrt(N) (m - mu) / sigma`` must lie in
(-3, 3) and ``Y = sqrt(N/2) (s^2 / sigma^2 - 1)`` in (-5, 5). Points with sigma = 0 (t = 0) are
not tests. By chance a correct simulator gives |Z| > 3 with probability 0.0027 per test; Y is
normal only for large N and near-normal counts, so its chance rate is estimated from the
counts' kurtosis at each time (``var Y = (kappa - 1) / 2`` for large N), which the suite's
README leaves as "expect a few".

``python -m app dsmts [--backend ...] [--realizations N] [--out table.md]`` prints the table.
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

Z_LIMIT, Y_LIMIT = 3.0, 5.0
P_Z = math.erfc(Z_LIMIT / math.sqrt(2))        # 0.0027 per test
SNAPSHOT_LIMIT = 1 << 23     # realizations x output times kept to estimate Y's spread per time


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
    """Z and Y of every (time, species) test of one case, and the chance expectations."""

    case: Case
    realizations: int
    z: np.ndarray              # (T, V), nan where sigma = 0
    y: np.ndarray
    wall_seconds: float
    reactions: int
    expected_y: float          # expected |Y| > 5 count by chance (kurtosis-corrected normal)

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
    def expected_z(self) -> float:
        return self.tests * P_Z


def run_case(case: Case, backend: str = "cpu", realizations: int = 10_000, seed: int = 1) -> Result:
    """Run ``case`` with ``realizations`` on ``backend``; Z and Y at every output time."""
    from app.sims.ssa.sbml import load_sbml_network
    from app.sims.ssa.simulation import make_ssa_engine

    net = load_sbml_network(case.model)
    index = [net.species.index(s) for s in case.species]
    keep_all = realizations * len(case.times) <= SNAPSHOT_LIMIT     # kurtosis at every time
    start = time.perf_counter()
    engine = make_ssa_engine(net, backend, realizations, seed, "direct", [index[0]], 16)
    mean = np.zeros((len(case.times), len(index)))
    var = np.zeros_like(mean)
    mean[0] = net.x0[index]
    kept = [np.broadcast_to(net.x0[index], (realizations, len(index)))]
    try:
        for k, t in enumerate(case.times[1:], start=1):   # the engine runs each interval whole
            while not engine.advance(float(t), 1 << 62):
                pass
            last = k == len(case.times) - 1
            st = engine.stats(keep_states=keep_all or last)
            mean[k], var[k] = st.mean[index], st.var[index]
            if st.states is not None:
                kept.append(st.states[:, index])
        reactions = engine.reactions_fired
    finally:
        engine.close()
    var *= realizations / max(realizations - 1, 1)          # sample variance
    states = np.stack(kept) if keep_all else np.broadcast_to(kept[-1], (len(case.times),) + kept[-1].shape)
    wall = time.perf_counter() - start
    with np.errstate(divide="ignore", invalid="ignore"):
        tested = case.sd > 0
        z = np.where(tested, math.sqrt(realizations) * (mean - case.mean) / case.sd, np.nan)
        y = np.where(tested, math.sqrt(realizations / 2) * (var / case.sd**2 - 1), np.nan)
    return Result(case, realizations, z, y, wall, int(reactions), _expected_y(states, tested))


def _expected_y(states: np.ndarray, tested: np.ndarray) -> float:
    """Expected count of |Y| > 5 by chance: for large N, Y ~ N(0, (kappa - 1) / 2) with kappa
    the kurtosis of the counts at that time (taken at the last time for every time where the
    states of every time would not fit in memory)."""
    out = 0.0
    for k in range(states.shape[0]):
        for v in range(states.shape[2]):
            if not tested[k, v]:
                continue
            d = states[k, :, v].astype(np.float64)
            d -= d.mean()
            m2 = (d * d).mean()
            kappa = (d**4).mean() / m2**2 if m2 > 0 else 3.0
            sd_y = math.sqrt(max((kappa - 1.0) / 2.0, 1e-6))
            out += math.erfc(Y_LIMIT / sd_y / math.sqrt(2))
    return out


def excursion_bound(expected: float, alpha: float = 1e-5) -> int:
    """The smallest k with P(Poisson(expected) > k) < alpha: more excursions than this are a
    failure (a correct engine exceeds it with probability below ``alpha``)."""
    k, term = 0, math.exp(-expected)
    cdf = term
    while 1.0 - cdf >= alpha:
        k += 1
        term *= expected / k
        cdf += term
    return k


def table(results: list[Result], backend: str, device: str) -> str:
    """The pass table in Markdown."""
    lines = [f"DSMTS cases run on `{backend}` ({device}); tests = species x output times with "
             f"sigma > 0; Z in (-{Z_LIMIT:g}, {Z_LIMIT:g}), Y in (-{Y_LIMIT:g}, {Y_LIMIT:g}).", "",
             "| case | species | realizations | tests | Z out | Z expected | Y out | Y expected | wall s |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        lines.append(f"| {r.case.name} | {', '.join(r.case.species)} | {r.realizations} | {r.tests} | "
                     f"{r.z_out} | {r.expected_z:.2f} | {r.y_out} | {r.expected_y:.2f} | {r.wall_seconds:.2f} |")
    tests = sum(r.tests for r in results)
    lines.append(f"| all | | | {tests} | {sum(r.z_out for r in results)} | "
                 f"{sum(r.expected_z for r in results):.2f} | {sum(r.y_out for r in results)} | "
                 f"{sum(r.expected_y for r in results):.2f} | {sum(r.wall_seconds for r in results):.1f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    from app.compute.device import BACKENDS, backend_context, resolve_backend

    parser = argparse.ArgumentParser(prog="python -m app dsmts", description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="auto", choices=BACKENDS)
    parser.add_argument("--realizations", type=int, default=10_000)
    parser.add_argument("--cases", default="", help="comma-separated case numbers (default: all)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", default=None, help="write the Markdown table here")
    args = parser.parse_args(argv)
    backend, reason = resolve_backend(args.backend)
    print(f"# {reason}")
    names = cases()
    if not names:
        print(f"error: no DSMTS cases in {suite_dir()} (set BIOGPU_DSMTS)")
        return 2
    if args.cases:
        wanted = {f"{int(c):05d}" for c in args.cases.split(",")}
        names = [n for n in names if n in wanted]
    results = []
    with backend_context(backend):
        for name in names:
            # a seed per case: cases 1, 2, 8, ... are one model, and must not share trajectories
            r = run_case(load_case(name), backend, args.realizations, args.seed * 1000 + int(name))
            results.append(r)
            print(f"{name}: {r.tests} tests, Z out {r.z_out} (expected {r.expected_z:.2f}), "
                  f"Y out {r.y_out} (expected {r.expected_y:.2f}), {r.wall_seconds:.2f} s", flush=True)
    device = _device(backend)
    text = table(results, backend, device)
    print(text)
    if args.out:
        Path(args.out).write_text(text)
        print(f"wrote {args.out}")
    return 0


def _device(backend: str) -> str:
    from app.compute.device import cpu_device, cuda_status
    return cuda_status().devices[0].name if backend == "cuda" else cpu_device().label
