"""Command line: the GUI, headless runs, benchmarks and device listing (one code path with the GUI).

    python -m app                                  # the GUI
    python -m app run CONFIG.yaml [--backend auto|cpu|cpu-reference|cuda] [--set key=value ...] [--out DIR]
    python -m app bench NAME [--backend ...] [--out DIR]
    python -m app bench compare --against REF | --against-tree PATH [--cases ...]
    python -m app devices
    python -m app domains                          # the registered domains (built-in and plugins)
    python -m app cache [info|clear|warm]          # the compiled-kernel cache (warm: numba too)
    python -m app bench startup [--bundle EXE] [--out DIR]   # time to the first frame, cold and warm
    python -m app bench steering [--backend ...]   # from a live change to the first frame showing it
    python -m app sweep CONFIG.yaml [--scheduler ADDRESS] [--workers N] [--out DIR]
    python -m app dsmts [--backend ...] [--realizations N] [--cases 1,5] [--seed S] [--suite DIR] [--out F]
    python -m app omex -i ARCHIVE.omex -o OUTDIR [--backend ...]   # run a COMBINE/OMEX archive's SED-ML
    python -m app omex --export RUN_OR_SWEEP_FOLDER -o OUT.omex    # a run or sweep as an OMEX archive

Exit codes: 0 done; 1 a failure while running (message printed; what the run had is written
where it could be); 2 bad input (a config, a file, an option: the message names it; nothing
ran); 3 a run that stopped before its end (a blow-up, a non-finite state) with what it had
written; 130 stopped by Ctrl-C.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import math
import sys
import time
from pathlib import Path

from app.compute.device import BACKENDS, cuda_status, list_devices, resolve_backend
from app.compute.kernels import KernelCompileError
from app.sims.common.config import ConfigError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    gui = sub.add_parser("gui", help="start the GUI (the default)")
    gui.add_argument("config", nargs="?", help="run config to open")
    gui.add_argument("--quit-after", type=float, default=None, metavar="SECONDS",
                     help="close the window after this long (a smoke test of an install)")
    gui.add_argument("--first-frame", default=None, metavar="PANEL",
                     help="Run the panel's CPU default preset at once, print the seconds from Run "
                     "to its first frame and quit (bench startup)")
    gui.add_argument("--again", action="store_true",
                     help="with --first-frame: also a second run's, once the compiled engine is ready")
    run = sub.add_parser("run", help="run a config headless and write its results",
                         description="Run a config headless and write config.yaml, results.npz, "
                         "summary.json and plot.png into the output folder.",
                         epilog=_preset_epilog(), formatter_class=argparse.RawDescriptionHelpFormatter)
    run.add_argument("config", help="a run config (YAML) or an SBML model file, or the name of a "
                     "shipped preset (see below; 'ssa/birth-death' where a name is in several panels)")
    run.add_argument("--backend", default="auto", choices=BACKENDS)
    run.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    run.add_argument("--out", default=None, help="output folder (default runs/<name>-<time>)")
    run.add_argument("--no-png", action="store_true", help="skip the PNG of the main plot")
    bench = sub.add_parser("bench", help="run a domain's benchmark; prints a table, writes JSON")
    bench.add_argument("name")
    bench.add_argument("--backend", default="auto", choices=BACKENDS)
    bench.add_argument("--out", default="bench-results",
                       help="folder for the JSON (default: bench-results in the current folder)")
    bench.add_argument("--quick", action="store_true", help="small sizes (a smoke test)")
    bench.add_argument("--fig7", action="store_true", help="channel: also the paper's Fig. 7 run")
    bench.add_argument("--against", help="compare: the reference commit (this repository's git)")
    bench.add_argument("--against-tree", help="compare: an extracted reference source tree")
    bench.add_argument("--cases", help="compare: comma-separated parts of case names")
    bench.add_argument("--bundle", help="startup: also the desktop bundle's first start (its executable)")
    bench.add_argument("--rounds", type=int, default=2, help="compare: runs per tree and case")
    bench.add_argument("--reps", type=int, default=2, help="compare: timings per run")
    bench.add_argument("--single-cell", action="store_true",
                       help="cardiac: single cells (CVODE) against Myokit's CVODES, side by side")
    bench.add_argument("--mesh", action="store_true",
                       help="cardiac: a generated ventricle-like mesh of 10^6 nodes, real-time factor")
    bench.add_argument("--split-dt", type=float, default=0.0, metavar="MS",
                       help="cardiac --mesh: operator splitting every MS ms (solver.split_dt)")
    bench.add_argument("--split", default="strang", choices=("strang", "godunov"),
                       help="cardiac --mesh with --split-dt: the splitting (solver.split)")
    bench.add_argument("--dt", type=float, default=None, metavar="MS",
                       help="cardiac --mesh: the cell model's step (solver.dt; default 0.02 ms)")
    bench.add_argument("--paper", action="store_true",
                       help="cardiac: the paper's sphere table alone (every solver's time and errors)")
    sub.add_parser("devices", help="what can run here")
    sub.add_parser("domains", help="the registered domains: built-in and from installed packages")
    cache = sub.add_parser("cache", help="the compiled-kernel cache: where it is, or clear it")
    cache.add_argument("action", nargs="?", default="info", choices=("info", "clear", "warm"),
                       help="warm: compile every compiled CPU engine (numba) not cached yet, "
                            "then build every panel's default preset on CUDA where it runs")
    sweep = sub.add_parser("sweep", help="run a config's sweep: block on a Dask cluster")
    sweep.add_argument("config")
    sweep.add_argument("--backend", default="auto", choices=BACKENDS)
    sweep.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    sweep.add_argument("--out", default=None, help="sweep folder (default runs/<name>-sweep-<time>); "
                       "an existing one resumes, skipping finished points")
    sweep.add_argument("--scheduler", default=None, help="address of an existing Dask scheduler")
    sweep.add_argument("--workers", type=int, default=None,
                       help="local workers (default: one per GPU, or one per CPU core)")
    sweep.add_argument("--no-batch", action="store_true",
                       help="one task per point even where the CUDA engine could batch points")
    sweep.add_argument("--plot", default=None, metavar="METRIC",
                       help="metric drawn in plot.png (default: the first)")
    sweep.add_argument("--no-png", action="store_true", help="skip plot.png")
    sweep.add_argument("--max-hours", type=float, default=None, metavar="H",
                       help="refuse a sweep expected to run longer than H hours, its points one after "
                            "another here (default 24)")
    omex = sub.add_parser("omex", help="SSA: run a COMBINE/OMEX archive's SED-ML, or export a run as one")
    omex.add_argument("-i", "--archive", default=None, help="the archive to run")
    omex.add_argument("--export", default=None, metavar="FOLDER", help="a run or sweep folder to export")
    omex.add_argument("-o", "--out", required=True, help="output folder (run) or .omex file (export)")
    omex.add_argument("--backend", default="auto", choices=BACKENDS)
    omex.add_argument("--seed", type=int, default=2024, help="seed where the SED-ML gives none")
    omex.add_argument("--workers", type=int, default=None, help="Dask workers for repeated tasks that sweep")
    omex.add_argument("--scheduler", default=None, help="address of an existing Dask scheduler")
    omex.add_argument("--no-png", action="store_true", help="skip the plots")
    export = sub.add_parser("export", help="a run's model or data as NeuroML2, NWB or CellML")
    export.add_argument("run_folder")
    export.add_argument("--to", required=True, choices=("neuroml", "nwb", "cellml", "vtu"))
    export.add_argument("-o", "--out", default=None, help="output file (default RUN_FOLDER/export/<run>.<ext>)")
    export.add_argument("--epoch", type=int, default=None, metavar="N",
                        help="network runs, NeuroML2: the connectivity after epoch N (0: the start; "
                             "default the end of the run)")
    sub.add_parser("dsmts", help="SSA: DSMTS conformance verdicts (SBML stochastic test suite); exit 1 on a fail",
                   add_help=False)
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["dsmts"]:            # its own options (app.sims.ssa.dsmts.main parses them)
        from app.sims.ssa.dsmts import main as dsmts_main
        return dsmts_main(argv[1:])
    args = parser.parse_args(argv)
    # warnings and errors only: the commands print their own progress (INFO is internal detail)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        from app.sims.common.environment import check_environment
        check_environment()              # a bad NUMBA_NUM_THREADS or memory limit, named as such
        if args.command in (None, "gui"):
            from app.gui import main as gui_main
            return gui_main(config_path=getattr(args, "config", None),
                            quit_after=getattr(args, "quit_after", None),
                            first_frame=getattr(args, "first_frame", None), again=getattr(args, "again", False))
        if args.command == "devices":
            return _devices()
        if args.command == "domains":
            return _domains()
        if args.command == "cache":
            return _cache(args.action)
        if args.command == "run":
            return _run(args)
        if args.command == "bench":
            return _bench(args)
        if args.command == "sweep":
            return _sweep(args)
        if args.command == "omex":
            return _omex(args)
        if args.command == "export":
            from app.sims.common.export import export_run
            for path in export_run(args.run_folder, args.to, args.out, args.epoch):
                print(f"wrote {path}")
            return 0
    except (ConfigError, KernelCompileError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("stopped", file=sys.stderr)
        return 130
    except (RuntimeError, OSError, MemoryError, ValueError) as exc:
        print(f"error: {type(exc).__name__ if not isinstance(exc, RuntimeError) else ''}"
              f"{': ' if not isinstance(exc, RuntimeError) else ''}{exc}", file=sys.stderr)
        return 1
    return 0


def _devices() -> int:
    status = cuda_status()
    print(f"CUDA: {'available' if status.available else 'not available'} ({status.reason})")
    for dev in list_devices():
        print(f"  {dev.backend:5s} {dev.index}  {dev.name}  {dev.detail}")
    print(f"auto picks: {resolve_backend('auto')[1]}")
    from app.compute import compilers, kernel_cache
    compiler, reason = compilers.choose()
    print(f"kernel compiler: {reason}")
    others = [c.describe() for c in compilers.available() if compiler is None or c.name != compiler.name]
    if others:
        print(f"  also here: {', '.join(others)} (BIOGPU_COMPILER=nvrtc|nvcc picks one)")
    print(f"kernel cache: {kernel_cache.cache_dir()} ({len(kernel_cache.entries())} compiled modules)")
    return 0


def _domains() -> int:
    from app.sims.common.simulation import DOMAINS, presets

    for name, domain in DOMAINS.items():
        print(f"{name:10s} {domain.label}: engines {', '.join(domain.engines)}; "
              f"{len(presets(name))} presets; {'bench; ' if domain.bench else ''}{domain.module}")
    return 0


def _cache(action: str) -> int:
    from app.compute import kernel_cache

    if action == "warm":
        return _warm_cache()
    if action == "clear":
        files, size = kernel_cache.clear()
        print(f"removed {files} compiled kernels ({size / 2**20:.1f} MiB) from {kernel_cache.cache_dir()}")
        return 0
    files = kernel_cache.entries()
    size = sum(p.stat().st_size for p in files)
    print(f"{kernel_cache.cache_dir()}: {len(files)} compiled kernels, {size / 2**20:.1f} MiB")
    return 0


def _run(args: argparse.Namespace) -> int:
    from app.sims.common.session import run_headless
    from app.sims.common.simulation import load_run_config

    _check_preset_name(args.config)
    domain, cfg = load_run_config(args.config, overrides=args.overrides)
    backend, reason = resolve_backend(args.backend, domain.cpu_preference(cfg))
    print(reason)
    out = Path(args.out or f"runs/{Path(args.config).stem}-{time.strftime('%Y%m%d-%H%M%S')}")
    from app.sims.common.output import check_output_dir
    check_output_dir(out)                      # before the run, not after it
    last = [0.0]

    def progress(frame) -> None:
        now = time.perf_counter()
        if now - last[0] > 1.0 or frame.done:
            last[0] = now
            print(f"  {frame.progress:6.1%}  {frame.status}  {frame.throughput:.3g} {frame.throughput_unit}",
                  flush=True)

    expected = _expected(domain.name, cfg, backend)
    png = None if args.no_png else (lambda session, folder: _save_png(domain.name, session,
                                                                          folder / "plot.png"))
    try:
        session = run_headless(domain, cfg, backend, out, progress, png)
    except ConfigError as exc:           # found before the run (memory, integers, checkpoint)
        if exc.source is None:
            exc.source = str(args.config)
        raise
    print(json.dumps(session.summary, indent=2))
    _print_estimate_against_actual(domain.name, cfg, backend, expected, session)
    print(f"results in {out}/")
    if (out / "plot.png").is_file():
        print(f"plot in {out / 'plot.png'}")
    stopped = session.summary.get("stopped")
    if stopped and not session.stopped:
        print(f"error: the run stopped before its end: {stopped}", file=sys.stderr)
        return 3
    return 0


def _preset_epilog() -> str:
    """The shipped presets, by panel, for ``run --help``."""
    from app.sims.common.simulation import DOMAINS, presets

    lines = ["shipped presets (give the name instead of a path):"]
    for name in DOMAINS:
        stems = [p.stem for p in presets(name)]
        if stems:
            lines.append(f"  {name}: {', '.join(stems)}")
    return "\n".join(lines)


def _check_preset_name(config: str) -> None:
    """Refuse a config that is neither a file nor a shipped preset, naming the close presets."""
    import difflib

    from app.sims.common.simulation import DOMAINS, find_preset, presets

    path = Path(config)
    if path.exists() or path.suffix.lower() not in ("", ".yaml") or find_preset(config):
        return
    full = {f"{d}/{p.stem}": p.stem for d in DOMAINS for p in presets(d)}
    stem = config[:-5] if config.endswith(".yaml") else config
    key = stem.rpartition("/")[2] if stem.rpartition("/")[0] not in DOMAINS else stem
    pool = {name: (name if "/" in key else short) for name, short in full.items()}
    close = difflib.get_close_matches(key, list(set(pool.values())), n=4, cutoff=0.6)
    matches = [name for c in close for name, v in pool.items() if v == c]
    hint = f"did you mean {', '.join(matches[:4])}?" if matches \
        else "see 'biogpu run --help' for the shipped presets"
    raise ConfigError(f"no such file, and no shipped preset of that name; {hint}", config)
def _expected(name: str, cfg, backend: str) -> tuple[float, float] | None:
    """The run's expected wall seconds (printed before it starts), or None."""
    from app.sims.common.estimate import estimate_range, format_range
    from app.sims.common.memory import describe
    from app.sims.common.session import memory_estimate
    from app.sims.common.warmup import has_compiled_engine, key_of, service

    cold = backend == "cpu" and has_compiled_engine(name) and not service().status(key_of(name, cfg)).ready
    expected = estimate_range(name, cfg, backend, cold=cold)
    print(f"expected: {format_range(*expected)}" if expected else
          "expected: no estimate (this model was not measured on this engine)")
    need = memory_estimate(cfg, backend)
    if need is not None:
        print(f"memory: {describe(need, backend)}", flush=True)
    return expected


def _print_estimate_against_actual(name: str, cfg, backend: str, expected, session) -> None:
    from app.sims.common.estimate import format_range

    wall = session.summary.get("wall_seconds")
    if wall is not None:
        print(f"took {float(wall):.1f} s" + (f" (expected {format_range(*expected)})" if expected else ""))


def _save_png(domain: str, session, path: Path) -> None:
    """The panel's main plot as PNG, rendered by the GUI layer when Qt is installed."""
    try:
        from app.gui.export import render_main_plot
        render_main_plot(domain, session.last_frame, path)
    except ImportError as exc:
        print(f"PNG skipped: the GUI packages are not installed ({exc.name})")
    except Exception as exc:          # a plot of a run that failed early: the results still count
        print(f"PNG skipped: {type(exc).__name__}: {exc}")


def _bench(args: argparse.Namespace) -> int:
    from app.sims.common.simulation import DOMAINS

    if args.name in ("sweep", "gui", "compare", "steering"):
        print(f"results go to {Path(args.out).resolve()}/ (--out changes it)")
    if args.name == "sweep":            # not a domain: Dask's overhead on tiny points
        from app.sweep import bench as sweep_bench
        return sweep_bench.main(backend=args.backend, out_dir=Path(args.out), quick=args.quick)
    if args.name == "compare":          # not a domain: the headline cases against a reference tree
        from app import bench_compare
        return bench_compare.main(args.against, args.against_tree, Path(args.out), args.rounds, args.reps,
                                  args.cases)
    if args.name == "startup":          # not a domain: time to the first frame, cold and warm
        from app.sims.common.startup_bench import main as startup_main
        return startup_main(out_dir=Path(args.out), quick=args.quick, bundle=args.bundle)
    if args.name == "steering":         # not a domain: from a change to the first frame showing it
        from app.sims.common.steering_bench import main as steering_main
        return steering_main(backend=args.backend, out_dir=Path(args.out), quick=args.quick)
    if args.name == "gui":              # not a domain: each panel in the GUI against headless
        from app.gui import bench as gui_bench
        return gui_bench.main(backend=args.backend, out_dir=Path(args.out), quick=args.quick)
    domain = DOMAINS.get(args.name)
    if domain is None or domain.bench is None:
        names = [d.name for d in DOMAINS.values() if d.bench]
        raise ConfigError(f"no benchmark named {args.name!r}; available: {', '.join(names)}")
    module = importlib.import_module(domain.bench)
    if args.single_cell:
        if args.name != "cardiac":
            raise ConfigError("--single-cell belongs to the cardiac benchmark")
        return module.single_cell(out_dir=Path(args.out), quick=args.quick)
    if args.mesh:
        if args.name != "cardiac":
            raise ConfigError("--mesh belongs to the cardiac benchmark")
        from app.sims.cardiac import bench_mesh
        return bench_mesh.main(backend=args.backend, out_dir=Path(args.out), quick=args.quick,
                               split_dt=args.split_dt, split=args.split,
                               **({"dt": args.dt} if args.dt is not None else {}))
    if args.paper:
        if args.name != "cardiac":
            raise ConfigError("--paper belongs to the cardiac benchmark")
        return module.paper(backend=args.backend, out_dir=Path(args.out), quick=args.quick)
    extra = {"fig7_run": True} if args.fig7 else {}
    if extra and args.name != "channel":
        raise ConfigError("--fig7 belongs to the channel benchmark")
    print(f"results go to {Path(args.out).resolve()}/ (--out changes it)")
    start = time.perf_counter()
    code = module.main(backend=args.backend, out_dir=Path(args.out), quick=args.quick, **extra)
    _print_compile_stats(time.perf_counter() - start)
    return code


def _warm_cache() -> int:
    """Compile every compiled CPU engine not in numba's cache (progress each second), then
    start each panel's default preset on CUDA where CUDA runs: compiles what is missing."""
    from app.compute.device import backend_context
    from app.compute.kernels import STATS
    from app.sims.common.simulation import DOMAINS, default_preset, load_run_config
    from app.sims.common.warmup import has_compiled_engine, service

    from app.sims.common.config import load_yaml
    from app.sims.common.simulation import PRESETS

    names = [name for name in DOMAINS if has_compiled_engine(name)]
    roles = load_yaml(PRESETS / "roles.yaml").data
    for k, name in enumerate(names, 1):
        start = time.perf_counter()
        stem = roles.get(name, {}).get("cpu") if isinstance(roles, dict) else None
        cfg = load_run_config(PRESETS / name / f"{stem}.yaml")[1] if stem else None
        key = service().request(name, cfg).domain       # the engine and the CPU default's model
        while True:
            prep = service().wait(key, timeout=1.0)
            if prep.state in ("ready", "failed"):
                break
            print(f"\r  {name:10s} compiled CPU engine {k} of {len(names)}: {prep.describe()}   ",
                  end="", flush=True)
        print(f"\r  {name:10s} compiled CPU engine {k} of {len(names)}: "
              f"{prep.describe() if prep.state == 'failed' else f'ready in {time.perf_counter() - start:.1f} s'}"
              f"{' (a damaged cache was rebuilt)' if prep.rebuilt else ''}" + " " * 20, flush=True)
    if not cuda_status().available:
        print(f"CUDA kernels not warmed: {cuda_status().reason}")
        return 0
    with backend_context("cuda"):
        for name, domain in DOMAINS.items():
            _, cfg = load_run_config(default_preset(name))
            compiled, cached = STATS.compiled, STATS.from_cache
            start = time.perf_counter()
            sim = domain.load().Simulation.from_config(cfg, "cuda")
            seconds = time.perf_counter() - start
            sim.close()
            print(f"  {name:10s} default preset started on CUDA in {seconds:.3f} s: "
                  f"{STATS.compiled - compiled} kernels compiled, {STATS.from_cache - cached} from the cache")
    return 0


def _print_compile_stats(wall: float) -> None:
    """How much of a run was kernel compilation (0 compiled on a start with a warm cache)."""
    from app.compute.kernels import STATS

    if STATS.compiled or STATS.from_cache:
        print(f"kernels: {STATS.compiled} compiled in {STATS.compile_seconds:.2f} s, "
              f"{STATS.from_cache} from the kernel cache (whole command {wall:.1f} s)")


def _sweep(args: argparse.Namespace) -> int:
    """Exit 0 when every point finished, 1 when some failed, 130 when stopped (resume with --out)."""
    from app.sweep.runner import MAX_SWEEP_HOURS, run_sweep

    out = Path(args.out or f"runs/{Path(args.config).stem}-sweep-{time.strftime('%Y%m%d-%H%M%S')}")
    if args.workers is not None and args.workers < 1:
        raise ConfigError(f"--workers must be at least 1, got {args.workers}")
    if args.max_hours is not None and not 0 < args.max_hours < math.inf:
        raise ConfigError(f"--max-hours must be a positive number of hours, got {args.max_hours}")

    def show(row: dict, done: int, total: int) -> None:
        state = row.get("status", "ok")
        if row.get("reused"):
            state, extra = "reused", "  (finished in an earlier run of this sweep folder)"
        elif state == "ok":
            extra = f"  {row.get('wall_seconds', 0):.2f} s on {row.get('worker', '?')}"
        else:
            extra = f"  {row.get('error', '')}"
        print(f"  [{done}/{total}] {row['name']} {state}{extra}", flush=True)

    result = run_sweep(args.config, out, backend=args.backend, workers=args.workers,
                       scheduler=args.scheduler, overrides=args.overrides,
                       batch=not args.no_batch, on_row=show,
                       max_hours=args.max_hours or MAX_SWEEP_HOURS, on_plan=lambda line: print(line, flush=True))
    s = result.summary
    print(f"{s['finished']} of {s['points']} points finished ({s['reused']} reused, {s['failed']} failed) "
          f"in {s['wall_seconds']:.1f} s on {s['cluster']}")
    print(f"table: {out / 'sweep.csv'}")
    if not args.no_png and s["finished"]:
        try:
            from app.gui.export import render_sweep_plot
            if render_sweep_plot(result.rows, s["keys"], out / "plot.png", args.plot):
                print(f"plot: {out / 'plot.png'}")
        except ImportError as exc:
            print(f"PNG skipped: the GUI packages are not installed ({exc.name})")
    if s["stopped"]:
        return 130
    return 1 if s["failed"] else 0


def _omex(args: argparse.Namespace) -> int:
    """Run an archive into a folder (BioSimulators' -i/-o), or export a run folder as an archive."""
    if (args.archive is None) == (args.export is None):
        raise ConfigError("give either -i ARCHIVE (run it) or --export FOLDER (write one)")
    if args.export is not None:
        from app.sims.ssa.sedml_export import export_folder
        print(f"archive: {export_folder(args.export, args.out)}")
        return 0
    from app.omex import run_archive

    result = run_archive(args.archive, args.out, args.backend, seed=args.seed, workers=args.workers,
                         scheduler=args.scheduler, png=not args.no_png)
    for path in result.reports + result.plots:
        print(f"  {path}")
    print(f"results in {args.out}/")
    return 0
