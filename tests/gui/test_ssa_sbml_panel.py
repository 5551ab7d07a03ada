"""The SSA panel with SBML files: open one (imported rows), see refusals in red, run it, export
a YAML network as SBML and read it back."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("PySide6", reason="the GUI extra is not installed")
pytest.importorskip("libsbml")

pytestmark = pytest.mark.gui

DATA = Path(__file__).parents[1] / "sims" / "ssa" / "data"


def rows(panel) -> list[tuple[str, str, str]]:
    t = panel.table
    return [tuple(t.item(i, c).text() for c in range(3)) for i in range(t.rowCount())]


def test_open_sbml_shows_imported_elements_and_runs(ssa, qtbot, set_ensemble, run_to_end):
    ssa.load_config(DATA / "hill-events.xml")
    shown = rows(ssa)
    assert ("imported", "reaction make", "general law vmax * P^2 / (K^2 + P^2)") in shown
    assert any(r[1] == "event kick" for r in shown)
    assert "SBML" in ssa.open_filter and ".xml" in ssa.open_filter
    set_ensemble(ssa, realizations=32, t_end=3.0, samples=4)
    run_to_end(ssa)
    assert ssa.last_frame.done and ssa.last_frame.mean.shape == (4, 2)


def test_refused_elements_are_listed_in_red(ssa, tmp_path, shown_errors):
    from tests.sims.ssa.test_sbml import MATH, sbml

    bad = tmp_path / "rate-rule.xml"
    bad.write_text(sbml(extra=f'<listOfRules><rateRule variable="X"><math {MATH}><cn>1</cn></math>'
                              f'</rateRule></listOfRules>'))
    ssa.attempt("Cannot open the run config", ssa.load_config, str(bad))
    refused = [r for r in rows(ssa) if r[0] == "REFUSED"]
    assert refused and refused[0][1] == "rateRule X" and "continuously" in refused[0][2]
    assert shown_errors and "rateRule 'X'" in str(shown_errors[-1])


def test_export_sbml_round_trip(ssa, tmp_path):
    from app.sims.ssa.sbml import read_sbml

    out = ssa.export_sbml(tmp_path / "dimer.xml")
    net = read_sbml(out).require_network()
    assert net.n_reactions == ssa.current_config().network().n_reactions


def test_tau_leap_from_the_panel(ssa, set_ensemble, run_to_end):
    """The dimer preset with algorithm tau-leap and eps 0.05 chosen in the form runs to the end."""
    ssa.algorithm.setCurrentText("tau-leap")
    ssa.epsilon.setValue(0.05)
    cfg = ssa.current_config()
    assert cfg.ensemble.algorithm == "tau-leap" and cfg.ensemble.epsilon == 0.05
    set_ensemble(ssa, realizations=32, t_end=1.0, samples=3)
    run_to_end(ssa, 60000)
    assert ssa.last_frame.done and ssa.last_frame.mean[-1, 0] < 100000
