"""A domain added through an entry point gets a panel in the window and a main plot."""

from __future__ import annotations

import pytest

pytest.importorskip("PySide6", reason="the GUI extra is not installed")

from tests.plugins import DECAY_ENTRY_POINT, installed

pytestmark = pytest.mark.gui


def test_entry_point_domain_has_a_panel_that_runs(qtbot, shown_errors, run_to_end, tmp_path):
    from app.gui.export import render_main_plot
    from app.gui.main_window import MainWindow

    with installed(DECAY_ENTRY_POINT):
        window = MainWindow()
        qtbot.addWidget(window)
        labels = [window.panel_list.item(i).text() for i in range(window.panel_list.count())]
        assert labels[-1] == "Decay (example)" and len(labels) == 6
        panel = window.select_panel("decay")
        assert window.current_panel() is panel
        assert panel.form["decay.atoms"].value() == 1000            # the default preset
        assert "Atoms per realization" in panel.form["decay.atoms"].toolTip()
        panel.form["decay.steps"].setValue(40)
        run_to_end(panel)
        frame = panel.last_frame
        assert frame.done and len(frame.times) == 41
        assert render_main_plot("decay", frame, tmp_path / "plot.png").stat().st_size > 1000
        window.close()
    assert not shown_errors
