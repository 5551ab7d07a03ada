"""Help › Documentation: the offline HTML is found where it is built or shipped and opened as a
local file; where it is missing, the message says how to build it."""

from __future__ import annotations

import pytest

pytest.importorskip("PySide6", reason="the GUI extra is not installed")

from app.gui import help as help_text
from app.gui import main_window
from app.gui.main_window import MainWindow


class _Window:
    """What ``MainWindow.open_documentation`` uses of the window: its message box."""

    def __init__(self):
        self.messages: list[tuple[str, str]] = []

    def _message(self, title: str, html: str):
        self.messages.append((title, html))
        return html


def _opened(monkeypatch, result: bool = True) -> list:
    urls: list = []

    def open_url(url):
        urls.append(url)
        return result

    monkeypatch.setattr(main_window.QDesktopServices, "openUrl", staticmethod(open_url))
    return urls


def test_the_folder_named_by_the_environment_comes_first(tmp_path, monkeypatch):
    (tmp_path / "index.html").write_text("<html></html>")
    monkeypatch.setenv(help_text.DOCS_ENV, str(tmp_path))
    assert help_text.docs_candidates()[0] == tmp_path / "index.html"
    assert help_text.docs_index() == tmp_path / "index.html"


def test_packaged_copy_then_checkout_build(monkeypatch):
    monkeypatch.delenv(help_text.DOCS_ENV, raising=False)
    packaged, checkout = help_text.docs_candidates()
    assert packaged.parts[-3:] == ("_data", "docs", "index.html")
    assert checkout.parts[-4:] == ("docs", "_build", "html", "index.html")


def test_help_opens_the_built_html_as_a_local_file(tmp_path, monkeypatch):
    (tmp_path / "index.html").write_text("<html></html>")
    monkeypatch.setenv(help_text.DOCS_ENV, str(tmp_path))
    urls = _opened(monkeypatch)
    window = _Window()
    assert MainWindow.open_documentation(window) is None
    assert len(urls) == 1 and urls[0].isLocalFile()
    assert urls[0].toLocalFile() == str(tmp_path / "index.html")
    assert window.messages == []


def test_missing_documentation_says_how_to_build_it(tmp_path, monkeypatch):
    monkeypatch.setattr(help_text, "docs_candidates", lambda: [tmp_path / "none" / "index.html"])
    urls = _opened(monkeypatch)
    window = _Window()
    MainWindow.open_documentation(window)
    assert urls == []
    (title, html), = window.messages
    assert "make docs" in html and str(tmp_path / "none" / "index.html") in html


def test_no_browser_names_the_file(tmp_path, monkeypatch):
    (tmp_path / "index.html").write_text("<html></html>")
    monkeypatch.setenv(help_text.DOCS_ENV, str(tmp_path))
    _opened(monkeypatch, result=False)
    window = _Window()
    MainWindow.open_documentation(window)
    (title, html), = window.messages
    assert str(tmp_path / "index.html") in html
