"""GUI against headless: the same preset run through ``Session`` alone and through its panel.

    python -m app bench gui [--backend cpu|cuda] [--quick]      (needs a display: xvfb-run -a)
    python -m app.gui.bench --headless-only ...                 (no Qt: the headless half)

Per panel it times the first frame with a result (progress > 0), the whole run, and reports
the GUI's throughput as a fraction of the headless one two ways: by wall time (headless wall /
GUI wall for the same work; exact on an idle machine, noisy on a shared one) and by CPU time
(headless CPU / (GUI-process CPU + the X server's CPU during the GUI run)): on a machine whose
cores the simulation keeps busy, every CPU second the GUI spends is taken from the simulation,
and CPU time does not depend on what other processes do. The headless run goes first, so the
compiled engine's cache is warm for both.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

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

    @property
    def ratio(self) -> float | None:
        """GUI throughput / headless throughput: the simulation's run time alone, headless over
        in the GUI (1.0: the GUI costs nothing)."""
        return self.headless.run_s / self.gui.run_s if self.gui and self.gui.run_s else None

    @property
    def cpu_ratio(self) -> float | None:
        """Headless CPU / GUI CPU (with the X server's): the throughput ratio on saturated cores."""
        return self.headless.cpu_s / self.gui.cpu_s if self.gui and self.gui.cpu_s else None


def bench_config(name: str, backend: str, quick: bool, role: str = "") -> tuple[Path, Any]:
    """The panel's default preset for ``backend``, or its preset of ``role`` (roles.yaml),
    shortened with ``quick``."""
    from app.gui.presets import default_for_engine, preset_for

    path = (preset_for(name, role) if role else None) or default_for_engine(name, backend)
    _, cfg = load_run_config(path)
    if quick:
        cfg = shorten(name, cfg)
    return path, cfg


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


def run_headless(name: str, cfg: Any, backend: str) -> Timing:
    first: list[float] = []
    count = [0]
    start = time.perf_counter()

    def seen(frame) -> None:
        count[0] += 1
        if not first and frame.progress > 0:
            first.append(time.perf_counter() - start)

    cpu = cpu_now()
    Session(DOMAINS[name], cfg, backend, on_frame=seen).run()
    total = time.perf_counter() - start
    return Timing(first[0] if first else total, total, count[0], cpu_now() - cpu, total)


def run_gui(window, name: str, cfg: Any, backend: str, timeout: float) -> Timing:
    """Run ``cfg`` in its (shown) panel and time it through the panel's own drawing; the
    event loop waits as the application's does (no polling of our own)."""
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
        loop = QEventLoop()
        panel.worker.finished.connect(loop.quit)          # after the panel's own handlers
        QTimer.singleShot(int(timeout * 1000), loop.quit)
        if panel.running:
            loop.exec()
        total = time.perf_counter() - start
        cpu = cpu_now() - cpu
        wait_until(lambda: False, 0.2)
    finally:
        panel.on_frame = draw
    return Timing(first[0] if first else total, total, count[0], cpu, panel.worker.run_seconds)


def table(rows: list[Row]) -> str:
    lines = ["| panel | preset | engine | headless: first result s | headless s | headless CPU s "
             "| GUI: first result s | GUI s (click to drawn end) | GUI: simulation s | GUI CPU s (with X) "
             "| GUI frames | GUI / headless throughput | by CPU |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        g, h = r.gui, r.headless
        lines.append(f"| {r.panel} | {r.preset} | {r.backend} | {h.first_result_s:.2f} | "
                     f"{h.total_s:.2f} | {h.cpu_s:.1f} | "
                     + (f"{g.first_result_s:.2f} | {g.total_s:.2f} | {g.run_s:.2f} | {g.cpu_s:.1f} | "
                        f"{g.frames} | {r.ratio:.0%} | {r.cpu_ratio:.0%} |"
                        if g else "– | – | – | – | – | – | – |"))
    return "\n".join(lines)


def main(backend: str = "cpu", out_dir: Path = Path("bench-results"), quick: bool = False,
         panels: tuple[str, ...] = PANELS, headless_only: bool = False, repeat: int = 1,
         timeout: float = 600.0, role: str = "") -> int:
    from app.compute.device import resolve_backend

    backend, _ = resolve_backend(backend)
    window = None
    if not headless_only:
        os.environ.setdefault("BIOGPU_SETTINGS_DIR", str(out_dir / "gui-bench-settings"))
        from PySide6.QtWidgets import QApplication

        from app.gui.main_window import MainWindow
        from app.gui.qt_compat import collect_garbage_in_gui_thread

        app = QApplication.instance() or QApplication([])
        collector = collect_garbage_in_gui_thread()
        window = MainWindow()
        window.resize(1920, 1080)
        window.show()
    rows: list[Row] = []
    for name in panels:
        path, cfg = bench_config(name, backend, quick, role)
        run_headless(name, shorten(name, cfg), backend)   # not timed: compile or cache load
        best_headless: Timing | None = None
        best_gui: Timing | None = None
        for _ in range(repeat):   # best of N: the 2-core machine is shared
            h = run_headless(name, cfg, backend)
            best_headless = h if best_headless is None or h.total_s < best_headless.total_s else best_headless
            if window is not None:
                g = run_gui(window, name, cfg, backend, timeout)
                best_gui = g if best_gui is None or g.total_s < best_gui.total_s else best_gui
        row = Row(name, path.stem + (" (quick)" if quick else ""), backend, best_headless, best_gui)
        rows.append(row)
        print(table([row]).splitlines()[-1], flush=True)
    print(table(rows))
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"gui-{backend}.json").write_text(json.dumps(
        [{**asdict(r), "ratio": r.ratio, "cpu_ratio": r.cpu_ratio} for r in rows], indent=1))
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
    args = parser.parse_args()
    raise SystemExit(main(args.backend, Path(args.out), args.quick, tuple(args.panels),
                          args.headless_only, args.repeat, role=args.role))
