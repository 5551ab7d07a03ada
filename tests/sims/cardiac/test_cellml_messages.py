"""CellML files the importer cannot use get a message naming the file and what is wrong: a
constant that evaluates to a division by zero (was Myokit's raw operand dump), a model with
no gating variable (was "need at least one array to stack")."""

from __future__ import annotations

import pytest

pytest.importorskip("myokit")

from app.sims.cardiac.cellml import CellMLImportError, import_cellml  # noqa: E402

TEMPLATE = '''<?xml version="1.0" encoding="UTF-8"?>
<model xmlns="http://www.cellml.org/cellml/1.0#" xmlns:cellml="http://www.cellml.org/cellml/1.0#" name="tiny">
  <units name="ms"><unit prefix="milli" units="second"/></units>
  <units name="mV"><unit prefix="milli" units="volt"/></units>
  <units name="per_ms"><unit prefix="milli" units="second" exponent="-1"/></units>
  <units name="mV_per_ms"><unit units="mV"/><unit units="ms" exponent="-1"/></units>
  <component name="membrane">
    <variable name="time" units="ms"/>
    <variable name="V" units="mV" initial_value="-80"/>
    <variable name="k" units="per_ms"/>
    <variable name="i_stim" units="mV_per_ms" initial_value="0"/>
    <math xmlns="http://www.w3.org/1998/Math/MathML">
      <apply><eq/><ci>k</ci>{k}</apply>
      <apply><eq/><apply><diff/><bvar><ci>time</ci></bvar><ci>V</ci></apply>
        <apply><minus/><apply><times/><apply><minus/><ci>k</ci></apply><apply><plus/><ci>V</ci>
        <cn cellml:units="mV">80</cn></apply></apply><ci>i_stim</ci></apply></apply>
    </math>
  </component>
</model>'''

DIVIDE = '<apply><divide/><cn cellml:units="per_ms">{a}</cn><cn cellml:units="dimensionless">{b}</cn></apply>'


@pytest.mark.parametrize("a,b", [(1, 0), (0, 0), (-3, 0)])
def test_constant_divided_by_zero_is_named(tmp_path, a, b):
    path = tmp_path / "zero.cellml"
    path.write_text(TEMPLATE.format(k=DIVIDE.format(a=a, b=b)))
    with pytest.raises(CellMLImportError) as info:
        import_cellml(path, voltage="membrane.V")
    text = str(info.value)
    assert str(path) in text and "membrane.k" in text and "not a finite number" in text
    assert "Encountered when evaluating" not in text


def test_one_state_without_gates_is_named(tmp_path):
    path = tmp_path / "one.cellml"
    path.write_text(TEMPLATE.format(k='<cn cellml:units="per_ms">0.1</cn>'))
    with pytest.raises(CellMLImportError, match=r"no gating variable among its 1 state\(s\) \(membrane.V\)") as info:
        import_cellml(path, voltage="membrane.V")
    assert str(path) in str(info.value) and "stack" not in str(info.value)


def test_cli_exits_2_naming_the_file(tmp_path, capsys):
    from app.cli import main

    model = tmp_path / "zero.cellml"
    model.write_text(TEMPLATE.format(k=DIVIDE.format(a=1, b=0)))
    cfg = tmp_path / "run.yaml"
    cfg.write_text(f"domain: cardiac\nmesh: {{kind: single}}\nmodel: {{file: {model}, voltage: membrane.V}}\n"
                   "protocol: {t_end: 10, stimuli: []}\n")
    assert main(["run", str(cfg), "--backend", "cpu-reference", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert str(model) in err and "membrane.k" in err
