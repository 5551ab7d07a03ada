"""``python -m app bench startup``: per panel, the time from Run to the first frame of its CPU
default preset, headless (the CLI's session) and in the GUI, each in a fresh interpreter:

- *cold*: empty numba and kernel caches (temporary NUMBA_CACHE_DIR, BIOGPU_CACHE_DIR), as on
  a new machine;
- *warm*: the caches filled (the compiled engine loads instead of compiling);
- *again*: a second run in the same process once the compiled engine is ready.

Prints a table and writes ``startup.json`` (a benchmark record: commit, date, CPU, Python,
numba, the load average before and after, the figures). The GUI runs offscreen where there is
no display (the 3D panels need one: skipped).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

from app.sims.common.simulation import DOMAINS

TARGET_COLD_S = 2.0       # the first frame after Run with empty caches, on the 2-core machine
TARGET_WARM_S = 1.0       # ... once the caches are filled
PROGRESS_LINE = re.compile(r"^\s+\d+\.\d%  ")      # the CLI's line per frame: '   0.4%  status ...'

CHILD_CLI = textwrap.dedent("""
    import sys, time
    t_process = time.perf_counter()
    from app.sims.common.config import load_yaml
    from app.sims.common.session import Session
    from app.sims.common.simulation import PRESETS, load_run_config
    from app.sims.common.warmup import service

    name, again = sys.argv[1], sys.argv[2] == "1"
    stem = load_yaml(PRESETS / "roles.yaml").data[name]["cpu"]     # the panel's CPU default
    domain, cfg = load_run_config(PRESETS / name / f"{stem}.yaml")

    def first_frame():
        seen = []
        def on_frame(frame):
            if not seen:
                seen.append(time.perf_counter())
                session.stop()
        session = Session(domain, cfg, "cpu", on_frame=on_frame)
        start = time.perf_counter()
        session.run()
        return seen[0] - start, session

    seconds, session = first_frame()
    print("FIRST", seconds, time.perf_counter() - t_process, flush=True)
    if again:
        service().wait(session._key, timeout=900)      # the run's model class is ready
        seconds, _ = first_frame()
        print("AGAIN", seconds, flush=True)
""")

def _command(front: str, name: str, again: bool) -> list[str]:
    """The child that measures: the CLI's session in a script, the GUI's ``gui --first-frame``
    (:mod:`app.gui.first_frame`)."""
    if front == "cli":
        return [sys.executable, "-c", CHILD_CLI, name, "1" if again else "0"]
    return [sys.executable, "-m", "app", "gui", "--first-frame", name] + (["--again"] if again else [])


def _child(command: list[str], name: str, env: dict[str, str]) -> dict[str, float]:
    out = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1800, cwd=os.getcwd())
    figures: dict[str, float] = {}
    for line in out.stdout.splitlines():
        parts = line.split()
        if parts and parts[0] == "FIRST":
            figures["first_frame_s"] = float(parts[1])
            if len(parts) > 2:
                figures["process_start_to_first_frame_s"] = float(parts[2])
        elif parts and parts[0] == "AGAIN":
            figures["again_s"] = float(parts[1])
    if "first_frame_s" not in figures:
        raise RuntimeError(f"{name}: the startup child failed (exit {out.returncode}): "
                           f"{out.stderr.strip().splitlines()[-1:] or 'no output'}")
    return figures


def _fill(name: str, env: dict[str, str]) -> None:
    """The compiled engine of ``name`` compiled into the caches of ``env``."""
    subprocess.run([sys.executable, "-m", "app.sims.common.warmup", name], env=env, check=True,
                   capture_output=True, timeout=1800, cwd=os.getcwd())


def measure(names: list[str], gui: bool) -> list[dict]:
    """The rows: per panel and front end, cold, warm and again."""
    rows: list[dict[str, Any]] = []
    display = bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    for name in names:
        for front in ["cli"] + (["gui"] if gui else []):
            if front == "gui" and not display and name == "epidermis":
                rows.append({"panel": name, "front": front, "skipped": "3D view needs a display"})
                continue
            with tempfile.TemporaryDirectory() as tmp:
                env = {**os.environ, "NUMBA_CACHE_DIR": f"{tmp}/numba", "BIOGPU_CACHE_DIR": f"{tmp}/kernels",
                       "BIOGPU_SETTINGS_DIR": f"{tmp}/settings"}
                if front == "gui" and not display:
                    env["QT_QPA_PLATFORM"] = "offscreen"
                cold = _child(_command(front, name, False), name, env)
                _fill(name, env)
                warm = _child(_command(front, name, True), name, env)
            row = {"panel": name, "front": front, "cold_first_frame_s": cold["first_frame_s"],
                   "warm_first_frame_s": warm["first_frame_s"], "again_first_frame_s": warm.get("again_s")}
            if "process_start_to_first_frame_s" in cold:
                row["cold_process_start_to_first_frame_s"] = cold["process_start_to_first_frame_s"]
            rows.append(row)
            print(f"  {name:10s} {front:4s} first frame after Run: cold {row['cold_first_frame_s']:6.2f} s, "
                  f"warm cache {row['warm_first_frame_s']:6.2f} s, second run "
                  f"{row['again_first_frame_s'] if row['again_first_frame_s'] is not None else float('nan'):6.2f} s",
                  flush=True)
    return rows


def bundle_first_start(executable: str, name: str, front: str) -> tuple[float, float | None]:
    """(seconds from starting the desktop bundle with empty caches to the first frame of the
    panel's CPU default run, seconds from Run to it where the front end has a Run: the GUI's):
    ``front`` 'cli' (``EXE run PRESET --backend cpu``: its first progress line, printed at
    once) or 'gui' (``EXE gui --first-frame PANEL``, offscreen where there is no display: its
    FIRST line)."""
    from app.sims.common.config import load_yaml
    from app.sims.common.simulation import PRESETS

    stem = load_yaml(PRESETS / "roles.yaml").data[name]["cpu"]
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "NUMBA_CACHE_DIR": f"{tmp}/numba", "BIOGPU_CACHE_DIR": f"{tmp}/kernels",
               "BIOGPU_SETTINGS_DIR": f"{tmp}/settings"}
        if front == "gui":
            command = [executable, "gui", "--first-frame", name]
            if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
                env["QT_QPA_PLATFORM"] = "offscreen"
        else:
            command = [executable, "run", str(PRESETS / name / f"{stem}.yaml"), "--backend", "cpu",
                       "--no-png", "--out", f"{tmp}/run"]
        start = time.perf_counter()
        proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        last = ""
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                if front == "cli" and PROGRESS_LINE.match(line):
                    return time.perf_counter() - start, None
                if front == "gui" and line.startswith("FIRST "):
                    return time.perf_counter() - start, float(line.split()[1])
                last = line.strip() or last
        finally:
            proc.kill()
            proc.wait()
    raise RuntimeError(f"{executable}: no first frame from the {name} {front} run ({last or 'no output'})")


def _load() -> list[float] | None:
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None


def main(out_dir: Path, quick: bool = False, bundle: str | None = None) -> int:
    """Measure every panel (``quick``: SSA only, headless only; ``bundle``: also the desktop
    bundle's first start, process start to first frame, per panel) and write ``startup.json``
    (:func:`~app.sims.common.bench_record.save_bench`), with the load average before and after:
    figures measured on a busy machine say so."""
    from app.compute.cpu_threads import cpu_description
    from app.sims.common.bench_record import commit, save_bench

    os.environ["BIOGPU_COMMIT"] = commit()      # the tree measured: the one at the start
    names = ["ssa"] if quick else list(DOMAINS)
    before = _load()
    print(f"time to the first frame, CPU default presets ({cpu_description()}; load {before})")
    rows = measure(names, gui=not quick)
    if bundle:
        for name in names:
            for front in ["cli"] + ([] if quick else ["gui"]):
                label = f"bundle {front.upper()}"
                try:
                    seconds, after_run = bundle_first_start(bundle, name, front)
                except RuntimeError as exc:          # a preset the bundle cannot run: say why
                    rows.append({"panel": name, "front": label, "skipped": str(exc).rpartition(" (")[2][:-1][-80:]})
                    print(f"  {name:10s} {label}: {exc}", flush=True)
                    continue
                rows.append({"panel": name, "front": label, "cold_first_frame_s": after_run,
                             "cold_process_start_to_first_frame_s": seconds})
                print(f"  {name:10s} {label:10s} first frame after Run: cold "
                      f"{after_run if after_run is not None else float('nan'):6.2f} s, from its start "
                      f"{seconds:6.2f} s", flush=True)
    results = {"unit": "seconds from Run to the first frame", "target_cold_s": TARGET_COLD_S,
               "target_warm_s": TARGET_WARM_S, "load_average_before": before,
               "load_average_after": _load(), "rows": rows}
    path = save_bench("startup", results, out_dir, cuda=False)
    print(f"wrote {path}")
    return 0
