"""The Sweep dialog: sweep the SSA panel's config on a local Dask cluster, view, open a point."""

from __future__ import annotations

import pytest

pytest.importorskip("PySide6", reason="the GUI extra is not installed")
pytest.importorskip("distributed", reason="the sweep extra is not installed")

pytestmark = pytest.mark.gui


def _axis(dialog, row: int, key: str, start: float, stop: float, num: int, scale: str = "linear"):
    dialog.axes.cellWidget(row, 0).setCurrentText(key)
    dialog.axes.cellWidget(row, 1).setText(str(start))
    dialog.axes.cellWidget(row, 2).setText(str(stop))
    dialog.axes.cellWidget(row, 3).setValue(num)
    dialog.axes.cellWidget(row, 4).setCurrentText(scale)


def test_sweep_dialog_runs_shows_and_opens_a_point(ssa, window, qtbot, preset, set_ensemble,
                                                   tmp_path, shown_errors, caplog):
    ssa.load_config(preset("birth-death"))
    set_ensemble(ssa, realizations=64, t_end=1.0, samples=5)
    dialog = window.open_sweep()
    qtbot.addWidget(dialog)
    keys = [k for k, _ in dialog.keys]
    assert "model.parameters.k" in keys and "ensemble.realizations" in keys
    assert "ensemble.algorithm" not in keys                    # text, not a number
    _axis(dialog, 0, "model.parameters.k", 5, 20, 3)
    dialog.add_axis("model.parameters.g")
    _axis(dialog, 1, "model.parameters.g", 0.5, 1.0, 2)
    dialog.replicates.setValue(2)
    dialog.workers.setValue(1)
    dialog.out_edit.setText(str(tmp_path / "sweep"))
    with caplog.at_level("INFO", logger="app.gui.sweep_dialog"):
        assert dialog.start()
        qtbot.waitUntil(lambda: dialog.thread is None, timeout=120_000)
    assert not shown_errors, shown_errors
    assert any(r.getMessage().startswith("sweep of 12 points: expected: ") for r in caplog.records)
    assert len(dialog.rows) == 12 and all(r["status"] == "ok" for r in dialog.rows)
    assert dialog.progress.value() == 12
    assert dialog.view.metric_box.currentText().startswith("mean_X")
    assert (tmp_path / "sweep" / "sweep.csv").exists()
    assert len(dialog.view.plots.ci.items) >= 1                # the heat map of k x g
    name = next(r["name"] for r in dialog.rows if r["model.parameters.k"] == 20.0)
    dialog.open_point(name)
    assert ssa.current_config().model.parameters["k"] == 20.0


def test_sweep_dialog_reports_bad_input_and_stays_usable(ssa, window, qtbot, tmp_path, shown_errors):
    dialog = window.open_sweep()
    qtbot.addWidget(dialog)
    dialog.axes.cellWidget(0, 1).setText("ten")
    dialog.out_edit.setText(str(tmp_path / "s"))
    assert not dialog.start()
    assert shown_errors and "start and stop must be numbers" in shown_errors[-1][1]
    dialog.remove_axis()
    assert not dialog.start()
    assert "add at least one key" in shown_errors[-1][1]
    assert dialog.run_button.isEnabled()
