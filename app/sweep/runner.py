"""Run a sweep's points as Dask tasks, resume a stopped sweep, stream rows as they finish.

Without a scheduler address a local cluster is started: one worker per GPU (dask-cuda's
``LocalCUDACluster`` where it is installed, else one worker process per device, pinned through
its worker name), or on the CPU one single-threaded worker process per core group. With an
address the points go to that existing cluster (e.g. one started by dask-jobqueue on SLURM).

Each point is a whole headless run (the same ``Session`` as the GUI and ``python -m app run``)
written to ``OUT/points/<name>/``; its ``point.json`` is written last and marks it finished, so a
stopped sweep resumes by skipping points whose ``point.json`` has the same fingerprint. Dask
reruns the tasks of a worker that dies on the other workers.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from app.sims.common.config import ConfigError, Document, to_plain
from app.sims.common.output import save_json
from app.sweep import metrics as sweep_metrics
from app.sweep.spec import Point, SweepSpec, apply_point, get_path, parse_sweep
from app.sweep.table import write_table

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PointTask:
    """Everything a worker needs to run one point (plain data only: it is pickled)."""

    domain: str
    source: str
    data: Mapping[str, Any]
    backend: str
    out_dir: str
    point: Point
    metrics: tuple[str, ...]
    metric_options: Mapping[str, Any]
    pin_by_worker_name: bool = True


@dataclass
class SweepPlan:
    """A validated sweep: the domain, the spec and one task per point."""

    domain: str
    source: str
    spec: SweepSpec
    tasks: list[PointTask]
    base_config: Any
    configs: list[Any] = field(default_factory=list)    # the validated config of each task
    batch: bool = False                                  # points share launches where they can
    estimate: str = ""                                   # the whole sweep's expected time, a line

    def groups(self, tasks: list[PointTask], workers: int = 1) -> list[list[PointTask]]:
        """The tasks in the batches one worker runs together (singletons without batching),
        at least one batch per worker where there are enough points."""
        if not self.batch or len(tasks) < 2:
            return [[t] for t in tasks]
        index = {t.point.name: i for i, t in enumerate(self.tasks)}
        from app.sims.common.simulation import DOMAINS
        module = batch_module(DOMAINS[self.domain].module)
        cfgs = [self.configs[index[t.point.name]] for t in tasks]
        return [[tasks[i] for i in members] for members in module.group(cfgs, workers)]


@dataclass
class SweepResult:
    """What a sweep produced (also written as ``summary.json``)."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def failed(self) -> int:
        return sum(1 for r in self.rows if r.get("status") != "ok")


# a sweep expected to run longer than this, its points one after another here, is refused
# unless the user raises the limit (--max-hours): a typo in a range should not book a week
MAX_SWEEP_HOURS = 24.0


def plan_sweep(config_path: str | Path, out_dir: str | Path, backend: str = "auto",
               overrides: list[str] | None = None, batch: bool = True,
               max_hours: float = MAX_SWEEP_HOURS) -> SweepPlan:
    """Read a config with a ``sweep:`` block and validate every point before anything runs;
    refuse a sweep whose points' estimated running time, one after another on this machine,
    is above ``max_hours`` (:func:`sweep_time`).

    With ``batch`` (the default) and the CUDA engine, points that the domain's batch engine can
    run together (SSA: the same network up to rates, initial counts and seed) share launches.
    """
    from app.sims.common.simulation import DOMAINS, read_run_document

    doc = read_run_document(config_path, overrides=overrides)
    if "sweep" not in doc.data:
        raise doc.error("this config has no 'sweep:' block; see 'Parameter sweeps' in the user guide")
    spec = parse_sweep(doc.data["sweep"], doc)
    data = {k: v for k, v in doc.data.items() if k != "sweep"}
    name = data.get("domain")
    if not isinstance(name, str) or name not in DOMAINS:
        raise doc.error(f"unknown domain {name!r}; valid: {', '.join(DOMAINS)}", ("domain",))
    domain = DOMAINS[name]
    module = domain.load()
    base = module.load_config(Document(data, doc.marks, doc.source))
    plain = to_plain(base)
    for i, key in enumerate(spec.keys):
        value = get_path(plain, key)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise doc.error(f"'{key}' is not a numeric key of this {name} config "
                            f"(its value is {value!r})", ("sweep", "parameters", i, "key"))
    mmod = sweep_metrics.domain_metrics(domain.module)
    names = sweep_metrics.check_metrics(mmod, spec.metrics)
    seed_key = mmod.SEED_KEY
    base_seed = get_path(plain, seed_key) if seed_key else None
    tasks, configs = [], []
    points = spec.points(base_seed)
    fits = _point_memory_check(base, backend)
    shown = time.monotonic()
    for k, point in enumerate(points):
        point_data = apply_point(data, point, seed_key)
        try:
            configs.append(module.load_config(Document(point_data, doc.marks, doc.source)))
            fits(configs[-1], f"sweep point {point.name} ({_values_text(point)})")
        except ConfigError as exc:
            raise ConfigError(f"sweep point {point.name} ({_values_text(point)}): {exc.message}"
                              if not exc.message.startswith("sweep point") else exc.message,
                              exc.source or doc.source, exc.line, exc.path) from None
        if time.monotonic() - shown > 2.0:
            shown = time.monotonic()
            log.info("sweep plan: %d of %d points checked", k + 1, len(points))
        tasks.append(PointTask(name, doc.source or str(config_path), point_data, backend,
                               str(out_dir), point, names, dict(spec.metric_options)))
    use_batch = batch and batch_module(domain.module) is not None and _runs_on_cuda(backend)
    estimate = sweep_time(name, configs, backend, max_hours, doc.source or str(config_path))
    return SweepPlan(name, str(config_path), spec, tasks, base, configs, use_batch, estimate)



def sweep_time(domain: str, configs: list[Any], backend: str, max_hours: float, source: str) -> str:
    """A line with the whole sweep's expected running time (the per-point estimates of
    :mod:`app.sims.common.estimate` summed), or ConfigError above ``max_hours``."""
    from app.sims.common.estimate import format_duration, sweep_seconds

    seconds, unmeasured = sweep_seconds(domain, configs, backend)
    measured = len(configs) - unmeasured
    if not measured:
        return f"expected: no estimate (this model was not measured on this engine), {len(configs)} points"
    if seconds > max_hours * 3600:
        raise ConfigError(f"the sweep's {measured:,} measured points are expected to take "
                          f"{format_duration(seconds)} one after another on this machine, above the "
                          f"limit of {max_hours:g} h; give --max-hours to allow longer, or sweep fewer "
                          "or smaller points", source, path=("sweep",))
    rest = f" ({unmeasured:,} more not measured on this engine)" if unmeasured else ""
    return (f"expected: {format_duration(seconds)} of runs for {measured:,} points{rest}, "
            "one after another here; a cluster divides it among its workers")


def _point_memory_check(base: Any, backend: str) -> Callable[[Any, str], None]:
    """A check of one point's memory estimate (the config module's ``estimate_memory``, as a
    single run's preflight) against what is free here, taken once for the whole plan: a point
    that cannot fit is refused before Dask starts."""
    import importlib

    from app.compute.device import resolve_backend
    from app.sims.common.memory import check_fits, limits

    estimate = getattr(importlib.import_module(type(base).__module__), "estimate_memory", None)
    if estimate is None:
        return lambda cfg, what: None
    resolved = resolve_backend(backend)[0] if backend == "auto" else backend
    available = limits(resolved)

    def fits(cfg: Any, what: str) -> None:
        check_fits(estimate(cfg, resolved), resolved, what, available)

    return fits


MAX_LOCAL_WORKERS_PER_CORE = 1    # workers are processes with their own engines: more than cores only thrash
CONNECT_TIMEOUT_S = 10.0
SCHEMES = ("tcp", "tls", "ucx", "inproc")


def check_cluster_options(workers: int | None, scheduler: str | None) -> None:
    """Refuse, before anything starts, a worker count this machine cannot run and a scheduler
    address whose scheme Dask does not speak."""
    cores = os.cpu_count() or 1
    if workers is not None and not 1 <= workers <= cores * MAX_LOCAL_WORKERS_PER_CORE:
        raise ConfigError(f"--workers {workers}: a local cluster runs from 1 to {cores} workers here "
                          "(one per CPU core; each is a process with its own engine)", "command line")
    if scheduler:
        scheme, sep, rest = scheduler.partition("://")
        if sep and scheme.lower() not in SCHEMES:
            raise ConfigError(f"--scheduler {scheduler}: the scheme {scheme}:// is not supported; a Dask "
                              f"scheduler address is {' or '.join(s + '://HOST:PORT' for s in SCHEMES[:2])} "
                              "(or HOST:PORT)", "command line")
        if not (rest if sep else scheduler).strip():
            raise ConfigError(f"--scheduler {scheduler!r}: no host and port", "command line")


def connect(scheduler: str, timeout_s: float = CONNECT_TIMEOUT_S) -> tuple[Any, int]:
    """A Dask client of ``scheduler`` and its worker count, or ConfigError naming the address
    once ``timeout_s`` has passed (a port that accepts and never answers included: the wait is
    on this side's clock, not only Dask's)."""

    from distributed import Client

    result: dict[str, Any] = {}

    def attempt() -> None:
        try:
            client = Client(scheduler, timeout=f"{timeout_s}s")
            result["client"] = client
            result["workers"] = len(client.scheduler_info().get("workers", {}))
        except Exception as exc:          # reported below with the address
            result["error"] = exc

    thread = threading.Thread(target=attempt, name="dask-connect", daemon=True)
    thread.start()
    thread.join(timeout_s + 2.0)
    if thread.is_alive() or "workers" not in result:
        if "client" in result:
            result["client"].close(timeout=1)
        reason = (f"no answer within {timeout_s:g} s" if thread.is_alive() or "error" not in result
                  else f"{type(result['error']).__name__}: {result['error']}")
        raise ConfigError(f"--scheduler {scheduler}: cannot reach a Dask scheduler ({reason})", "command line")
    return result["client"], result["workers"]


def _runs_on_cuda(backend: str) -> bool:
    """Whether the points will run on CUDA (asked for, or 'auto' with a GPU here)."""
    if backend == "cuda":
        return True
    if backend == "auto":
        from app.compute.device import cuda_status
        return cuda_status().available
    return False


def _values_text(point: Point) -> str:
    return ", ".join(f"{k}={v:g}" for k, v in point.values.items())


def point_dir(task: PointTask) -> Path:
    return Path(task.out_dir) / "points" / task.point.name


def finished_row(task: PointTask) -> dict[str, Any] | None:
    """The row of a point finished earlier with the same fingerprint, else None."""
    import json

    marker = point_dir(task) / "point.json"
    try:
        saved = json.loads(marker.read_text())
    except (OSError, ValueError):
        return None
    if saved.get("fingerprint") != task.point.fingerprint() or saved.get("row", {}).get("status") != "ok":
        return None
    return saved["row"]


def run_point(task: PointTask) -> dict[str, Any]:
    """Run one point to the end (on a Dask worker) and return its table row."""
    from app.compute.device import resolve_backend
    from app.sims.common.session import Session
    from app.sims.common.simulation import DOMAINS

    start = time.perf_counter()
    domain = DOMAINS[task.domain]
    cfg = domain.load().load_config(Document(dict(task.data), {}, task.source))
    backend, _ = resolve_backend(task.backend)
    device_index, worker = _worker_placement(backend, task.pin_by_worker_name)
    session = Session(domain, cfg, backend, device_index)
    session.run()
    return _finish_point(task, cfg, session.arrays, session.summary, backend, device_index, worker,
                         time.perf_counter() - start)


def run_points(tasks: list[PointTask]) -> list[dict[str, Any]]:
    """Run a batch of points in one go with the domain's batch engine (on a Dask worker)."""
    from app.compute.device import backend_context, resolve_backend
    from app.sims.common.simulation import DOMAINS

    if len(tasks) == 1:
        return [run_point(tasks[0])]
    start = time.perf_counter()
    domain = DOMAINS[tasks[0].domain]
    module = domain.load()
    cfgs = [module.load_config(Document(dict(t.data), {}, t.source)) for t in tasks]
    backend, _ = resolve_backend(tasks[0].backend)
    device_index, worker = _worker_placement(backend, tasks[0].pin_by_worker_name)
    batch = batch_module(domain.module)
    with backend_context(backend, device_index):
        results = batch.run(cfgs)
    wall = time.perf_counter() - start
    return [_finish_point(t, cfg, arrays, summary, backend, device_index, worker, wall)
            for t, cfg, (arrays, summary) in zip(tasks, cfgs, results)]


def batch_module(domain_module: str):
    """The domain's ``batch`` module (``group`` and ``run``), or None where it has none."""
    import importlib

    try:
        return importlib.import_module(f"{domain_module}.batch")
    except ModuleNotFoundError:
        return None


def _finish_point(task: PointTask, cfg: Any, arrays: Mapping[str, Any], summary: Mapping[str, Any],
                  backend: str, device_index: int, worker: str, wall: float) -> dict[str, Any]:
    """Write the point's files and its ``point.json`` (last: it marks the point finished)."""
    from app.sims.common.session import write_run_outputs
    from app.sims.common.simulation import DOMAINS

    out = point_dir(task)
    write_run_outputs(out, cfg, arrays, summary, started=time.time() - wall)
    mmod = sweep_metrics.domain_metrics(DOMAINS[task.domain].module)
    options = {**task.metric_options, "config": cfg}
    row: dict[str, Any] = {"point": task.point.index, "replicate": task.point.replicate,
                           "name": task.point.name, **dict(task.point.values)}
    if task.point.seed is not None:
        row["seed"] = task.point.seed
    row.update(sweep_metrics.compute(mmod, task.metrics, arrays, summary, options))
    row.update({"status": "ok", "wall_seconds": wall, "backend": backend,
                "device": str(summary.get("device", "")), "device_index": device_index,
                "worker": worker})
    save_json(out / "point.json", {"fingerprint": task.point.fingerprint(), "row": row})
    return row


def _worker_placement(backend: str, pin_by_worker_name: bool) -> tuple[int, str]:
    """(CUDA device index, worker name): worker ``i`` of a local cluster drives GPU ``i``."""
    try:
        from distributed import get_worker
        name = get_worker().name
    except (ImportError, ValueError):
        name = "in-process"
    if backend != "cuda" or not pin_by_worker_name:
        return 0, str(name)
    from app.compute.device import cuda_status
    count = max(1, len(cuda_status().devices))
    index = int(name) % count if isinstance(name, int) or str(name).isdigit() else 0
    return index, str(name)


# ---- the cluster --------------------------------------------------------------------------------
@dataclass
class Cluster:
    """A Dask client and, when we started it, its local cluster."""

    client: Any
    local: Any = None
    description: str = ""
    workers: int = 0
    pin_by_worker_name: bool = True

    def close(self) -> None:
        # A worker process busy in numba or CUDA teardown outlives the nanny's 4-s wait and is
        # killed, which Dask reports as a warning at every sweep's end: expected, not news.
        nanny = logging.getLogger("distributed.nanny")
        level = nanny.level
        nanny.setLevel(logging.ERROR)
        try:
            self.client.close()
            if self.local is not None:
                self.local.close()
        finally:
            nanny.setLevel(level)


def quiet_dask_logs() -> None:
    """Dask's per-worker INFO lines would drown the sweep's own progress lines."""
    for name in list(logging.root.manager.loggerDict):
        if name.split(".")[0] == "distributed":
            logging.getLogger(name).setLevel(logging.WARNING)


def start_cluster(backend: str, workers: int | None = None, scheduler: str | None = None) -> Cluster:
    """Connect to ``scheduler`` or start a local cluster sized for the GPUs or CPU cores."""
    check_cluster_options(workers, scheduler)
    try:
        import dask
        from distributed import Client, LocalCluster
    except ImportError as exc:
        raise RuntimeError("sweeps run on Dask: install the 'sweep' extra "
                           "(pip install 'biogpu-studio[sweep]')") from exc
    quiet_dask_logs()
    if scheduler:
        client, n = connect(scheduler)
        return Cluster(client, None, f"scheduler {scheduler} ({n} workers)", n)
    from app.compute.device import resolve_backend, cuda_status
    resolved, _ = resolve_backend(backend)
    if resolved == "cuda":
        gpus = len(cuda_status().devices)
        n = min(workers or gpus, gpus)
        try:
            from dask_cuda import LocalCUDACluster   # pins each worker with CUDA_VISIBLE_DEVICES
            local = LocalCUDACluster(n_workers=n, threads_per_worker=1,
                                     CUDA_VISIBLE_DEVICES=list(range(n)))
            return Cluster(Client(local), local, f"LocalCUDACluster, {n} GPU workers", n, False)
        except ImportError:
            pass
        threads_each = 1
    else:
        n = workers or os.cpu_count() or 1
        threads_each = max(1, (os.cpu_count() or 1) // n)
    # Engines that use threads (numba, BLAS) get their share of the cores, not all of them.
    # NUMBA_NUM_THREADS goes in the worker's own environment (the nanny's env, set in the child):
    # the nanny also writes its pre-spawn variables into this process's os.environ, at every
    # worker (re)start, and numba here re-reads NUMBA_* at each compile and refuses a thread
    # count changed after its threads started. The BLAS counts must be set before the child
    # loads BLAS, so they stay pre-spawn (dask's defaults, OMP at the share); this process has
    # loaded its BLAS already, and its values are put back once the workers are up.
    threads = str(threads_each)
    pre_spawn = {**dask.config.get("distributed.nanny.pre-spawn-environ", {}), "OMP_NUM_THREADS": threads}
    saved = {name: os.environ.get(name) for name in pre_spawn}
    try:
        with dask.config.set({"distributed.nanny.pre-spawn-environ": pre_spawn}):
            local = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                 dashboard_address=None, env={"NUMBA_NUM_THREADS": threads})
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    kind = "GPU" if resolved == "cuda" else "CPU"
    return Cluster(Client(local), local, f"LocalCluster, {n} {kind} workers", n, True)


# ---- the sweep ----------------------------------------------------------------------------------
class SweepRun:
    """One sweep in progress: ``run()`` blocks in its thread; ``stop()`` may come from any thread."""

    def __init__(self, plan: SweepPlan, cluster: Cluster,
                 on_row: Callable[[dict[str, Any], int, int], None] | None = None):
        self.plan, self.cluster = plan, cluster
        self.on_row = on_row or (lambda row, done, total: None)
        self._stop = threading.Event()
        self._futures: list[Any] = []

    def stop(self) -> None:
        self._stop.set()
        if self._futures:
            self.cluster.client.cancel(self._futures)

    def run(self) -> SweepResult:
        from distributed import as_completed

        out = Path(self.plan.tasks[0].out_dir) if self.plan.tasks else Path(".")
        start = time.perf_counter()
        rows: list[dict[str, Any]] = []
        todo = []
        reused = 0
        for task in self.plan.tasks:
            row = finished_row(task)
            if row is None:
                todo.append(replace_pin(task, self.cluster.pin_by_worker_name))
            else:
                rows.append(row)
                reused += 1
        total = len(self.plan.tasks)
        for row in rows:                      # told apart from the points run now
            self.on_row(dict(row, reused=True), len(rows), total)
        client = self.cluster.client
        groups = self.plan.groups(todo, max(1, self.cluster.workers))
        keys = [f"points-{g[0].point.name}-{len(g)}-{g[0].point.fingerprint()}" for g in groups]
        self._futures = client.map(run_points, groups, pure=False, key=keys)
        group_of = dict(zip(keys, groups))
        last_write = 0.0
        try:
            for future in as_completed(self._futures):
                if self._stop.is_set():
                    break
                if future.status == "cancelled":
                    continue
                for row in self._rows(future, group_of[future.key]):
                    rows.append(row)
                    self.on_row(row, len(rows), total)
                if time.perf_counter() - last_write > 2.0:
                    write_table(out, rows, self.plan.spec.keys)
                    last_write = time.perf_counter()
        except KeyboardInterrupt:
            self._stop.set()
        stopped = self._stop.is_set()
        if stopped:
            client.cancel(self._futures)
        rows.sort(key=lambda r: (r["point"], r["replicate"]))
        files = write_table(out, rows, self.plan.spec.keys)
        summary = {
            "domain": self.plan.domain, "config": self.plan.source, "points": total,
            "value_rows": len(self.plan.spec.value_rows()), "replicates": self.plan.spec.replicates,
            "keys": self.plan.spec.keys, "finished": sum(r.get("status") == "ok" for r in rows),
            "failed": sum(r.get("status") == "failed" for r in rows), "reused": reused,
            "stopped": stopped, "wall_seconds": time.perf_counter() - start,
            "cluster": self.cluster.description, "workers": self.cluster.workers,
            "devices": sorted({str(r.get("device", "")) for r in rows if r.get("device")}),
            "metrics": list(self.plan.tasks[0].metrics) if self.plan.tasks else [],
            "batched": self.plan.batch, "tasks_submitted": len(self._futures),
            "tables": [p.name for p in files],
        }
        save_json(out / "summary.json", summary)
        from app.sims.common.provenance import write_crate
        backend = {r.get("backend") for r in rows if r.get("backend")}
        write_crate(out, name=out.name, started=time.time() - summary["wall_seconds"], ended=time.time(),
                    summary={**summary, "backend": ",".join(sorted(backend)),
                             "device": ", ".join(summary["devices"]), "finished": not summary["failed"]},
                    description=f"{out.name}: a parameter sweep of BioGPU Studio (every point's folder inside)")
        return SweepResult(rows, summary)


    @staticmethod
    def _rows(future: Any, tasks: list[PointTask]) -> list[dict[str, Any]]:
        try:
            return future.result()
        except Exception as exc:        # a failed point (or batch) does not end the sweep
            error = f"{type(exc).__name__}: {exc}"[:500]
            log.warning("sweep points %s failed: %s", ", ".join(t.point.name for t in tasks), error)
            return [{"point": t.point.index, "replicate": t.point.replicate, "name": t.point.name,
                     **dict(t.point.values), "status": "failed", "error": error} for t in tasks]


def replace_pin(task: PointTask, pin: bool) -> PointTask:
    from dataclasses import replace
    return replace(task, pin_by_worker_name=pin)


def run_sweep(config_path: str | Path, out_dir: str | Path, *, backend: str = "auto",
              workers: int | None = None, scheduler: str | None = None,
              overrides: list[str] | None = None, batch: bool = True,
              on_row: Callable[[dict[str, Any], int, int], None] | None = None,
              max_hours: float = MAX_SWEEP_HOURS,
              on_plan: Callable[[str], None] | None = None) -> SweepResult:
    """Plan, start (or connect to) the cluster, run every unfinished point, write the tables;
    ``on_plan`` gets the plan's running-time estimate before the cluster starts."""
    check_cluster_options(workers, scheduler)
    plan = plan_sweep(config_path, out_dir, backend, overrides, batch, max_hours)
    if on_plan is not None:
        on_plan(plan.estimate)
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    cluster = start_cluster(backend, workers, scheduler)
    try:
        return SweepRun(plan, cluster, on_row).run()
    finally:
        cluster.close()
