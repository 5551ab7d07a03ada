"""YAML aliases in the one loader the CLI and the GUI share: an alias back to a node that
contains it (``a: &x [*x]``, a merge key ``x: &m {<<: *m}``) is refused at once with the file
and line; aliases that only repeat a finished node still load. Named reproducers plus
generated documents (an anchor at a random depth, the alias at a random depth below it)."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.sims.common.config import ConfigError, load_yaml, parse_yaml

SELF_REFERENCES = [
    "name: &a [*a]",
    "x: &m {<<: *m}",
    "x: &m {a: 1, <<: *m}",
    "a: &x {b: [1, {c: *x}]}",
    "- &top [1, 2, *top]",
    "a: &x\n  b: &y\n    c: [*x]",
    "a: &x\n  b: &y\n    c: [*y]",
    "root: &r {left: {right: {up: *r}}}",
]


@pytest.mark.parametrize("text", SELF_REFERENCES)
def test_self_reference_is_refused_with_file_and_line(tmp_path, text):
    path = tmp_path / "loop.yaml"
    path.write_text(text + "\n")
    start = time.perf_counter()
    with pytest.raises(ConfigError, match="refers to the mapping or list that contains it") as info:
        load_yaml(path)
    assert time.perf_counter() - start < 2.0
    assert str(path) in str(info.value) and info.value.line is not None


def test_run_config_with_self_reference_exits_2(tmp_path, capsys):
    from app.cli import main

    path = tmp_path / "loop.yaml"
    path.write_text("domain: ssa\nmodel: &m {<<: *m}\n")
    assert main(["run", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "loop.yaml:2" in err and "contains it" in err
    assert not (tmp_path / "out").exists()


def _nest(depth: int, inner: str) -> str:
    text = inner
    for k in range(depth):
        text = f"{{k{k}: [{text}]}}"
    return text


@settings(derandomize=True, max_examples=60, deadline=None)
@given(above=st.integers(0, 6), below=st.integers(0, 6), siblings=st.integers(0, 3))
def test_generated_cycles_are_refused(above, below, siblings):
    """An anchor ``above`` levels down, its alias ``below`` levels under it: always a cycle."""
    inner = ", ".join(["1"] * siblings + ["*a"])
    doc = "top: " + _nest(above, "&a [" + _nest(below, inner) + "]")
    with pytest.raises(ConfigError, match="contains it"):
        parse_yaml(doc, "gen.yaml")


@settings(derandomize=True, max_examples=40, deadline=None)
@given(depth=st.integers(0, 6), uses=st.integers(1, 8))
def test_generated_reuse_without_cycle_loads(depth, uses):
    """Aliases to a node outside themselves expand normally (the legitimate use)."""
    doc = "base: &b " + _nest(depth, "7") + "\nuse: [" + ", ".join(["*b"] * uses) + "]\n"
    data = parse_yaml(doc, "ok.yaml").data
    assert data["use"] == [data["base"]] * uses
