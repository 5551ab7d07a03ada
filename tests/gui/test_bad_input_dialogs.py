"""The GUI's Open shows the CLI's messages for bad files in an error box, returns within
seconds, and leaves the window usable (the next good file opens)."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("PySide6", reason="the GUI extra is not installed")

from tests.sims.common.bad_inputs import ALIAS_BOMB  # noqa: E402

pytestmark = pytest.mark.gui

BAD_FILES = {
    "syntax.yaml": ("domain: ssa\nmodel: {species: [\n".encode(), "YAML syntax error"),
    "bomb.yaml": (ALIAS_BOMB.encode(), "more than 1,000,000 values"),
    "binary.yaml": (b"\x00\x01\x02\xff" * 256, "not UTF-8 text"),
    "nul.yaml": (b"\x00\x01\x02\x03" * 256, "binary file"),
    "latin1.yaml": ("domain: ssa\nname: caf\xe9\n".encode("latin-1"), "not UTF-8 text"),
    "tag.yaml": (b"domain: ssa\nname: !!python/name:os.system\n", "not a plain YAML value"),
    "domain.yaml": (b"domain: [ssa]\n", "unknown domain"),
    # alias cycles: the Open used to hang (the hardening report's GUI reproducers)
    "self-alias.yaml": (b"domain: ssa\nname: &a [*a]\n", "contains it"),
    "self-merge.yaml": (b"domain: ssa\nx: &m {<<: *m}\n", "contains it"),
}


@pytest.mark.timeout(60)
def test_open_shows_each_refusal_and_the_window_stays_usable(window, tmp_path, shown_errors):
    for name, (payload, _) in BAD_FILES.items():
        (tmp_path / name).write_bytes(payload)
    for name, (_, message) in BAD_FILES.items():
        start = time.perf_counter()
        assert not window.open_config(tmp_path / name)
        assert time.perf_counter() - start < 10, name
        title, text, detail = shown_errors[-1]
        assert message in text and name in text, (name, text)
        assert "Traceback" not in text + detail
    assert len(shown_errors) == len(BAD_FILES)
    assert window.isVisible()
    good = window.current_panel().config_path
    assert window.open_config(good)                  # still usable
    assert len(shown_errors) == len(BAD_FILES)


@pytest.mark.timeout(60)
def test_a_run_that_does_not_fit_is_refused_in_a_dialog(ssa, qtbot, monkeypatch, shown_errors,
                                                        set_ensemble):
    """The memory estimate is checked in the run's thread before anything is allocated: the
    refusal reaches the user and the panel can run again."""
    from app.gui.runner import RunState

    monkeypatch.setenv("BIOGPU_MEMORY_LIMIT", "64K")
    set_ensemble(ssa, realizations=100000)
    assert ssa.start_run()
    with qtbot.waitSignal(ssa.worker.failed, timeout=30000):
        pass
    title, text, detail = shown_errors[-1]
    assert "of host memory" in text and "64.0 KiB is available" in text and "Traceback" not in detail
    assert ssa.run_controls.state is RunState.FINISHED and ssa.run_controls.run_button.isEnabled()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("payload,message", [(b"", "the file is empty"),
                                             (b"\x00garbage" * 100, "not an NPZ (zip) file")])
def test_resuming_the_network_from_a_bad_checkpoint_shows_why(window, tmp_path, shown_errors,
                                                              payload, message):
    panel = window.select_panel("network")
    path = tmp_path / "ck.npz"
    path.write_bytes(payload)
    panel.attempt("Resume from a checkpoint", panel.resume_from, str(path))
    title, text, detail = shown_errors[-1]
    assert f"checkpoint {path}" in text and message in text and not detail
    assert panel.resume_path is None
