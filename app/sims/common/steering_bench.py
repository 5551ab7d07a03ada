"""``python -m app bench steering``: the latency of live steering, per panel and backend.

For each domain a run of its default preset (the CPU or the CUDA one) is started headless,
through the same :class:`~app.sims.common.session.Session` the GUI's worker owns. Once it
runs on its final engine, a change is made from another thread at a random moment of a slice
(as a user's hand does), and the latency is the wall time from :meth:`Session.steer` to the
``on_frame`` of the first frame that carries the change (the GUI draws that frame next). Each
case repeats the change several times and reports the median and the worst.

SSA *explore* mode (decay-dimerization to t = 10, 2^16 realizations on CUDA, 2^8 on the CPU):
each change re-runs the ensemble from t = 0, a small ensemble first where the device has room
to gain from one; two latencies: to the first frame of the re-run past t = 0 (the first
refined picture) and to the frame of the whole ensemble at t = 10.

Targets: CPU 250 ms, CUDA 100 ms (explore: first 100 ms, full 300 ms on CUDA). Writes
``steering-<backend>.json`` through :func:`~app.sims.common.bench_record.save_bench`.
"""

from __future__ import annotations

import logging
import os
import queue
import random
import statistics
import threading
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from app.sims.common.bench_record import save_bench
from app.sims.common.config import load_yaml
from app.sims.common.simulation import DOMAINS, PRESETS, Frame, load_run_config

log = logging.getLogger(__name__)

TARGET_MS = {"cpu": 250.0, "cuda": 100.0}
EXPLORE_TARGET_MS = {"cuda": (100.0, 300.0)}
# the explore case is 2^16 realizations on the GPU; the 2-core CPU runs 2^8 (its whole
# ensemble takes some 10 to 20 s there; the preview is 32 of them)
EXPLORE_REALIZATIONS = {"cuda": 2**16, "cpu": 2**8}
CHANGES = 5                     # changes per case (3 with --quick)
WAIT_S = 120.0                  # a hang guard for one frame (never a speed limit)

# domain -> (keys tried in order, preset overrides making the run outlast the changes)
CASES: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {
    "ssa": (("rates.decay",), {}),
    "cardiac": (("ablate",), {"protocol.t_end": 20000.0}),
    "network": (("scale.EE",), {"run.epochs": 1000}),
    "epidermis": (("wound", "growth.interval"), {"run.steps": 10_000_000}),
    "channel": (("ga.mutation",), {"ga.generations": 100_000, "ga.chi2_threshold": 0.0}),
}


def _config(domain: str, backend: str, overrides: dict[str, Any]):
    stem = load_yaml(PRESETS / "roles.yaml").data[domain]["cuda" if backend == "cuda" else "cpu"]
    return load_run_config(PRESETS / domain / f"{stem}.yaml",
                           overrides=[f"{k}={v}" for k, v in overrides.items()])


def _region(frame: Any) -> dict[str, Any]:
    """A brush a fifth of the tissue wide at its middle (cardiac mesh, culture, epidermis)."""
    mesh = getattr(frame, "mesh", None)
    if mesh is not None:
        pos = np.asarray(mesh.positions, float)
        centre = pos[np.argmin(np.linalg.norm(pos - pos.mean(axis=0), axis=1))]
        return {"kind": "brush", "centre": centre.tolist(),
                "radius": float(0.2 * np.ptp(pos, axis=0).max() or 1.0)}
    if getattr(frame, "width", None):
        return {"kind": "brush", "centre": [frame.width / 2, frame.height / 2],
                "radius": 0.2 * max(frame.width, frame.height)}
    centres = np.asarray(frame.centres, np.float64)
    return {"kind": "brush", "centre": centres.mean(axis=0).tolist(),
            "radius": float(0.2 * np.ptp(centres[:, :2], axis=0).max() or 1.0)}


def _value_of(cfg: Any, key: str) -> Any:
    node = cfg
    for part in key.split("."):
        node = getattr(node, part, None)
    return node


def changes_for(session, keys: tuple[str, ...], cfg: Any) -> Callable[[Frame, int], tuple[str, Any, Any]]:
    """The change a case makes: the first of ``keys`` the run declares, else its first live
    number whose value the config holds; the k-th change alternates between two values."""
    declared = session.steerables
    key = next((k for k in keys if k in declared and declared[k].live), None)
    if key is None:
        key = next((k for k, s in declared.items() if s.live and s.kind in ("float", "int") and not s.region
                    and isinstance(_value_of(cfg, k), (int, float))), None)
    if key is None:
        raise RuntimeError(f"{session.domain.name}: nothing steerable to measure (declared: {', '.join(declared)})")
    s = declared[key]
    base = _value_of(cfg, key)
    if key.startswith("rates."):
        net = cfg.network()
        base = float(net.rates[net.reaction_names.index(key.split(".", 1)[1])])

    def change(frame: Frame, k: int) -> tuple[str, Any, Any]:
        region = _region(frame) if s.region else None
        if s.kind == "bool":
            return key, k % 2 == 0, region
        if s.kind == "choice":
            return key, s.choices[k % len(s.choices)], region
        if isinstance(base, (int, float)) and not isinstance(base, bool):
            value = base * (1.5 if k % 2 == 0 else 1.0) if base else (1.0 if k % 2 == 0 else 0.0)
            value = min(max(value, s.range[0]), s.range[1]) if s.range else value
            return key, int(round(value)) if s.kind == "int" else float(value), region
        if s.range is not None:
            return key, float(s.range[0] + (s.range[1] - s.range[0]) * (0.5 if k % 2 == 0 else 0.25)), region
        return key, None, region
    return change


class _Run:
    """A session on its own thread whose frames arrive, stamped, in a queue."""

    def __init__(self, domain_name: str, cfg: Any, backend: str):
        from app.sims.common.session import Session
        from app.sims.common.warmup import has_compiled_engine, key_of, service

        if backend == "cpu" and has_compiled_engine(domain_name):    # compiled before, not timed
            service().request(domain_name, cfg)
            service().wait(key_of(domain_name, cfg), timeout=900)
        self.frames: queue.Queue[tuple[float, Frame | None]] = queue.Queue()   # None: the run ended
        self.session = Session(DOMAINS[domain_name], cfg, backend,
                               on_frame=lambda f: self.frames.put((time.perf_counter(), f)))
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.session.run()
        except BaseException as exc:      # reported by next_frame
            self.error = exc
        finally:
            self.frames.put((time.perf_counter(), None))

    def next_frame(self) -> tuple[float, Frame]:
        stamp, frame = self.frames.get(timeout=WAIT_S)
        if frame is None:
            raise RuntimeError(f"the run ended before the measurement: {self.error or 'finished'}")
        return stamp, frame

    def settle(self) -> tuple[Frame, float]:
        """Wait until the run is on its final engine; (newest frame, mean seconds per frame)."""
        stamps = []
        while True:
            stamp, frame = self.next_frame()
            stamps.append(stamp)
            if self.session.engine == self.session.backend and len(stamps) >= 3:
                return frame, float(np.mean(np.diff(stamps[-3:])))

    def steer_and_wait(self, key: str, value: Any, region: Any, slice_s: float,
                       shown: Callable[[Frame], bool] = lambda f: True) -> tuple[float, Frame]:
        """Steer at a random moment of a slice; (seconds until the first frame carrying the
        event for which ``shown`` holds, that frame)."""
        while not self.frames.empty():                    # only frames after the change count
            self.next_frame()
        time.sleep(random.uniform(0.0, min(slice_s, 1.0)))
        before = len(self.session.events)
        start = time.perf_counter()
        self.session.steer(key, value, region)
        while True:
            stamp, frame = self.next_frame()
            if len(frame.events) > before and shown(frame):
                return stamp - start, frame

    def close(self) -> None:
        self.session.stop()
        self.thread.join(timeout=WAIT_S)


def measure(domain_name: str, backend: str, changes: int) -> dict[str, Any]:
    """One case: the median and worst latency of ``changes`` changes (``slice_ms``: the mean time
    from frame to frame before the first change)."""
    keys, overrides = CASES[domain_name]
    _, cfg = _config(domain_name, backend, overrides)
    run = _Run(domain_name, cfg, backend)
    try:
        frame, slice_s = run.settle()
        change = changes_for(run.session, keys, cfg)
        seconds = []
        for k in range(changes):
            key, value, region = change(frame, k)
            latency, frame = run.steer_and_wait(key, value, region, slice_s)
            seconds.append(latency)
    finally:
        run.close()
    return {"domain": domain_name, "case": key, "preset": cfg.name, "backend": backend,
            "median_ms": 1e3 * statistics.median(seconds), "max_ms": 1e3 * max(seconds),
            "slice_ms": 1e3 * slice_s, "changes": changes, "target_ms": TARGET_MS[backend]}


def explore(backend: str, changes: int, realizations: int = 2**16) -> list[dict[str, Any]]:
    """SSA explore mode on decay-dimerization (``realizations`` to t = 10): a run in explore
    mode takes a rate change after its first frame; the latency to the first frame of the
    re-run (its small ensemble) and to its whole ensemble at t = 10. A fresh run per change:
    an explore run ends with its whole ensemble."""
    _, cfg = load_run_config(PRESETS / "ssa" / "decay-dimerization-paper.yaml",
                             overrides=[f"ensemble.realizations={realizations}", "ensemble.t_end=10"])
    net = cfg.network()
    key, base = f"rates.{net.reaction_names[0]}", float(net.rates[0])
    first, full = [], []
    for k in range(changes):
        run = _Run("ssa", cfg, backend)
        try:
            run.session.steer("mode", "explore")
            run.next_frame()
            start = time.perf_counter()
            latency, frame = run.steer_and_wait(key, base * (1.5 if k % 2 == 0 else 0.75), None, 0.0,
                                                shown=lambda f: len(getattr(f, "times", ())) > 1)   # past t = 0
            first.append(latency)
            while not frame.done:
                _, frame = run.next_frame()
            full.append(time.perf_counter() - start)
        finally:
            run.close()
    first_target, full_target = EXPLORE_TARGET_MS.get(backend, (TARGET_MS[backend],) * 2)
    row = {"domain": "ssa", "preset": cfg.name, "backend": backend, "realizations": realizations,
           "changes": changes}
    return [{**row, "case": f"explore, first frame: {key}", "median_ms": 1e3 * statistics.median(first),
             "max_ms": 1e3 * max(first), "target_ms": first_target},
            {**row, "case": f"explore, whole ensemble: {key}", "median_ms": 1e3 * statistics.median(full),
             "max_ms": 1e3 * max(full), "target_ms": full_target}]


def table(rows: list[dict[str, Any]]) -> str:
    lines = [f"{'panel':10s} {'backend':7s} {'median ms':>9s} {'worst ms':>9s} {'target':>7s}  case"]
    for r in rows:
        if "error" in r:
            lines.append(f"{r['domain']:10s} {r['backend']:7s} {'-':>9s} {'-':>9s} {'-':>7s}  {r['error']}")
            continue
        ok = "ok" if r["median_ms"] <= r["target_ms"] else "OVER"
        lines.append(f"{r['domain']:10s} {r['backend']:7s} {r['median_ms']:9.1f} {r['max_ms']:9.1f} "
                     f"{r['target_ms']:7.0f}  {r['case']} [{ok}]")
    return "\n".join(lines)


def main(backend: str = "auto", out_dir: Path = Path("bench-results"), quick: bool = False,
         domains: tuple[str, ...] = tuple(CASES)) -> int:
    """Measure every case on ``backend``, print the table, write ``steering-<backend>.json``."""
    from app.compute.device import resolve_backend

    backend, _ = resolve_backend(backend)
    backend = "cuda" if backend == "cuda" else "cpu"
    changes = 3 if quick else CHANGES
    rows = []
    for name in domains:
        try:
            rows.append(measure(name, backend, changes))
        except Exception as exc:          # one panel's failure leaves the others' figures
            log.warning("steering bench %s: %s", name, exc)
            rows.append({"domain": name, "backend": backend, "error": f"{type(exc).__name__}: {exc}"})
        print(table(rows[-1:]).splitlines()[-1], flush=True)
    try:
        rows += explore(backend, min(changes, 3), EXPLORE_REALIZATIONS[backend] >> (2 if quick else 0))
    except Exception as exc:
        log.warning("steering bench ssa explore: %s", exc)
        rows.append({"domain": "ssa", "backend": backend, "error": f"explore: {type(exc).__name__}: {exc}"})
    print(table(rows))
    # the machine's load beside the figures: a latency is a slice, and a shared CPU stretches it
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    path = save_bench(f"steering-{backend}", {"rows": rows, "changes": changes, "load_average_1min": load,
                                              "cpu_count": os.cpu_count()}, out_dir, cuda=backend == "cuda")
    print(f"wrote {path}")
    return 0 if all("error" not in r for r in rows) else 1
