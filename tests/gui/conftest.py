"""GUI test fixtures: skip cleanly without PySide6 / pytest-qt or without a display."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

HERE = Path(__file__).parent


def _skip_reason() -> str | None:
    try:
        import PySide6  # noqa: F401
        import pyqtgraph  # noqa: F401
        import pytestqt  # noqa: F401
    except ImportError as exc:
        return f"the GUI extra is not installed ({exc.name} missing)"
    if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
            or os.environ.get("QT_QPA_PLATFORM") == "offscreen"):
        return "no display (run under xvfb-run -a)"
    return None


SKIP_REASON = _skip_reason()


def pytest_collection_modifyitems(config, items) -> None:
    """Skip every GUI test cleanly when Qt or a display is missing."""
    if SKIP_REASON:
        for item in items:
            if HERE in Path(item.fspath).parents:
                item.add_marker(pytest.mark.skip(reason=SKIP_REASON))


if SKIP_REASON is None:
    import app.gui  # noqa: F401  (applies the PySide6 refcount guard before any signal)

from app.sims.common.simulation import PRESETS  # noqa: E402

SSA_PRESETS = PRESETS / "ssa"


@pytest.fixture(autouse=True)
def isolated_settings(tmp_path, monkeypatch):
    """Every GUI test gets its own empty QSettings file (never the user's)."""
    monkeypatch.setenv("BIOGPU_SETTINGS_DIR", str(tmp_path / "settings"))


@pytest.fixture(autouse=True)
def collect_garbage_in_test_thread():
    """As the app does (``qt_compat.collect_garbage_in_gui_thread``): no collection in worker
    threads during a test; collect in the test (GUI) thread afterwards."""
    import gc

    gc.disable()
    try:
        yield
    finally:
        gc.collect()
        gc.enable()


@pytest.fixture
def shown_errors(monkeypatch) -> list[tuple[str, str, str]]:
    """Every (title, text, detail) the app tried to show in an error box."""
    from app.gui import errors

    seen: list[tuple[str, str, str]] = []
    monkeypatch.setattr(errors, "show_error", lambda parent, title, text, detail="":
                        seen.append((title, text, detail)))
    return seen


@pytest.fixture
def window(qtbot, shown_errors):
    """The main window with the default SSA preset open (closed, workers stopped, after)."""
    from app.gui.main_window import MainWindow, open_default

    win = MainWindow()
    qtbot.addWidget(win)
    assert open_default(win)
    win.show()
    qtbot.waitExposed(win)
    yield win
    win.close()


@pytest.fixture
def ssa(window):
    """The SSA panel, selected, on the CPU engine."""
    panel = window.select_panel("ssa")
    panel.backend.setCurrentIndex(panel.backend.findData("cpu"))
    return panel


def _set_ensemble(panel, realizations: int = 32, t_end: float = 0.5, samples: int = 11) -> None:
    panel.realizations.setValue(realizations)
    panel.t_end.setValue(t_end)
    panel.samples.setValue(samples)


@pytest.fixture
def set_ensemble():
    """set_ensemble(panel, realizations=32, t_end=0.5, samples=11): type into the widgets."""
    return _set_ensemble


@pytest.fixture
def run_to_end(qtbot):
    """run_to_end(panel): start a run and wait until it finished and its last frame is drawn."""
    from app.gui.runner import RunState

    def run(panel, timeout_ms: int = 180000) -> None:   # a hang guard only: never a speed test
        assert panel.start_run()
        with qtbot.waitSignal(panel.worker.run_finished, timeout=timeout_ms):
            pass
        assert panel.run_controls.state is RunState.FINISHED
    return run


@pytest.fixture
def preset():
    """preset(stem) -> path of a shipped SSA preset."""
    return lambda stem: SSA_PRESETS / f"{stem}.yaml"


SHORT_RUN_PRESETS = {"ssa": "ssa/birth-death", "channel": "channel/lesson-model-a-small",
                     "cardiac": "cardiac/03-sheet-spiral-s1s2-ach-small",
                     "network": "network/lesson-bursts-appear",
                     "epidermis": "epidermis/lesson-first-divisions"}


def _short_config(name: str, cfg):
    """A run of about a second on the NumPy engine with a frame worth drawing."""
    from dataclasses import replace

    if name == "ssa":
        return replace(cfg, ensemble=replace(cfg.ensemble, realizations=32, t_end=1.0, samples=11))
    if name == "channel":
        return replace(cfg, ga=replace(cfg.ga, population=16, generations=3))
    if name == "cardiac":
        return replace(cfg, mesh=replace(cfg.mesh, nx=12, ny=12), protocol=replace(cfg.protocol, t_end=30.0),
                       output=replace(cfg.output, probe_cells=[0, 70]))
    if name == "network":
        return replace(cfg, run=replace(cfg.run, epochs=3, epoch_seconds=0.5, slice_seconds=0.5))
    if name == "epidermis":
        return replace(cfg, tissue=replace(cfg.tissue, cells=4),
                       run=replace(cfg.run, steps=40, relax_steps=10, history_every=10))
    raise AssertionError(name)


@pytest.fixture(scope="session")
def short_run():
    """short_run(panel) -> (config, last frame) of a short finished run of a preset of that
    domain on the NumPy engine (run once per test session)."""
    from app.sims.common.session import Session
    from app.sims.common.simulation import DOMAINS, find_preset, load_run_config

    done: dict[str, tuple] = {}

    def run(name: str):
        if name not in done:
            _, cfg = load_run_config(find_preset(SHORT_RUN_PRESETS[name]))
            cfg = _short_config(name, cfg)
            session = Session(DOMAINS[name], cfg, "cpu-reference")
            session.run()
            done[name] = (cfg, session.last_frame)
        return done[name]
    return run
