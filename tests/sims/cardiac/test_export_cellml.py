"""The cardiac model as run, out as CellML 2.0 (Myokit) and back in: the same single-cell trace."""

import numpy as np
import pytest

from app.sims.cardiac.export_cellml import annotated_names, write_cellml
from app.sims.common.config import ConfigError

from .helpers import run

MODEL = "hodgkin_huxley_squid_axon_model_1952_modified"
CHANGED = {"potassium_channel.g_K": 30.0, "leakage_current.g_L": 0.25}


def _cell(model_block: str):
    return run(f"model: {model_block}\nmesh: {{kind: single}}\n"
               "protocol: {t_end: 30, stimuli: [{start: 2, duration: 0.5, amplitude: -20, region: {kind: all}}]}\n"
               "solver: {method: bs32, dt: 0.01, at: 1.0e-6, rt: 1.0e-7, dt_max: 1.0, precision: float64}\n"
               "output: {random_probes: 0, probe_cells: [0], dt_save: 0.1}\n", "cpu-reference")[0]


def test_exported_model_imports_back_to_the_same_trace(tmp_path):
    """The run's parameter changes travel in the file: the re-imported model, run without
    them, gives the original run's probe trace (same engine, same steps) to 1e-9 mV; the
    changes matter (the trace without them differs by more than 1 mV)."""
    out = write_cellml(MODEL, CHANGED, tmp_path / "hh.cellml")
    assert b"http://www.cellml.org/cellml/2.0#" in out.read_bytes()
    names = annotated_names(MODEL)
    original = _cell(f"{{file: {MODEL}, parameters: {{{', '.join(f'{k}: {v}' for k, v in CHANGED.items())}}}}}")
    back = _cell(f"{{file: {out}, voltage: {names['membrane_voltage']}, "
                 f"stimulus: {names['membrane_stimulus_current']}}}")
    plain = _cell(f"{{file: {MODEL}}}")
    v0, v1 = original["probe_V"], back["probe_V"]
    assert v0.shape == v1.shape and np.ptp(v0) > 50           # an action potential
    np.testing.assert_array_equal(back["probe_t"], original["probe_t"])
    assert np.abs(v1 - v0).max() <= 1e-9
    unchanged = np.interp(original["probe_t"], plain["probe_t"], plain["probe_V"][:, 0])
    assert np.abs(unchanged - v0[:, 0]).max() > 1.0


def test_exported_model_is_valid_cellml_2_for_libcellml(tmp_path):
    """libCellML (the CellML project's library): strict 2.0 parse, validator and analyser."""
    libcellml = pytest.importorskip("libcellml")
    out = write_cellml(MODEL, CHANGED, tmp_path / "hh.cellml")
    parser = libcellml.Parser(True)
    model = parser.parseModel(out.read_text())
    checks = [parser, libcellml.Validator(), libcellml.Analyser()]
    checks[1].validateModel(model)
    checks[2].analyseModel(model)
    issues = [c.issue(i).description() for c in checks for i in range(c.issueCount())]
    assert not issues, issues


def test_a_parameter_that_is_not_a_constant_is_refused_by_name(tmp_path):
    with pytest.raises(ConfigError, match="membrane.V is not a constant"):
        write_cellml(MODEL, {"membrane.V": 1.0}, tmp_path / "x.cellml")
    with pytest.raises(ConfigError, match="nope.x is not a variable"):
        write_cellml(MODEL, {"nope.x": 1.0}, tmp_path / "x.cellml")
