"""Desktop conventions: the title says what is loaded, a previous model's results are marked
stale, the models are drawn at rest, recent files, dropped files, vector figures, plain error
messages, tooltips on the form fields, actions enabled only where they apply."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("PySide6", reason="the GUI extra is not installed")
from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDropEvent

from app.gui import errors
from app.gui.main_window import MainWindow
from app.gui.panels import Panel
from app.sims.common.simulation import DOMAINS, PRESETS

pytestmark = pytest.mark.gui

SCHLOGL = PRESETS / "ssa" / "lesson-schlogl-bistable.yaml"
BIRTH_DEATH = PRESETS / "ssa" / "birth-death.yaml"


def test_title_follows_the_panel_and_what_it_holds(window):
    assert window.windowTitle() == f"BioGPU Studio — {DOMAINS['ssa'].label} — 00-decay-dimerization.yaml"
    window.select_panel("cardiac")
    assert window.windowTitle().startswith(f"BioGPU Studio — {DOMAINS['cardiac'].label} — ")
    assert "00-decay-dimerization" not in window.windowTitle()
    ssa = window.select_panel("ssa")
    ssa.load_config(SCHLOGL)                          # loaded from the panel, not the File menu
    assert window.windowTitle().endswith("— lesson-schlogl-bistable.yaml")
    window.pages["channel"].load_config(PRESETS / "channel" / "00-model-b-surrogate.yaml")
    assert window.windowTitle().endswith("— lesson-schlogl-bistable.yaml")   # another panel's


def test_cellml_file_replaces_the_preset_name_and_description(window):
    cardiac = window.select_panel("cardiac")
    cardiac.load_config(PRESETS / "cardiac" / "lesson-spiral-by-hand.yaml")
    model = next(p for p in (PRESETS.parent / "models" / "cardiac").glob("beeler*.cellml"))
    assert window.open_file(model)
    assert cardiac.preset_combo.currentText() == f"CellML: {model.name}"
    assert model.name in cardiac.description.text()
    assert "lesson" not in cardiac.description.text().lower()
    assert window.windowTitle().endswith(model.name)
    assert cardiac.model_group.picker.currentText() == model.stem      # the shipped entry
    assert model.stem in window.show_method("cardiac").text()              # the method page names it


def test_reopened_session_shows_what_is_loaded_in_the_preset_box(window, tmp_path, qtbot):
    ssa = window.select_panel("ssa")
    ssa.load_config(SCHLOGL)
    path = tmp_path / "work.biogpu"
    assert window.save_session(path, include_results=False)
    other = MainWindow()
    qtbot.addWidget(other)
    assert other.open_session(path)
    combo = other.pages["ssa"].preset_combo
    box = combo.currentText()
    assert box.startswith("session: ") and "00-decay" not in box
    assert ssa.base_cfg.name in combo.itemData(combo.currentIndex(), Qt.ItemDataRole.ToolTipRole)
    other.select_panel("ssa")
    assert path.name in other.windowTitle()
    other.close()


def test_results_of_a_previous_model_are_marked_stale(ssa, qtbot, set_ensemble, run_to_end):
    ssa.load_config(BIRTH_DEATH)
    set_ensemble(ssa, realizations=16, t_end=0.5, samples=3)
    assert ssa.stale_label.isHidden()
    run_to_end(ssa)
    assert ssa.stale_label.isHidden()
    ssa.load_config(SCHLOGL)
    assert not ssa.stale_label.isHidden() and "previous model" in ssa.stale_label.text()
    ssa.reset()
    assert ssa.stale_label.isHidden()


@pytest.mark.parametrize("name", ["cardiac", "network", "epidermis"])
def test_models_are_drawn_at_rest(window, qtbot, name):
    panel = window.select_panel(name)
    assert not panel._rest_pending                   # asked for when the panel was shown
    qtbot.waitUntil(lambda: not panel._previews, timeout=60000)      # the thread has finished
    assert panel.last_frame is None                   # a picture, not a result to export
    if name == "cardiac":
        assert panel.tissue.V is not None and panel.tissue.image.image is not None
    elif name == "network":
        assert panel.culture._frame is not None and len(panel.culture.circles.data) > 0
    else:
        assert panel.tissue.frame is not None and panel.tissue.frame.positions is not None
        qtbot.waitUntil(lambda: panel.tissue.visible_count > 0, timeout=5000)


def test_recent_files_are_remembered_across_starts(window, qtbot):
    assert window.open_file(BIRTH_DEATH)
    assert window.open_file(SCHLOGL)
    assert window.recent_files()[:2] == [str(SCHLOGL.resolve()), str(BIRTH_DEATH.resolve())]
    later = MainWindow()
    qtbot.addWidget(later)
    later._fill_recent_menu()
    texts = [a.text() for a in later.recent_menu.actions()]
    assert texts[0].endswith(SCHLOGL.name) and texts[1].endswith(BIRTH_DEATH.name)
    later.recent_menu.actions()[1].trigger()
    assert later.pages["ssa"].config_path == BIRTH_DEATH
    later.close()


def _drop(window, path: Path) -> None:
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(path))])
    event = QDropEvent(QPointF(10, 10), Qt.DropAction.CopyAction, mime, Qt.MouseButton.NoButton,
                       Qt.KeyboardModifier.NoModifier)
    window.dropEvent(event)


def test_dropped_files_open_in_their_panel(window, shown_errors, tmp_path):
    assert window.acceptDrops()
    _drop(window, PRESETS / "network" / "00-development-10x10-fast.yaml")
    assert window.current_panel_name() == "network"
    model = next((PRESETS.parent / "models" / "cardiac").glob("noble*.cellml"))
    _drop(window, model)
    assert window.current_panel_name() == "cardiac"
    assert window.pages["cardiac"].model_group.picker.currentText() == model.stem
    abf = tmp_path / "cell.abf"
    abf.write_bytes(b"ABF2")
    _drop(window, abf)
    channel = window.pages["channel"]
    assert window.current_panel_name() == "channel"
    assert channel.data_source.currentData() == "abf" and channel.data_path.text() == str(abf)
    omex = tmp_path / "model.omex"
    omex.write_bytes(b"PK")
    before = len(shown_errors)
    _drop(window, omex)
    if "omex" not in window.pages["ssa"].open_filter:     # this version refuses it, clearly
        assert len(shown_errors) == before + 1 and "COMBINE" in shown_errors[-1][1]
    odd = tmp_path / "notes.docx"
    odd.write_bytes(b"x")
    _drop(window, odd)
    assert "notes.docx" in shown_errors[-1][1] and ".cellml" in shown_errors[-1][1]


@pytest.mark.parametrize("suffix, magic", [(".svg", b"<svg"), (".pdf", b"%PDF"), (".png", b"\x89PNG")])
def test_figures_as_svg_pdf_and_png(window, tmp_path, suffix, magic):
    path = tmp_path / f"figure{suffix}"
    assert window.save_screenshot(path)
    data = path.read_bytes()
    assert magic in data[:400] and len(data) > 1000


def test_error_messages_are_plain_sentences(window, shown_errors, tmp_path):
    errors.report_exception(window, "Cannot export data", RuntimeError("nothing to export yet"))
    assert shown_errors[-1][1:] == ("nothing to export yet", "")
    missing = tmp_path / "gone" / "x.csv"
    try:
        open(missing)
    except OSError as exc:
        errors.report_exception(window, "Cannot open", exc)
    assert shown_errors[-1][1] == f"{missing}: No such file or directory"
    errors.report_exception(window, "Cannot do it", KeyError("k"))           # a bug: details kept
    title, text, detail = shown_errors[-1]
    assert "KeyError" not in text and "Traceback" not in text and "KeyError" in detail


def test_export_movie_only_where_a_movie_is_recorded(window):
    for name, page in window.pages.items():
        window.select_panel(name)
        assert window.movie_action.isEnabled() == (isinstance(page, Panel) and page.supports_movie()), name
    window.select_panel("ssa")
    assert not window.movie_action.isEnabled()


def test_form_fields_and_their_labels_carry_the_spec_tooltips(window):
    from PySide6.QtWidgets import QFormLayout

    for name in ("ssa", "network", "epidermis"):
        page = window.pages[name]
        form = page.form
        for path, widget in form.widgets.items():
            spec = form.specs[path]
            if not spec.doc:
                continue
            assert widget.toolTip(), (name, path)
            layout = widget.parentWidget().layout()
            if isinstance(layout, QFormLayout) and layout.labelForField(widget) is not None:
                assert layout.labelForField(widget).toolTip() == widget.toolTip(), (name, path)


def test_cmaes_hides_the_ga_only_settings(window):
    channel = window.select_panel("channel")
    optimizer = channel.fit_form["optimizer"]
    optimizer.setCurrentText("cmaes")
    for name in channel.GA_ONLY:
        assert channel.ga_form[name].isHidden(), name
    assert "CMA-ES" in channel.ga_box.title() and channel.ga_note.isHidden()
    assert not channel.fit_form["sigma"].isHidden()
    optimizer.setCurrentText("ga")
    assert not any(channel.ga_form[name].isHidden() for name in channel.GA_ONLY)
    assert channel.ga_box.title() == "Genetic algorithm" and channel.fit_form["sigma"].isHidden()


def test_cardiac_method_page_names_the_loaded_model(window):
    cardiac = window.pages["cardiac"]
    text = window.show_method("cardiac").text()
    assert cardiac.model_group.picker.currentText() in text
    assert "any CellML model" in text


def test_a_recorded_network_run_draws_every_epoch(window, qtbot):
    """A movie records what is drawn: with recording on, no epoch's frame is dropped (a
    60-epoch movie held 8 frames)."""
    network = window.select_panel("network")
    network.backend.setCurrentIndex(network.backend.findData("cpu-reference"))
    network.width_box.setValue(5)
    network.height_box.setValue(5)
    network.epochs.setValue(12)
    network.epoch_seconds.setValue(0.2)
    network.slice_seconds.setValue(0.05)
    network.checkpoint.setText("")
    network.record_next_movie = True          # the movie itself needs ffmpeg; its frames do not
    epochs: list[int] = []
    network.start_run()
    network.worker.frame_ready.connect(lambda f: epochs.append(f.epoch) if f.epoch_boundary else None)
    with qtbot.waitSignal(network.worker.run_finished, timeout=60000):
        pass
    assert sorted(set(epochs)) == list(range(1, 13)) and epochs == sorted(epochs)


def test_a_long_sbml_path_does_not_widen_the_controls(ssa, tmp_path, qtbot):
    pytest.importorskip("libsbml")
    source = Path(__file__).parents[1] / "sims" / "ssa" / "data" / "hill-events.xml"
    deep = tmp_path.joinpath(*["a-rather-long-folder-name-for-a-model"] * 4)
    deep.mkdir(parents=True)
    long = deep / ("a-model-file-with-a-very-long-descriptive-name-" * 2 + "v2.xml")
    long.write_text(source.read_text())
    before = ssa.controls_width()
    ssa.load_config(long)
    assert ssa.controls_width() <= before + 2
    assert ssa.description.toolTip() == str(long.resolve()) or str(long) in ssa.description.toolTip()
    assert ssa.preset_combo.itemData(ssa.preset_combo.currentIndex(),
                                     Qt.ItemDataRole.ToolTipRole) == str(long.resolve())
    assert "…" in ssa.preset_combo.currentText()


def test_corner_plot_tick_values_do_not_overlap(qtbot, tmp_path):
    import numpy as np
    from PySide6.QtGui import QFontMetrics

    from app.gui.views.intervals import CornerPlot

    corner = CornerPlot()
    qtbot.addWidget(corner)
    corner.resize(420, 420)
    best = np.array([1.234e-3, 0.5, 12.0, 300.0])
    samples = best + np.random.default_rng(1).standard_normal((2000, 4)) * best * 0.05
    corner.show_samples(["gmax", "k1", "k2", "k3"], samples)
    corner.show()
    qtbot.waitExposed(corner)
    for (i, j), cell in corner.panels.items():
        if i != 3:
            continue
        axis = cell.axes["bottom"]
        lo, hi = cell.vb.viewRange()[0]
        width = axis.geometry().width()
        levels = axis.tickValues(lo, hi, width)
        values = [v for _, vs in levels for v in vs if lo <= v <= hi]
        assert values, j                                               # at least one value shown
        metrics = QFontMetrics(axis.style.get("tickFont") or axis.font())
        texts = axis.tickStrings(values, 1.0, 1.0)
        xs = [(v - lo) / (hi - lo) * width for v in values]
        for k in range(len(values) - 1):
            room = xs[k + 1] - xs[k]
            need = (metrics.horizontalAdvance(texts[k]) + metrics.horizontalAdvance(texts[k + 1])) / 2
            assert room > need, (j, texts)
    from app.gui.export import save_figure                           # a graphics view alone, too
    assert save_figure(corner, tmp_path / "corner.svg").read_bytes().count(b"<path") > 10


def test_colour_bar_title_clears_its_tick_values(qtbot):
    from PySide6.QtGui import QFontMetrics

    from app.gui.views.cardiac import ColourBar

    bar = ColourBar()
    qtbot.addWidget(bar)
    bar.set_range(0.0, 2500.0, "last activation (ms)")
    bar.show()
    qtbot.waitExposed(bar)
    axis = bar.bar.axis
    metrics = QFontMetrics(axis.style.get("tickFont") or axis.font())
    needed = metrics.horizontalAdvance("2500") + abs(axis.style["tickLength"]) + metrics.height()
    qtbot.waitUntil(lambda: axis.width() >= needed, timeout=3000)       # laid out
    assert bar.width() >= axis.width() + 14


def test_sweep_plots_write_values_in_full(qtbot):
    from app.gui.views.sweep import SweepView

    view = SweepView()
    qtbot.addWidget(view)
    rows = [{"name": f"p{i}", "point": i, "status": "ok", "model.parameters.g": 0.001 * (i + 1),
             "mean_X": float(i)} for i in range(5)]
    for keys in (["model.parameters.g"],):
        view.set_rows(rows, keys)
        plot = view.plots.getItem(0, 0)
        for name in ("bottom", "left"):
            axis = plot.getAxis(name)
            assert not axis.autoSIPrefix and "x0.001" not in axis.labelString()


def test_sweep_dialog_columns_fit_their_widgets(window, qtbot):
    pytest.importorskip("distributed", reason="the sweep extra is not installed")
    window.select_panel("ssa").load_config(BIRTH_DEATH)
    dialog = window.open_sweep()
    qtbot.addWidget(dialog)
    dialog.add_axis()
    header = dialog.axes.horizontalHeader()
    for col in range(1, dialog.axes.columnCount()):
        for row in range(dialog.axes.rowCount()):
            assert header.sectionSize(col) >= dialog.axes.cellWidget(row, col).sizeHint().width(), col
        assert header.sectionSize(col) >= header.sectionSizeHint(col)
    assert dialog.axes.minimumWidth() >= sum(header.sectionSize(c) for c in range(1, 5))
    dialog.close()
