"""The one writer of benchmark results: every ``python -m app bench`` writes its figures with
where they were measured (commit, date, device, driver, compiler, CPU), so tables can be
generated from the files alone (``scripts/bench_tables.py``)."""

from __future__ import annotations

import datetime
import os
import platform
import shutil
import subprocess
from pathlib import Path
from typing import Any, Mapping

from app.sims.common.output import save_json

SCHEMA = 1
ROOT = Path(__file__).resolve().parents[3]


def commit() -> str:
    """The source tree's commit: $BIOGPU_COMMIT (a tree copied without .git), else git's."""
    if os.environ.get("BIOGPU_COMMIT"):
        return os.environ["BIOGPU_COMMIT"]
    git = shutil.which("git")
    if git and (ROOT / ".git").exists():
        proc = subprocess.run([git, "-C", str(ROOT), "rev-parse", "--short=12", "HEAD"],
                              capture_output=True, text=True)
        if proc.returncode == 0:
            dirty = subprocess.run([git, "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                                   capture_output=True, text=True).stdout.strip()
            return proc.stdout.strip() + ("-dirty" if dirty else "")
    return "unknown"


def _nvidia_driver() -> str:
    smi = shutil.which("nvidia-smi")
    if not smi:
        return ""
    try:
        proc = subprocess.run([smi, "--query-gpu=driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return proc.stdout.splitlines()[0].strip() if proc.returncode == 0 and proc.stdout.strip() else ""


def environment(cuda: bool | None = None) -> dict[str, Any]:
    """Where a result was measured; ``cuda`` None: probe the GPU only if CUDA works here."""
    from app.compute.cpu_threads import cpu_description
    from app.compute.device import cuda_status, driver_version

    status = cuda_status() if cuda is not False else None
    on_gpu = bool(status and status.available)
    env = {"commit": commit(),
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "device": status.devices[0].name if on_gpu and status else "cpu",
           "device_detail": status.devices[0].detail if on_gpu and status else "",
           "driver": _nvidia_driver() if on_gpu else "",
           "cuda_driver_api": driver_version() if on_gpu else "",
           "compiler": status.compiler if on_gpu and status else "",
           "cpu": cpu_description(), "python": platform.python_version()}
    try:
        import numba

        env["numba"] = numba.__version__
    except ImportError:
        pass
    return env


def save_bench(name: str, results: Mapping[str, Any], out_dir: str | Path,
               cuda: bool | None = None) -> Path:
    """Write ``<out_dir>/<name>.json``: ``{"schema", "benchmark", "environment", "results"}``."""
    doc = {"schema": SCHEMA, "benchmark": name, "environment": environment(cuda), "results": dict(results)}
    return save_json(Path(out_dir) / f"{name}.json", doc)
