"""SBML sizes and shapes that crashed or stalled libsbml or the code generators are refused
before libsbml parses the file: function definitions that call themselves (directly or through
a cycle of any length), math nested deeper than the limit (100,000 levels crashed), more
reactions than the limit (5,000 took a minute of code generation and ended in MemoryError),
files above the size limit, pipes. Each message names the file and the limit; legitimate
shapes just under the limits still import."""

from __future__ import annotations

import os
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.sims.common.config import ConfigError
from app.sims.ssa import sbml as sbml_module
from app.sims.ssa.sbml import MAX_REACTIONS, MAX_XML_DEPTH, prescan

libsbml = pytest.importorskip("libsbml")

from tests.sims.ssa.test_sbml import MATH, law, sbml  # noqa: E402


def functions(defs: dict[str, str]) -> str:
    """<listOfFunctionDefinitions> where each function of one argument x has body ``defs[f]``."""
    items = "".join(f'<functionDefinition id="{f}"><math {MATH}><lambda><bvar><ci>x</ci></bvar>{body}'
                    "</lambda></math></functionDefinition>" for f, body in defs.items())
    return f"<listOfFunctionDefinitions>{items}</listOfFunctionDefinitions>"


def with_functions(defs: dict[str, str], law_body: str) -> str:
    return sbml(reactions=law("r1", law_body)).replace("<listOfCompartments>",
                                                       functions(defs) + "<listOfCompartments>")


def call(f: str, arg: str = "<ci>x</ci>") -> str:
    return f"<apply><ci>{f}</ci>{arg}</apply>"


@settings(derandomize=True, max_examples=40, deadline=None)
@given(length=st.integers(1, 12), extra=st.integers(0, 4), entry=st.integers(0, 11))
def test_generated_function_cycles_are_refused(length, extra, entry):
    """f0 -> f1 -> ... -> f(length-1) -> f0, plus functions outside the cycle."""
    defs = {f"f{k}": call(f"f{(k + 1) % length}") for k in range(length)}
    defs.update({f"g{k}": "<apply><times/><ci>x</ci><cn>2</cn></apply>" for k in range(extra)})
    text = with_functions(defs, call(f"f{entry % length}", "<ci>X</ci>"))
    with pytest.raises(ConfigError, match=r"functionDefinition f\d+ calls itself") as info:
        prescan(text.encode(), "cycle.xml")
    assert "cycle.xml" in str(info.value)


@pytest.mark.parametrize("length", [1, 2, 5])
def test_function_cycle_through_the_reader(tmp_path, length):
    defs = {f"f{k}": call(f"f{(k + 1) % length}") for k in range(length)}
    path = tmp_path / "rec.xml"
    path.write_text(with_functions(defs, call("f0", "<ci>X</ci>")))
    with pytest.raises(ConfigError, match="calls itself") as info:
        sbml_module.read_sbml(path)
    assert str(path) in str(info.value)


@settings(derandomize=True, max_examples=20, deadline=None)
@given(length=st.integers(1, 8))
def test_function_chains_without_cycle_import(length):
    """f0 -> f1 -> ... -> f(length-1) -> x * 0.5: expanded and imported as mass action."""
    defs = {f"f{k}": call(f"f{k + 1}") for k in range(length - 1)}
    defs[f"f{length - 1}"] = "<apply><times/><ci>x</ci><cn>0.5</cn></apply>"
    model = sbml_module.read_sbml_string(with_functions(defs, call("f0", "<ci>X</ci>")))
    assert not model.refused and model.network.rates.tolist() == [0.5]


def nested(depth: int) -> str:
    return "<apply><abs/>" * depth + "<ci>X</ci>" + "</apply>" * depth


@pytest.mark.parametrize("depth", [MAX_XML_DEPTH, 1000, 100_000])
def test_deep_math_is_refused_before_libsbml(tmp_path, depth):
    path = tmp_path / "deep.xml"
    path.write_text(sbml(reactions=law("r1", nested(depth))))
    start = time.perf_counter()
    with pytest.raises(ConfigError, match=f"nested more than {MAX_XML_DEPTH}") as info:
        sbml_module.read_sbml(path)
    assert time.perf_counter() - start < 10 and str(path) in str(info.value) and info.value.line


@settings(derandomize=True, max_examples=30, deadline=None)
@given(depth=st.integers(0, 400))
def test_generated_depths(depth):
    text = sbml(reactions=law("r1", f"<apply><times/><cn>0.5</cn>{nested(depth)}</apply>"))
    too_deep = depth + 8 > MAX_XML_DEPTH          # the model around the math is 8 elements deep
    try:
        prescan(text.encode(), "d.xml")
    except ConfigError as exc:
        assert too_deep and "nested more than" in str(exc)
    else:
        assert depth + 7 <= MAX_XML_DEPTH


@pytest.mark.parametrize("n", [MAX_REACTIONS + 1, 5000])
def test_too_many_reactions_are_refused_at_once(tmp_path, n):
    reactions = "".join(law(f"r{i}", "<apply><times/><cn>0.1</cn><ci>X</ci></apply>") for i in range(n))
    path = tmp_path / "big.xml"
    path.write_text(sbml(reactions=reactions))
    start = time.perf_counter()
    with pytest.raises(ConfigError, match=f"more than {MAX_REACTIONS:,} reactions"):
        sbml_module.read_sbml(path)
    assert time.perf_counter() - start < 10


def test_file_size_limit_and_pipes(tmp_path, monkeypatch):
    big = tmp_path / "big.xml"
    with open(big, "wb") as fh:                       # sparse: no disk used
        fh.truncate(sbml_module.MAX_SBML_BYTES + 1)
    with pytest.raises(ConfigError, match="the limit is") as info:
        sbml_module.read_sbml(big)
    assert str(big) in str(info.value)
    fifo = tmp_path / "pipe.xml"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="not a regular file"):
        sbml_module.read_sbml(fifo)


@pytest.mark.parametrize("text,words", [
    ("<sbml><model>", "not well-formed"),
    ("<?xml version='1.0'?><!DOCTYPE a [<!ENTITY b 'c'>]><a>&b;&b;", "not well-formed"),
])
def test_malformed_xml_names_the_line(text, words):
    with pytest.raises(ConfigError, match=words) as info:
        prescan(text.encode(), "bad.xml")
    assert "bad.xml" in str(info.value)


def test_cli_exit_2_for_each_reproducer(tmp_path, capsys):
    from app.cli import main

    cases = {"rec.xml": with_functions({"f": call("f")}, call("f", "<ci>X</ci>")),
             "deep.xml": sbml(reactions=law("r1", nested(100_000)))}
    for name, text in cases.items():
        path = tmp_path / name
        path.write_text(text)
        assert main(["run", str(path), "--backend", "cpu-reference", "--out", str(tmp_path / "o")]) == 2
        assert str(path) in capsys.readouterr().err
