"""Estimate against actual for every shipped preset on the CPU (a benchmark, not a test).

    python scripts/check_estimates.py [--calibrate] [--max-seconds 10] [--domain ssa] [--out benchmarks/cpu-2core]

``--calibrate`` first measures each preset's rate (work per wall second) and setup (seconds
whatever the size) on shortened runs of the same model class (:func:`calibrate`), and writes
them to ``resources/presets/rates.json`` (the estimates' rates before a machine has
run a model class itself); a class whose smallest run takes longer than ``--max-seconds`` gets
no rate (its estimate says so).

For each shipped preset: its estimate on the compiled CPU engine (warm: each domain's engine is
compiled first, and each preset's model code by a tiny run of it, so no run pays a compile),
the run headless, and actual / estimate. A preset
passes when the actual wall time lies within a factor of 2 of the estimate's middle. A preset
whose estimate exceeds ``--max-seconds`` (paper scale: hours) is checked on a shortened run of
the same model class: its size keys (:func:`size_keys`) scaled down to fit, and the row says so.
Writes the benchmark record ``estimates.json`` (with the load average before and after); exit 1
when any preset is off by more than 2x.
"""

from __future__ import annotations

import argparse
import datetime
from dataclasses import replace
import json
import logging
import threading
import os
import sys
import time
from pathlib import Path
from typing import Any

from app.sims.common.bench_record import save_bench
from app.sims.common.config import ConfigError, to_plain
from app.sims.common import estimate
from app.sims.common.estimate import RATES_FILE, estimate_range, estimate_seconds, work
from app.sims.common.session import Session
from app.sims.common.simulation import DOMAINS, PRESETS, load_run_config, presets
from app.sims.common.warmup import has_compiled_engine, service

# per domain: the config keys that size a run linearly, shortened in this order (an int down
# to 1, a float by the factor, a list to its first entries) until the factor is reached; a
# cardiac restitution protocol sets protocol.t_end itself, so its intervals size it
SHORTEN = {"ssa": ("ensemble.realizations",), "channel": ("ga.generations",),
           "cardiac": ("protocol.t_end",), "network": ("run.epochs", "run.epoch_seconds"),
           "epidermis": ("run.steps",)}
RESTITUTION_SHORTEN = {"s1s2": ("restitution.s2_intervals", "restitution.s1_count"),
                       "dynamic": ("restitution.periods", "restitution.beats")}
CALIBRATE_SECONDS = 2.0      # a calibration run lasts at least this long (or is the whole preset)
FIRST_FACTOR = 1 / 4096      # the first calibration run's size, of the preset's


def _value(cfg: Any, key: str) -> Any:
    node = to_plain(cfg)
    for part in key.split("."):
        node = node[part]
    return node


def size_keys(domain: str, cfg: Any) -> tuple[str, ...]:
    """The keys :func:`shortened` scales for ``cfg``."""
    if domain == "cardiac" and cfg.restitution.kind in RESTITUTION_SHORTEN:
        return RESTITUTION_SHORTEN[cfg.restitution.kind]
    return SHORTEN[domain]


def _scaled(value: Any, factor: float) -> tuple[Any, float]:
    """``value`` scaled down by ``factor`` as far as it goes, and the factor reached."""
    if isinstance(value, list):
        kept = value[:max(1, round(len(value) * factor))]
        return kept, len(kept) / len(value)
    if isinstance(value, int):
        new = max(1, int(value * factor))
        return new, new / value
    return float(value) * factor, factor


def shortened(path: Path, domain: str, cfg: Any, factor: float) -> tuple[Any, str] | None:
    """``cfg`` with its size keys (:func:`size_keys`) scaled by ``factor`` in all (None: it
    cannot be shortened that far)."""
    overrides, left = [], factor
    for key in size_keys(domain, cfg):
        if left >= 1.0:
            break
        value = _value(cfg, key)
        new, reached = _scaled(value, left)
        if new == value:
            continue
        overrides.append(f"{key}={new!r}" if isinstance(new, float) else f"{key}={new}")
        left /= reached
    while overrides:      # a key scaled below its range (restitution.beats < 2) stays as it was
        try:
            return load_run_config(path, overrides=overrides)[1], " ".join(overrides)
        except ConfigError:
            overrides.pop()
    return None


def timed_run(domain: str, cfg: Any, limit: float) -> float | None:
    """Wall seconds of a whole headless run on the compiled CPU engine; None past ``limit``.
    A checkpoint named in the config is neither resumed nor written (runs of other sizes)."""
    if getattr(getattr(cfg, "run", None), "checkpoint", ""):
        cfg = replace(cfg, run=replace(cfg.run, checkpoint=""))
    session = Session(DOMAINS[domain], cfg, "cpu", handover=False)
    timer = threading.Timer(limit, session.stop)
    timer.start()
    start = time.perf_counter()
    try:
        session.run()
    finally:
        timer.cancel()
    return None if session.stopped else time.perf_counter() - start


def calibrate(domain: str, path: Path, limit: float) -> tuple[float, float] | None:
    """(work per wall second, setup seconds) of ``path``'s model class: runs of growing size
    (the size keys of :func:`size_keys`) until one lasts CALIBRATE_SECONDS, then until a larger
    one lasts CALIBRATE_SECONDS longer; the two give rate and setup (t = setup + work / rate).
    Where the whole preset is shorter, its one run gives the rate and no setup."""
    _, full = load_run_config(path)
    first = shortened(path, domain, full, FIRST_FACTOR)
    # untimed: the model's own compiled code (a cell model, a channel kernel) compiles here,
    # once per model class, as in the first run on a machine; the rate is of later runs
    if timed_run(domain, first[0] if first is not None else full, limit) is None:
        return None
    factor, base = FIRST_FACTOR, None
    while True:
        short = shortened(path, domain, full, factor) if factor < 1 else None
        cfg = short[0] if short is not None else full
        seconds = timed_run(domain, cfg, limit)
        if seconds is None:
            return None
        amount = work(domain, cfg)
        if base is None and (seconds >= CALIBRATE_SECONDS or short is None):
            base = (amount, seconds)
        elif base is not None and (seconds >= base[1] + CALIBRATE_SECONDS or short is None):
            if amount > base[0] and seconds > base[1]:
                rate = (amount - base[0]) / (seconds - base[1])
                setup = seconds - amount / rate
                if 0.0 <= setup < seconds:
                    return rate, setup
            return amount / seconds, 0.0
        if short is None:
            return amount / seconds, 0.0
        target = (base[1] if base else 0.0) + CALIBRATE_SECONDS
        factor = min(1.0, factor * min(max(2.0, 1.5 * target / max(seconds, 0.01)), 64.0))


def write_rates(rates: dict[str, tuple[float, float]]) -> Path:
    """The cpu section of ``rates.json``: these rates and setups, the machine and its load."""
    from app.compute.cpu_threads import cpu_description

    path = PRESETS / RATES_FILE
    doc = json.loads(path.read_text(encoding="utf-8"))
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    doc["cpu"] = {"measured_on": f"{cpu_description()}, {datetime.date.today()}, load average {load}",
                  "rates": {k: float(f"{v[0]:.4g}") for k, v in sorted(rates.items())},
                  "setup_s": {k: round(v[1], 2) for k, v in sorted(rates.items()) if v[1] > 0}}
    path.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    estimate._tables.clear()                             # the check below reads the new rates
    estimate._shipped.clear()
    return path


def check(domain: str, path: Path, max_seconds: float) -> dict[str, Any]:
    """One preset's row: estimate, actual, ratio, verdict."""
    _, cfg = load_run_config(path)
    row: dict[str, Any] = {"preset": f"{domain}/{path.stem}"}
    middle = estimate_seconds(domain, cfg, "cpu")
    if middle is None:
        return {**row, "result": "no estimate"}
    if middle > max_seconds:
        short = shortened(path, domain, cfg, 0.8 * max_seconds / middle)
        if short is None:
            return {**row, "estimate_s": middle, "result": "skipped (cannot be shortened)"}
        row["full_estimate_s"] = middle
        cfg, row["shortened"] = short
        middle = estimate_seconds(domain, cfg, "cpu")
    assert middle is not None
    low, high = estimate_range(domain, cfg, "cpu") or (middle, middle)
    first = shortened(path, domain, cfg, FIRST_FACTOR)
    timed_run(domain, first[0] if first is not None else cfg, 20 * max_seconds)   # untimed: as in
    actual = timed_run(domain, cfg, 20 * max_seconds)          # calibrate, the model's own compile
    if actual is None:
        return {**row, "estimate_s": round(middle, 3), "result": "off by more than 20x (stopped)"}
    ratio = actual / middle
    return {**row, "estimate_s": round(middle, 3), "range_s": [round(low, 3), round(high, 3)],
            "actual_s": round(actual, 3), "ratio": round(ratio, 3),
            "result": "ok" if 0.5 <= ratio <= 2.0 else "off by more than 2x"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-seconds", type=float, default=10.0)
    parser.add_argument("--calibrate", action="store_true", help="measure the rates first (rates.json)")
    parser.add_argument("--domain", action="append", default=None)
    parser.add_argument("--out", default="benchmarks/cpu-2core")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    before = [round(x, 2) for x in os.getloadavg()]
    rows = []
    names = args.domain or list(DOMAINS)
    for name in names:
        if has_compiled_engine(name):
            service().request(name)
            service().wait(name)
    if args.calibrate:
        cpu = json.loads((PRESETS / RATES_FILE).read_text())["cpu"]
        rates = {k: (v, cpu.get("setup_s", {}).get(k, 0.0)) for k, v in cpu["rates"].items()
                 if k.partition("/")[0] not in names}
        for name in names:
            for path in presets(name):
                try:
                    rate = calibrate(name, path, 6 * args.max_seconds)
                except Exception as exc:     # a preset this install cannot run: no rate
                    print(f"{name}/{path.stem}: no rate ({type(exc).__name__}: {exc})"[:200], flush=True)
                    continue
                print(f"{name}/{path.stem}: rate {rate}", flush=True)
                if rate is not None:
                    rates[f"{name}/{path.stem}"] = rate
        print(f"wrote {write_rates(rates)}")
    for name in names:
        for path in presets(name):
            try:
                row = check(name, path, args.max_seconds)
            except Exception as exc:     # a preset this install cannot run: say so, go on
                row = {"preset": f"{name}/{path.stem}", "result": f"failed: {type(exc).__name__}: {exc}"[:200]}
            rows.append(row)
            print(f"{row['preset']:48s} {row['result']:28s} estimate {row.get('estimate_s', float('nan')):8.2f} s"
                  + (f", actual {row['actual_s']:8.2f} s, ratio {row['ratio']:.2f}" if "actual_s" in row else "")
                  + (f"  [{row['shortened']}]" if "shortened" in row else ""), flush=True)
    results = {"engine": "cpu (compiled, warm)", "max_seconds": args.max_seconds, "calibrated": args.calibrate,
               "load_average_before": before, "load_average_after": [round(x, 2) for x in os.getloadavg()],
               "rows": rows}
    print(f"wrote {save_bench('estimates', results, args.out, cuda=False)}")
    return 1 if any(r["result"].startswith("off by") for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
