"""Starting the GUI: without a display it says what to do and exits 2, never a Qt abort."""

import pytest

pytest.importorskip("PySide6", reason="the GUI extra is not installed")


def test_no_display_is_a_message_not_an_abort(monkeypatch, capsys):
    from app.cli import main

    for name in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr("sys.platform", "linux")
    assert main(["gui"]) == 2
    err = capsys.readouterr().err
    assert "no display" in err and "xvfb-run -a biogpu" in err and "biogpu run" in err
