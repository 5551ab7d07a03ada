"""GUI against headless: the same preset run through ``Session`` alone and through its panel.

    python -m app bench gui [--backend cpu|cuda] [--out DIR] [--quick]
    python -m app.gui.bench --backend cuda --out DIR [--budget S] [--limit S] [--panels ...]
    python -m app.gui.bench --headless-only ...                 (no Qt: the headless half)

Without a display (no ``$DISPLAY``: a GPU server) Qt runs on its ``offscreen`` platform; views
that need OpenGL (the cardiac sphere, the epidermis tissue) are then not drawn, which the table
says. Each run is the panel's default preset for the engine, shortened to about ``--budget``
seconds by the rates of :mod:`app.gui.presets` (the CUDA network default takes hours) and
stopped after ``--limit`` seconds; the table and ``gui-<engine>.json`` go to ``--out``.

Per panel it times the first frame with a result (progress > 0), the whole run, and reports
the GUI's throughput as a fraction of the headless one two ways: by the simulation's own run
time (work done per second, headless against in the GUI; exact on an idle machine, noisy on a
shared one) and by CPU time (headless CPU / (GUI-process CPU + the X server's CPU during the GUI
run)): on a machine whose cores the simulation keeps busy, every CPU second the GUI spends is
taken from the simulation, and CPU time does not depend on what other processes do. The
headless run goes first, so the compiled engine's cache is warm for both.
"""

from __future__ import annotations

import argparse
import math
import os
import threading
import time
from dataclasses import asdict, dataclass, fields, is_dataclass, replace
from pathlib import Path
from typing import Any

from app.sims.common.bench_record import save_bench
from app.sims.common.session import Session
from app.sims.common.simulation import DOMAINS, load_run_config

PANELS = ("ssa", "channel", "cardiac", "network", "epidermis")


@dataclass
class Timing:
    first_result_s: float     # start to the first frame with progress > 0
    total_s: float            # start to the end of the run
    frames: int               # frames that reached the consumer (published ones in the GUI)
    cpu_s: float = 0.0        # CPU seconds of this process (all threads) and the X server
    run_s: float = 0.0        # the simulation's own run in its thread (Session.run)
    progress: float = 1.0     # the share of the run done (below 1: stopped at the limit)

    @property
    def rate(self) -> float:
        """Share of the run done per second of the simulation's own time."""
        return self.progress / self.run_s if self.run_s > 0 else 0.0


def x_server_cpu() -> float:
    """CPU seconds of the X server of $DISPLAY (Xvfb under xvfb-run), 0 where not found."""
    display = os.environ.get("DISPLAY", "")
    if not display.startswith(":"):
        return 0.0
    number = display[1:].split(".")[0]
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            args = (proc / "cmdline").read_bytes().split(b"\0")
            if args and args[0].endswith(b"Xvfb") and f":{number}".encode() in args:
                fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
                return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except OSError:
            continue
    return 0.0


def cpu_now() -> float:
    return time.process_time() + x_server_cpu()


@dataclass
class Row:
    panel: str
    preset: str
    backend: str
    headless: Timing
    gui: Timing | None
    drawn_3d: bool = True     # False: the panel's OpenGL view could not draw here (offscreen)

    @property
    def ratio(self) -> float | None:
        """GUI throughput / headless throughput: work per second of the simulation's own run
        time, in the GUI over headless (1.0: the GUI costs nothing)."""
        return self.gui.rate / self.headless.rate if self.gui and self.headless.rate else None

    @property
    def cpu_ratio(self) -> float | None:
        """Headless CPU / GUI CPU (with the X server's) per unit of work: the throughput ratio
        on saturated cores."""
        if not self.gui or not self.gui.cpu_s or not self.gui.progress:
            return None
        return (self.headless.cpu_s / self.headless.progress) / (self.gui.cpu_s / self.gui.progress)


def bench_config(name: str, backend: str, quick: bool, role: str = "") -> tuple[Path, Any]:
    """The panel's default preset for ``backend``, or its preset of ``role`` (roles.yaml),
    shortened with ``quick``."""
    from app.gui.presets import default_for_engine, preset_for

    path = (preset_for(name, role) if role else None) or default_for_engine(name, backend)
    _, cfg = load_run_config(path)
    cfg = without_checkpoint(cfg)
    if quick:
        cfg = shorten(name, cfg)
    return path, cfg


def without_checkpoint(cfg: Any) -> Any:
    """``cfg`` writing no checkpoint and resuming from none: a preset's checkpoint (the CUDA
    network default's) would make each timed run resume the one before it, done at once."""
    for section in fields(cfg):
        part = getattr(cfg, section.name)
        if is_dataclass(part) and hasattr(part, "checkpoint"):
            changes = {"checkpoint": "", **({"resume": False} if hasattr(part, "resume") else {})}
            cfg = replace(cfg, **{section.name: replace(part, **changes)})
    return cfg


def shorten(name: str, cfg: Any) -> Any:
    """A few-second version of ``cfg`` (smoke tests of the bench itself)."""
    if name == "ssa":
        return replace(cfg, ensemble=replace(cfg.ensemble, realizations=64, t_end=1.0, samples=11))
    if name == "channel":
        return replace(cfg, ga=replace(cfg.ga, population=200, generations=10))
    if name == "cardiac":
        return replace(cfg, protocol=replace(cfg.protocol, t_end=40.0))
    if name == "network":
        return replace(cfg, run=replace(cfg.run, epochs=4))
    if name == "epidermis":
        return replace(cfg, run=replace(cfg.run, steps=400, relax_steps=100))
    return cfg


# where a run's length lives in each domain's config (what --budget shortens)
LENGTH: dict[str, tuple[str, str, int]] = {     # domain -> (section, field, least value)
    "ssa": ("ensemble", "t_end", 0), "channel": ("ga", "generations", 2),
    "cardiac": ("protocol", "t_end", 0), "network": ("run", "epochs", 2),
    "epidermis": ("run", "steps", 200)}


def fit_budget(name: str, cfg: Any, backend: str, seconds: float) -> Any:
    """``cfg`` with its length cut so that its expected time on ``backend`` (the measured rates
    of :mod:`app.gui.presets`) is about ``seconds``; unchanged when it already fits."""
    from app.gui.presets import estimate_seconds

    expected = estimate_seconds(name, cfg, backend)
    if name not in LENGTH or not expected or expected <= seconds:
        return cfg
    section, field, least = LENGTH[name]
    part = getattr(cfg, section)
    value = getattr(part, field) * seconds / expected
    value = max(least, math.floor(value)) if isinstance(getattr(part, field), int) else value
    return replace(cfg, **{section: replace(part, **{field: value})})


def uses_opengl(name: str, cfg: Any) -> bool:
    """Whether the panel draws ``cfg`` with an OpenGL (vispy) view."""
    return name == "epidermis" or (name == "cardiac" and cfg.mesh.kind == "sphere")


def opengl_available() -> bool:
    """Whether Qt can make an OpenGL context here (not on the offscreen platform)."""
    from PySide6.QtGui import QOffscreenSurface, QOpenGLContext

    context = QOpenGLContext()
    if not context.create():
        return False
    surface = QOffscreenSurface()
    surface.create()
    return bool(surface.isValid() and context.makeCurrent(surface))


def run_headless(name: str, cfg: Any, backend: str, limit: float = math.inf) -> Timing:
    """Run ``cfg`` through ``Session`` alone, stopped after ``limit`` seconds."""
    first: list[float] = []
    count = [0]
    last = [0.0]
    start = time.perf_counter()

    def seen(frame) -> None:
        count[0] += 1
        last[0] = frame.progress
        if not first and frame.progress > 0:
            first.append(time.perf_counter() - start)

    cpu = cpu_now()
    session = Session(DOMAINS[name], cfg, backend, on_frame=seen)
    stopper = threading.Timer(limit, session.stop) if math.isfinite(limit) else None
    if stopper is not None:
        stopper.start()
    try:
        session.run()
    finally:
        if stopper is not None:
            stopper.cancel()
    total = time.perf_counter() - start
    return Timing(first[0] if first else total, total, count[0], cpu_now() - cpu, total,
                  1.0 if not session.stopped else last[0])


def run_gui(window, name: str, cfg: Any, backend: str, timeout: float) -> Timing:
    """Run ``cfg`` in its (shown) panel and time it through the panel's own drawing; the
    event loop waits as the application's does (no polling of our own). The run is stopped
    after ``timeout`` seconds."""
    from PySide6.QtCore import QEventLoop, QTimer

    from app.gui.screenshots import wait_until

    panel = window.select_panel(name)
    panel.apply_config(cfg)
    if panel.backend is not None:
        panel.backend.setCurrentIndex(max(panel.backend.findData(backend), 0))
    first: list[float] = []
    count = [0]
    draw = panel.on_frame

    def on_frame(frame) -> None:
        draw(frame)
        count[0] += 1
        if not first and frame.progress > 0:
            first.append(time.perf_counter() - start)

    panel.on_frame = on_frame
    cpu = cpu_now()
    start = time.perf_counter()
    try:
        assert panel.start_run(), "the panel did not start"
        worker = panel.worker
        loop = QEventLoop()
        worker.finished.connect(loop.quit)                # after the panel's own handlers
        if math.isfinite(timeout):
            QTimer.singleShot(int(timeout * 1000), panel.stop_run)
        if panel.running:
            loop.exec()
        total = time.perf_counter() - start
        cpu = cpu_now() - cpu
        wait_until(lambda: False, 0.2)
    finally:
        panel.on_frame = draw
    stopped = worker.session.stopped
    progress = panel.last_frame.progress if stopped and panel.last_frame is not None else 1.0
    return Timing(first[0] if first else total, total, count[0], cpu, worker.run_seconds, progress)


def _percent(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


def _unfinished(timing: Timing) -> str:
    """The " (N% done)" note of a run stopped at the limit; "" for a finished one."""
    return "" if timing.progress >= 1 else f" ({timing.progress:.0%} done)"


def table(rows: list[Row]) -> str:
    lines = ["| panel | preset | engine | headless: first result s | headless s | headless CPU s "
             "| GUI: first result s | GUI s (click to drawn end) | GUI: simulation s | GUI CPU s (with X) "
             "| GUI frames | GUI / headless throughput | by CPU |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        g, h = r.gui, r.headless
        preset = r.preset + ("" if r.drawn_3d else " (3D view not drawn: no OpenGL)")
        lines.append(f"| {r.panel} | {preset} | {r.backend} | {h.first_result_s:.2f} | "
                     f"{h.total_s:.2f}{_unfinished(h)} | {h.cpu_s:.1f} | "
                     + (f"{g.first_result_s:.2f} | {g.total_s:.2f} | {g.run_s:.2f}{_unfinished(g)}"
                        + f" | {g.cpu_s:.1f} | {g.frames} | {_percent(r.ratio)} | {_percent(r.cpu_ratio)} |"
                        if g else "– | – | – | – | – | – | – |"))
    return "\n".join(lines)


def _start_window(out_dir: Path):
    """(application, window shown at 1920x1080, GC collector, OpenGL available?); Qt's
    offscreen platform where there is no display."""
    if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    os.environ.setdefault("BIOGPU_SETTINGS_DIR", str(out_dir / "gui-bench-settings"))
    from PySide6.QtWidgets import QApplication

    from app.gui.main_window import MainWindow
    from app.gui.qt_compat import collect_garbage_in_gui_thread, freeze_startup_objects

    app = QApplication.instance() or QApplication([])
    collector = collect_garbage_in_gui_thread()
    window = MainWindow()
    window.resize(1920, 1080)
    window.show()
    freeze_startup_objects()
    return app, window, collector, opengl_available()


def main(backend: str = "cpu", out_dir: Path = Path("bench-results"), quick: bool = False,
         panels: tuple[str, ...] = PANELS, headless_only: bool = False, repeat: int = 1,
         timeout: float = 90.0, role: str = "", budget: float = 20.0) -> int:
    from app.compute.device import resolve_backend

    backend, _ = resolve_backend(backend)
    window, opengl, platform = None, None, "none (headless only)"
    if not headless_only:
        app, window, collector, opengl = _start_window(out_dir)
        platform = app.platformName()
    rows: list[Row] = []
    for name in panels:
        path, preset = bench_config(name, backend, quick, role)
        cfg = preset if quick else fit_budget(name, preset, backend, budget)
        run_headless(name, shorten(name, cfg), backend, timeout)   # not timed: compile or cache load
        best_headless: Timing | None = None
        best_gui: Timing | None = None
        for _ in range(repeat):   # best of N: the 2-core machine is shared
            h = run_headless(name, cfg, backend, timeout)
            best_headless = h if best_headless is None or h.rate > best_headless.rate else best_headless
            if window is not None:
                g = run_gui(window, name, cfg, backend, timeout)
                best_gui = g if best_gui is None or g.rate > best_gui.rate else best_gui
        label = path.stem + (" (quick)" if quick else " (shortened)" if cfg is not preset else "")
        row = Row(name, label, backend, best_headless, best_gui,
                  drawn_3d=window is None or bool(opengl) or not uses_opengl(name, cfg))
        rows.append(row)
        print(table([row]).splitlines()[-1], flush=True)
    text = table(rows)
    print(text)
    out_dir.mkdir(parents=True, exist_ok=True)
    gl = {True: "yes", False: "no", None: "not used"}[opengl]
    note = (f"Qt platform: {platform}; OpenGL: {gl}; budget {budget:g} s, "
            f"limit {timeout:g} s per run; {time.strftime('%Y-%m-%d %H:%M')}")
    (out_dir / f"gui-{backend}.md").write_text(text + "\n\n" + note + "\n")
    save_bench(f"gui-{backend}", {"platform": platform, "opengl": opengl, "budget_s": budget, "limit_s": timeout,
                                  "rows": [{**asdict(r), "ratio": r.ratio, "cpu_ratio": r.cpu_ratio} for r in rows]},
               out_dir, cuda=backend == "cuda")
    print(f"{note}\nwrote {out_dir / f'gui-{backend}.md'} and {out_dir / f'gui-{backend}.json'}")
    if window is not None:
        window.close()
        collector.timer.stop()
        app.processEvents()
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="cpu")
    parser.add_argument("--out", default="bench-results")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--headless-only", action="store_true")
    parser.add_argument("--panels", nargs="*", default=list(PANELS))
    parser.add_argument("--repeat", type=int, default=1, help="best of N (a shared machine)")
    parser.add_argument("--role", default="", help="a preset role of roles.yaml instead of the "
                        "engine's default (paper, lesson)")
    parser.add_argument("--budget", type=float, default=20.0,
                        help="seconds a run should take: longer presets are shortened")
    parser.add_argument("--limit", type=float, default=90.0, help="seconds after which a run is stopped")
    args = parser.parse_args()
    raise SystemExit(main(args.backend, Path(args.out), args.quick, tuple(args.panels),
                          args.headless_only, args.repeat, args.limit, args.role, args.budget))
