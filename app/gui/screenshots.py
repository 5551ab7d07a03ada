"""Screenshots of every panel at rest, running and finished, at 1280x800 and 1920x1080.

    xvfb-run -a -s "-screen 0 1920x1200x24" python -m app.gui.screenshots docs/screenshots

Each panel runs its default preset for the engine here (the CPU one without CUDA); the PNGs are
``<panel>-<state>-<width>.png``, downscaled by half and palette-quantised to stay small.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

SIZES = ((1280, 800), (1920, 1080))
STATES = ("rest", "running", "finished")
# A run expected to take less (seconds) is held at 40 % for its "running" picture: its first
# frame waits 0.6 s (app.gui.runner.FIRST_FRAME_AFTER), so it would show none while running.
SHORT_RUN = 5.0


def wait_until(condition, timeout: float, step_ms: int = 50) -> bool:
    """Process Qt events until ``condition()`` or ``timeout`` seconds; True if it became true."""
    from PySide6.QtCore import QCoreApplication, QEventLoop, QThread

    end = time.perf_counter() + timeout
    while time.perf_counter() < end:
        QCoreApplication.processEvents(QEventLoop.ProcessEventsFlag.AllEvents, step_ms)
        if condition():
            return True
        QThread.msleep(5)
    return condition()


def settle(seconds: float = 0.3) -> None:
    wait_until(lambda: False, seconds)


def save_small(image, path: Path, scale: float = 0.5) -> Path:
    """Write ``image`` (a QImage or QPixmap) downscaled and quantised to a palette PNG."""
    from PIL import Image
    from PySide6.QtCore import QBuffer, QIODevice

    buffer = QBuffer()
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    image.save(buffer, "PNG")
    import io

    picture = Image.open(io.BytesIO(bytes(buffer.data()))).convert("RGB")
    if scale != 1.0:
        picture = picture.resize((int(picture.width * scale), int(picture.height * scale)),
                                 Image.Resampling.LANCZOS)
    picture = picture.quantize(colors=128, method=Image.Quantize.MEDIANCUT)
    path.parent.mkdir(parents=True, exist_ok=True)
    picture.save(path, optimize=True)
    return path


def shoot(window, name: str, state: str, out: Path, scale: float) -> list[Path]:
    """Grab the window at both sizes (the current one last, so it stays)."""
    written = []
    current = (window.width(), window.height())
    for width, height in sorted(SIZES, key=lambda s: s == current):
        window.resize(width, height)
        settle(0.4)
        written.append(save_small(window.grab(), out / f"{name}-{state}-{width}.png", scale))
    return written


def run(out: Path, panels: list[str], timeout: float, scale: float,
        rest_only: bool = False) -> list[Path]:
    from PySide6.QtWidgets import QApplication

    from app.gui.main_window import MainWindow, open_default

    app = QApplication.instance() or QApplication(sys.argv[:1])
    window = MainWindow()
    open_default(window)
    window.resize(*SIZES[-1])
    window.show()
    settle(1.0)
    written: list[Path] = []
    for name in panels or list(window.pages):
        panel = window.select_panel(name)
        panel.open_default_preset()
        settle(0.5)
        wait_until(lambda p=panel: not getattr(p, "_previews", None), 60)   # the model at rest
        settle(0.3)
        written += shoot(window, name, "rest", out, scale)
        if rest_only:
            continue
        expected = panel.estimate(panel.current_config())
        panel.start_run()
        session = panel.worker.session
        if expected is None or expected[1] < SHORT_RUN:  # held midway, or it ends before a frame
            session.pause_when(lambda frame: frame.progress >= 0.4)
        wait_until(lambda p=panel: p.last_frame is not None and p.last_frame.progress > 0.3
                   or not p.running, timeout / 2)
        if panel.running:
            written += shoot(window, name, "running", out, scale)
        session.pause_when(None)
        session.resume()
        wait_until(lambda p=panel: not p.running, timeout)
        if panel.running:
            panel.stop_run()
            wait_until(lambda p=panel: not p.running, 30)
        settle(1.0)
        written += shoot(window, name, "finished", out, scale)
        print(f"{name}: {len(written)} screenshots so far", flush=True)
    window.close()
    app.processEvents()
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", default="docs/screenshots")
    parser.add_argument("--panels", nargs="*", default=[])
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per run at most")
    parser.add_argument("--scale", type=float, default=0.5)
    parser.add_argument("--rest-only", action="store_true", help="no runs: the panels at rest")
    args = parser.parse_args(argv)
    import tempfile

    os.environ.setdefault("BIOGPU_SETTINGS_DIR", tempfile.mkdtemp(prefix="biogpu-settings-"))
    files = run(Path(args.out), args.panels, args.timeout, args.scale, args.rest_only)
    total = sum(f.stat().st_size for f in files)
    print(f"{len(files)} screenshots, {total / 1e6:.2f} MB in {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
