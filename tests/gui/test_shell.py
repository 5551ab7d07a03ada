"""The shell: presets per engine with estimates, shortcuts, Help, remembered settings and
workbench sessions (round trip)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("PySide6", reason="the GUI extra is not installed")
from PySide6.QtCore import Qt

from app import __version__
from app.gui.main_window import MainWindow, open_default, panel_order
from app.sims.common.registry import DOMAINS

PANEL_ORDER = panel_order(name for name, domain in DOMAINS.items() if domain.panel)   # as listed
from app.gui.presets import (
    ROLES,
    default_for_engine,
    estimate_seconds,
    format_duration,
    preset_for,
)
from app.gui.runner import RunState
from app.sims.common.simulation import load_run_config

pytestmark = pytest.mark.gui


def _short_ssa(window, realizations: int = 77):
    panel = window.select_panel("ssa")
    panel.realizations.setValue(realizations)
    panel.t_end.setValue(1.0)
    panel.samples.setValue(11)
    return panel


def _run_to_end(qtbot, panel) -> None:
    assert panel.start_run()
    qtbot.waitUntil(lambda: not panel.running and panel.run_controls.state is RunState.FINISHED,
                    timeout=60000)


def test_every_role_names_a_loadable_preset_and_cpu_defaults_fit_in_a_minute():
    for name in PANEL_ORDER:
        for role in ROLES:
            path = preset_for(name, role)
            assert path is not None, (name, role)
            domain, cfg = load_run_config(path)
            assert domain.name == name
        _, cpu = load_run_config(default_for_engine(name, "cpu"))
        seconds = estimate_seconds(name, cpu, "cpu")
        assert seconds is not None and seconds < 60, (name, seconds)   # from the measured rates
        _, paper = load_run_config(preset_for(name, "paper"))
        assert estimate_seconds(name, paper, "cuda") is not None
    assert default_for_engine("epidermis", "cpu").stem != "00-full-100-cells"
    assert default_for_engine("epidermis", "cuda").stem == "00-full-100-cells"
    assert format_duration(40) == "about 40 s" and format_duration(7 * 60) == "about 7 min"
    assert format_duration(3.5 * 3600) == "about 3.5 h"
    from app.sims.common.estimate import measured_table
    assert {(n, e) for n, e, _ in measured_table()} >= {(n, e) for n in PANEL_ORDER for e in ("cpu", "cuda")}


def test_paper_and_lesson_buttons_load_their_presets_with_the_expected_time(window):
    panel = window.select_panel("ssa")
    paper = panel.role_buttons["paper"]
    assert "min" in paper.text() or " s" in paper.text() or " h" in paper.text()
    assert "paper scale: " in panel.estimate_label.text()
    paper.click()
    assert panel.base_cfg.ensemble.realizations == 32768
    panel.role_buttons["lesson"].click()
    assert panel.base_cfg.name.startswith("Lesson")
    assert "What to look for" in panel.description.text()


def test_shortcuts_run_pause_resume_stop(window, qtbot):
    assert window.run_actions["run"].shortcut().toString() == "Ctrl+R"
    assert window.run_actions["pause"].shortcut().toString() == "Space"
    assert window.run_actions["stop"].shortcut().toString() == "Esc"
    panel = _short_ssa(window, realizations=4096)
    panel.t_end.setValue(30.0)
    window.raise_()
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow, timeout=5000)
    window.panel_list.setFocus()
    qtbot.keyClick(window.panel_list, Qt.Key.Key_R, Qt.KeyboardModifier.ControlModifier)
    assert panel.running
    qtbot.keyClick(window.panel_list, Qt.Key.Key_Space)
    assert panel.run_controls.state is RunState.PAUSED
    qtbot.keyClick(window.panel_list, Qt.Key.Key_Space)
    assert panel.run_controls.state is RunState.RUNNING
    qtbot.keyClick(window.panel_list, Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: not panel.running, timeout=30000)
    panel.seed.setFocus()                      # a space typed into a text field stays text
    panel.seed.setText("12")
    qtbot.keyClick(panel.seed, Qt.Key.Key_Space)
    assert not panel.running and panel.run_controls.state is not RunState.PAUSED


def test_help_about_shortcuts_and_methods(window):
    about = window.show_about()
    assert __version__ in about.text() and "Qt" in about.text() and "PyCUDA" in about.text()
    assert "CPU" in about.text() or "CUDA" in about.text()
    assert "Ctrl+R" in window.show_shortcuts().text()
    for name in PANEL_ORDER:
        text = window.show_method(name).text()
        assert "Reference" in text and any(str(y) in text for y in range(1970, 2030))


def test_settings_remember_panel_configs_and_splitters(qtbot, shown_errors, tmp_path):
    """The controls columns come back exactly as wide as they were left, for the panel shown at
    start and for one first shown later in a narrower window (its views give the difference)."""
    first = MainWindow()
    qtbot.addWidget(first)
    assert open_default(first)
    first.show()
    _short_ssa(first, realizations=123)
    qtbot.wait(20)
    first.pages["ssa"].splitter.setSizes([360, 2000])
    first.select_panel("network")
    qtbot.wait(20)
    first.pages["network"].splitter.setSizes([420, 2000])
    sizes = {name: first.pages[name].splitter.sizes() for name in ("ssa", "network")}
    assert sizes["ssa"][0] == 360 and sizes["network"][0] == 420
    first.close()
    assert list(Path(os.environ["BIOGPU_SETTINGS_DIR"]).glob("*.ini"))    # the isolated file
    from app.gui.settings import settings
    assert settings().value("panels/cardiac/splitter") is None   # never shown: nothing kept

    second = MainWindow()
    qtbot.addWidget(second)
    assert second.restored and open_default(second)
    assert PANEL_ORDER[second.panel_list.currentRow()] == "network"
    assert second.pages["ssa"].realizations.value() == 123
    second.show()
    qtbot.waitExposed(second)
    qtbot.wait(20)
    assert second.pages["network"].splitter.sizes() == sizes["network"]
    second.resize(second.width() - 60, second.height())
    second.select_panel("ssa")
    qtbot.wait(20)
    left, views = second.pages["ssa"].splitter.sizes()
    assert left == 360 and views == sizes["ssa"][1] - 60
    cardiac = second.select_panel("cardiac")        # first shown now: fits its controls
    qtbot.wait(20)
    assert cardiac.splitter.sizes()[0] >= min(cardiac.controls_width(), 0.45 * cardiac.width()) - 2
    second.close()


def test_session_round_trip_with_results(window, qtbot, tmp_path):
    panel = _short_ssa(window, realizations=77)
    _run_to_end(qtbot, panel)
    before = panel.last_frame
    network = window.pages["network"]
    network_cfg = network.current_config()
    window.select_panel("network")
    path = tmp_path / "workbench.biogpu"
    assert window.save_session(path, include_results=True)

    other = MainWindow()
    qtbot.addWidget(other)
    open_default(other)
    assert other.pages["ssa"].realizations.value() != 77
    assert other.open_session(path)
    assert PANEL_ORDER[other.panel_list.currentRow()] == "network"
    restored = other.pages["ssa"]
    assert restored.realizations.value() == 77 and restored.t_end.value() == 1.0
    assert restored.run_controls.state is RunState.FINISHED
    after = restored.last_frame
    assert type(after) is type(before) and after.done
    for key in ("times", "mean", "std", "hist_counts"):
        np.testing.assert_array_equal(getattr(after, key), getattr(before, key))
    assert after.species == before.species
    assert other.pages["network"].current_config() == network_cfg
    other.close()


def test_session_without_results_and_a_bad_file(window, tmp_path, shown_errors):
    path = tmp_path / "configs.biogpu"
    assert window.save_session(path, include_results=False)
    assert window.open_session(path)
    bad = tmp_path / "bad.biogpu"
    bad.write_bytes(b"not a zip")
    assert not window.open_session(bad)
    assert "session" in shown_errors[-1][0].lower()


def test_a_session_refuses_frame_classes_outside_app_sims(tmp_path):
    import json
    import zipfile

    from app.gui.workbench import load_session
    from app.sims.common.config import ConfigError

    path = tmp_path / "evil.biogpu"
    doc = {"format": "biogpu-session", "version": 1, "current": "ssa",
           "panels": {"ssa": {"config_yaml": "domain: ssa", "frame": {"class": "os:system", "fields": {}}}}}
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("session.json", json.dumps(doc))
        archive.writestr("frames/ssa.npz", b"")
    with pytest.raises(ConfigError):
        load_session(path)


def test_movie_of_a_cardiac_sheet_run(window, qtbot, tmp_path):
    """Run › Record movie, a short sheet run, File › Export movie: an MP4 with frames."""
    from app.gui.movie import movie_support

    if movie_support():
        pytest.skip(movie_support())
    import imageio

    window.record_movie.setChecked(True)
    panel = window.select_panel("cardiac")
    assert panel.record_next_movie and window.pages["epidermis"].record_movie.isChecked()
    assert not window.pages["ssa"].supports_movie()
    path = tmp_path / "small.yaml"
    path.write_text("domain: cardiac\nname: small\nmesh: {kind: sheet, nx: 16, ny: 10, dx_mm: 0.4}\n"
                    "protocol:\n  t_end: 300\n  stimuli: [{name: S1, start: 1, duration: 2, amplitude: -40,"
                    " region: {kind: rect, x0: 0, x1: 0.5, y0: 0, y1: 4}}]\n"
                    "solver: {method: rlfe, dt: 0.1}\noutput: {random_probes: 0, dt_save: 0.5}\n")
    panel.load_config(path)
    _run_to_end(qtbot, panel)
    assert panel.live_movie is not None and panel.live_movie.frames >= 1
    out = tmp_path / "run.mp4"
    assert window.save_movie(out)
    with imageio.get_reader(out, format="FFMPEG") as reader:
        first = reader.get_data(0)
        assert first.ndim == 3 and first.shape[0] > 50 and first.std() > 5   # a picture, not blank
