"""The README and the documentation pages: short README, no development history in product
docs, and the generated configuration and command-line references complete."""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
GENERATED = {DOCS / "reference" / "config.md", DOCS / "reference" / "cli.md"}
# Development history that belongs in CONTRIBUTING.md, not in what users read.
HISTORY = re.compile(r"\bissue[ -]#?\d+|\bstop \d+\b|\b\d{1,2}:\d{2}(?:[–-]\d{1,2}:\d{2})? UTC\b", re.I)


def product_pages() -> list[Path]:
    pages = [ROOT / "README.md"]
    pages += [p for p in DOCS.rglob("*.md") if "_build" not in p.parts and p not in GENERATED]
    return pages


def test_readme_is_a_short_front_page():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    for needed in ("make run", "make test", "make docs", "biogpu run", "<!-- bench-table:begin -->",
                   "<!-- bench-table:end -->", "docs/screenshots/"):
        assert needed in text, needed
    begin, end = text.index("<!-- bench-table:begin -->"), text.index("<!-- bench-table:end -->")
    assert begin < end and "|" in text[begin:end]


@pytest.mark.parametrize("page", product_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_development_history_in_product_docs(page):
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        match = HISTORY.search(line)
        assert match is None, f"{page.relative_to(ROOT)}:{number}: {match.group(0)!r} (history goes in CONTRIBUTING.md)"


@pytest.fixture(scope="module")
def reference():
    pytest.importorskip("PySide6", reason="the CLI reference reads app.gui.screenshots' parser")
    sys.path.insert(0, str(DOCS / "_ext"))
    try:
        import biogpu_reference
    finally:
        sys.path.remove(str(DOCS / "_ext"))
    return biogpu_reference


def test_config_reference_lists_every_domain_and_key(reference):
    from app.sims.common.registry import DOMAINS

    text = reference.config_reference()
    for name in DOMAINS:
        cls = DOMAINS[name].config_class
        assert f"`domain: {name}`" in text
        for f in dataclasses.fields(cls):
            assert f"| `{f.name}` |" in text, (name, f.name)
            if f.metadata.get("doc"):
                assert f.metadata["doc"] in text


def test_config_reference_shows_ranges_choices_and_nested_sections(reference):
    from app.sims.ssa.config import EnsembleSettings

    text = reference.config_reference()
    assert "### `ensemble`" in text
    realizations = next(f for f in dataclasses.fields(EnsembleSettings) if f.name == "realizations")
    lo, hi = realizations.metadata["range"]
    row = next(line for line in text.splitlines() if line.startswith("| `realizations` |"))
    assert f"{lo:g} to {hi:g}" in row and f"`{realizations.default}`" in row
    algorithm = next(line for line in text.splitlines() if line.startswith("| `algorithm` |"))
    assert "`direct`" in algorithm and "`tau-leap`" in algorithm


def test_cli_reference_lists_every_command_and_option(reference):
    import app.cli

    parser = reference.capture_parser("app.cli")
    text = reference.cli_reference()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    for name, sub in commands.choices.items():
        assert f"### `python -m app {name}`" in text, name
        for action in sub._actions:
            for option in action.option_strings:
                if option not in ("-h", "--help"):
                    assert f"`{option}`" in text, (name, option)
    assert "Exit codes" in text and app.cli.main is not None


def test_no_development_history_in_the_generated_references(reference):
    for name, text in (("config", reference.config_reference()), ("cli", reference.cli_reference())):
        match = HISTORY.search(text)
        assert match is None, f"reference/{name}.md: {match.group(0)!r} (from a docstring or help text)"
