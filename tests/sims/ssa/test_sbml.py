"""SBML import: what is read, what is refused (crafted files: element, id and reason), general
kinetic laws and events giving the same ensemble on the NumPy and compiled engines, and the CLI
running an .xml file."""

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("libsbml")

from app.sims.ssa.compiled import CompiledEnsemble  # noqa: E402
from app.sims.ssa.cpu import CpuEnsemble  # noqa: E402
from app.sims.ssa.sbml import read_sbml, read_sbml_string  # noqa: E402

DATA = Path(__file__).parent / "data"
MATH = 'xmlns="http://www.w3.org/1998/Math/MathML"'


def sbml(species: str = "", reactions: str = "", extra: str = "", parameters: str = "",
         compartment: str = '<compartment id="cell" size="1" constant="true"/>',
         namespaces: str = "") -> str:
    """A Level 3 v2 document from fragments."""
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<sbml xmlns="http://www.sbml.org/sbml/level3/version2/core" {namespaces} level="3" version="2">
  <model id="crafted" substanceUnits="item">
    <listOfCompartments>{compartment}</listOfCompartments>
    <listOfSpecies>{species or SPECIES_X}</listOfSpecies>
    {f'<listOfParameters>{parameters}</listOfParameters>' if parameters else ''}
    <listOfReactions>{reactions or DECAY}</listOfReactions>
    {extra}
  </model>
</sbml>"""


SPECIES_X = ('<species id="X" compartment="cell" initialAmount="50" hasOnlySubstanceUnits="true" '
             'boundaryCondition="false" constant="false"/>')
DECAY = (f'<reaction id="decay" reversible="false"><listOfReactants><speciesReference species="X" '
         f'stoichiometry="1" constant="true"/></listOfReactants><kineticLaw><math {MATH}><apply><times/>'
         f'<cn>0.5</cn><ci>X</ci></apply></math></kineticLaw></reaction>')


def law(rid: str, body: str, reversible: str = "false") -> str:
    return (f'<reaction id="{rid}" reversible="{reversible}"><listOfReactants><speciesReference '
            f'species="X" stoichiometry="1" constant="true"/></listOfReactants><kineticLaw><math {MATH}>'
            f'{body}</math></kineticLaw></reaction>')


def refused(text: str) -> list[tuple[str, str, str]]:
    model = read_sbml_string(text)
    assert model.network is None
    return [(r.element, r.id, r.detail) for r in model.refused]


def test_plain_model_imports_as_mass_action():
    model = read_sbml_string(sbml())
    assert not model.refused and model.network.laws is None
    assert model.network.rates.tolist() == [0.5] and model.network.x0.tolist() == [50]


@pytest.mark.parametrize("fragment,element,ident,words", [
    (dict(extra=f'<listOfRules><rateRule variable="X"><math {MATH}><cn>1</cn></math></rateRule></listOfRules>'),
     "rateRule", "X", "continuously"),
    (dict(extra=f'<listOfRules><algebraicRule><math {MATH}><ci>X</ci></math></algebraicRule></listOfRules>'),
     "algebraicRule", "#1", "DAE"),
    (dict(reactions=law("r1", "<apply><sin/><ci>X</ci></apply>")), "reaction", "r1", "'sin' is not supported"),
    (dict(reactions=law("r1", '<apply><times/><ci>X</ci><csymbol encoding="text" '
                              'definitionURL="http://www.sbml.org/sbml/symbols/time">t</csymbol></apply>')),
     "reaction", "r1", "reads time"),
    (dict(reactions=law("r1", '<apply><times/><ci>X</ci><apply><csymbol encoding="text" '
                              'definitionURL="http://www.sbml.org/sbml/symbols/delay">d</csymbol>'
                              '<ci>X</ci><cn>1</cn></apply></apply>')), "reaction", "r1", "not supported"),
    (dict(reactions=law("r1", "<apply><times/><cn>2</cn><ci>X</ci></apply>", reversible="true")),
     "reaction", "r1", "forward - backward"),
    (dict(species=SPECIES_X.replace('initialAmount="50"', 'initialAmount="2.5"')), "species", "X",
     "whole number"),
    (dict(species=SPECIES_X.replace('hasOnlySubstanceUnits="true"', 'substanceUnits="mole" '
                                    'hasOnlySubstanceUnits="true"')), "species", "X", "moles"),
    (dict(extra=f'<listOfEvents><event id="late" useValuesFromTriggerTime="true"><trigger initialValue="true" '
                f'persistent="true"><math {MATH}><apply><gt/><ci>X</ci><cn>3</cn></apply></math></trigger>'
                f'<delay><math {MATH}><cn>1</cn></math></delay><listOfEventAssignments><eventAssignment '
                f'variable="X"><math {MATH}><cn>0</cn></math></eventAssignment></listOfEventAssignments>'
                f'</event></listOfEvents>'), "event", "late", "delay"),
    (dict(parameters='<parameter id="k" value="1" constant="false"/>',
          reactions=law("r1", "<apply><times/><ci>k</ci><ci>X</ci></apply>"),
          extra=f'<listOfEvents><event id="bump" useValuesFromTriggerTime="true"><trigger initialValue="true" '
                f'persistent="true"><math {MATH}><apply><lt/><ci>X</ci><cn>3</cn></apply></math></trigger>'
                f'<listOfEventAssignments><eventAssignment variable="k"><math {MATH}><cn>2</cn></math>'
                f'</eventAssignment></listOfEventAssignments></event></listOfEvents>'),
     "eventAssignment", "k", "non-species"),
    (dict(compartment='<compartment id="cell" constant="true"/>',
          species=SPECIES_X.replace('hasOnlySubstanceUnits="true"', 'hasOnlySubstanceUnits="false"')),
     "reaction", "decay", "size of compartment 'cell'"),
    (dict(namespaces='xmlns:distrib="http://www.sbml.org/sbml/level3/version1/distrib/version1" '
                     'distrib:required="true"'), "package", "distrib", "packages"),
])
def test_refusals_name_element_id_and_reason(fragment, element, ident, words):
    found = refused(sbml(**fragment))
    assert any(e == element and i == ident and words in d for e, i, d in found), found


def test_concentration_species_and_local_parameters():
    species = SPECIES_X.replace('hasOnlySubstanceUnits="true"', 'hasOnlySubstanceUnits="false"')
    local = (f'<reaction id="decay" reversible="false"><listOfReactants><speciesReference species="X" '
             f'stoichiometry="1" constant="true"/></listOfReactants><kineticLaw><math {MATH}><apply>'
             f'<times/><ci>k</ci><ci>X</ci></apply></math><listOfLocalParameters><localParameter id="k" '
             f'value="3"/></listOfLocalParameters></kineticLaw></reaction>')
    net = read_sbml_string(sbml(species=species, reactions=local, parameters='<parameter id="k" value="100" constant="true"/>',
                                compartment='<compartment id="cell" size="4" constant="true"/>')).network
    assert net.rates.tolist() == [pytest.approx(0.75)]      # local k = 3, X read as amount / 4


def test_reversible_law_splits():
    body = "<apply><minus/><apply><times/><cn>2</cn><ci>X</ci></apply><cn>7</cn></apply>"
    net = read_sbml_string(sbml(reactions=law("r", body, reversible="true"))).network
    assert net.reaction_names == ("r_fwd", "r_rev")
    assert net.rates.tolist() == [2.0, 7.0] and net.change[:, 0].tolist() == [-1, 1]


def run(engine_class, net, times, realizations=4000, seed=3):
    engine = engine_class(net, realizations, seed, "direct", [0], 16)
    out = []
    for t in times:
        while not engine.advance(float(t), 1 << 20):
            pass
        out.append(engine.states())
    return np.array(out)


def test_general_law_and_events_same_on_numpy_and_compiled():
    """Hill-type production (a general law), a species event and a time event at t = 2.5: the
    two CPU engines share Philox streams and float64 arithmetic, so every count agrees."""
    model = read_sbml(DATA / "hill-events.xml")
    net = model.network
    assert net.laws[0] is not None and net.laws[1] is None and len(net.events) == 2
    times = [1.0, 2.5, 4.0]
    a, b = run(CpuEnsemble, net, times, 500), run(CompiledEnsemble, net, times, 500)
    assert np.array_equal(a, b)


def test_events_fire_as_sbml_says():
    """The time event adds 40 to P at exactly t = 2.5; the species event resets Q at 25."""
    net = read_sbml(DATA / "hill-events.xml").network
    before, at = run(CompiledEnsemble, net, [2.4999, 2.5], 2000)
    assert (at[:, 0] - before[:, 0]).min() >= 39        # all kicked at 2.5 (a reaction may be lost)
    assert run(CompiledEnsemble, net, [5.0], 2000)[0][:, 1].max() < 25


def test_general_law_mean_matches_the_master_equation():
    """Production a(P) = vmax P^2 / (K^2 + P^2) and decay d P without events: the ensemble mean
    at t = 1 agrees with the mean of the chemical master equation (solved on 0..400) within
    4 standard errors."""
    from dataclasses import replace
    from scipy.linalg import expm

    net = replace(read_sbml(DATA / "hill-events.xml").network, events=(), event_state0=())
    n = 400
    p = np.arange(n + 1, dtype=float)
    prod = net.propensities(np.stack([p, np.zeros_like(p)], axis=1))[:, 0]
    decay = 0.2 * p
    q = np.zeros((n + 1, n + 1))
    q[np.arange(n), np.arange(1, n + 1)] = prod[:-1]
    q[np.arange(1, n + 1), np.arange(n)] = decay[1:]
    q -= np.diag(q.sum(axis=1))
    start = np.zeros(n + 1)
    start[5] = 1.0
    law = start @ expm(q * 1.0)
    mean, sd = law @ p, np.sqrt(law @ p**2 - (law @ p) ** 2)
    got = run(CpuEnsemble, net, [1.0], 4000)[0][:, 0]
    assert abs(got.mean() - mean) < 4 * sd / np.sqrt(len(got))


def test_cli_runs_an_sbml_file(tmp_path):
    from app.cli import main

    out = tmp_path / "run"
    assert main(["run", str(DATA / "hill-events.xml"), "--backend", "cpu", "--no-png",
                 "--set", "ensemble.realizations=64", "--set", "ensemble.t_end=3", "--out", str(out)]) == 0
    assert (out / "results.npz").exists()


def test_cli_refuses_with_exit_2(tmp_path, capsys):
    from app.cli import main

    bad = tmp_path / "bad.xml"
    bad.write_text(sbml(extra=f'<listOfRules><rateRule variable="X"><math {MATH}><cn>1</cn></math>'
                              f'</rateRule></listOfRules>'))
    assert main(["run", str(bad), "--backend", "cpu", "--no-png", "--out", str(tmp_path / "o")]) == 2
    assert "rateRule 'X'" in capsys.readouterr().err


@pytest.mark.parametrize("preset", ["00-decay-dimerization", "schlogl", "toggle-switch", "lotka-volterra"])
def test_yaml_sbml_yaml_round_trip(preset, tmp_path):
    """YAML network -> SBML file -> import -> YAML spec compiles to the same network."""
    from app.sims.common.simulation import PRESETS, load_run_config
    from app.sims.ssa.model import compile_network
    from app.sims.ssa.sbml_export import export_sbml, network_spec

    _, cfg = load_run_config(PRESETS / "ssa" / f"{preset}.yaml")
    original = compile_network(cfg.model)
    path = export_sbml(cfg.model, tmp_path / "net.xml", preset)
    imported = read_sbml(path).require_network()
    again = compile_network(network_spec(imported))
    for net in (imported, again):
        assert net.species == original.species and net.laws is None
        assert np.array_equal(net.x0, original.x0)
        assert np.array_equal(net.reactant_order, original.reactant_order)
        assert np.array_equal(net.change, original.change)
        np.testing.assert_allclose(net.rates, original.rates, rtol=1e-15)


def test_export_refuses_general_networks(tmp_path):
    from app.sims.ssa.sbml_export import export_sbml

    with pytest.raises(ValueError, match="general kinetic laws"):
        export_sbml(read_sbml(DATA / "hill-events.xml").network, tmp_path / "x.xml")


def test_every_dsmts_model_imports_alike_from_level_2_and_3():
    from app.sims.ssa import dsmts

    for name in dsmts.cases():
        folder = dsmts.suite_dir() / name
        l2 = read_sbml(folder / f"{name}-sbml-l2v4.xml").require_network()
        l3 = read_sbml(folder / f"{name}-sbml-l3v2.xml").require_network()
        assert l2.structure_key() == l3.structure_key() and np.array_equal(l2.x0, l3.x0)
        np.testing.assert_allclose(l2.rates, l3.rates, rtol=1e-15)


def test_dimerisation_and_batch_features():
    """What DSMTS 00028-00033 use: 2P -> P2 at k P (P - 1) / 2 (order-2 mass action) and a batch
    product stoichiometry; here with a boundary source species read in the law."""
    species = ('<species id="P" compartment="cell" initialAmount="100" hasOnlySubstanceUnits="true" '
               'boundaryCondition="false" constant="false"/>'
               '<species id="P2" compartment="cell" initialAmount="0" hasOnlySubstanceUnits="true" '
               'boundaryCondition="false" constant="false"/>'
               '<species id="S" compartment="cell" initialAmount="2" hasOnlySubstanceUnits="true" '
               'boundaryCondition="true" constant="false"/>')
    dimer = (f'<reaction id="dim" reversible="false"><listOfReactants><speciesReference species="P" '
             f'stoichiometry="2" constant="true"/></listOfReactants><listOfProducts><speciesReference '
             f'species="P2" stoichiometry="1" constant="true"/></listOfProducts><kineticLaw><math {MATH}>'
             f'<apply><divide/><apply><times/><ci>k1</ci><ci>P</ci><apply><minus/><ci>P</ci><cn>1</cn>'
             f'</apply></apply><cn>2</cn></apply></math></kineticLaw></reaction>')
    batch = (f'<reaction id="batch" reversible="false"><listOfReactants><speciesReference species="S" '
             f'stoichiometry="1" constant="true"/></listOfReactants><listOfProducts><speciesReference '
             f'species="P" stoichiometry="5" constant="true"/></listOfProducts><kineticLaw><math {MATH}>'
             f'<apply><times/><cn>0.5</cn><ci>S</ci></apply></math></kineticLaw></reaction>')
    net = read_sbml_string(sbml(species=species, reactions=dimer + batch,
                                parameters='<parameter id="k1" value="0.001" constant="true"/>')).network
    assert net.laws is None
    assert net.reactant_order.tolist() == [[2, 0, 0], [0, 0, 1]]
    assert net.change.tolist() == [[-2, 1, 0], [5, 0, 0]]          # the boundary source stays
    assert net.rates.tolist() == [pytest.approx(0.001), 0.5]


@pytest.mark.parametrize("initial_value,x0,state0", [("false", 7, False), ("true", 50, True)])
def test_event_initial_value_at_time_zero(initial_value, x0, state0):
    """A trigger already true at t = 0 fires then only when initialValue is false (and, having
    set X = 7, is false afterwards: it re-arms)."""
    event = (f'<listOfEvents><event id="e0" useValuesFromTriggerTime="true"><trigger '
             f'initialValue="{initial_value}" persistent="false"><math {MATH}><apply><gt/><ci>X</ci>'
             f'<cn>10</cn></apply></math></trigger><listOfEventAssignments><eventAssignment variable="X">'
             f'<math {MATH}><cn>7</cn></math></eventAssignment></listOfEventAssignments></event></listOfEvents>')
    net = read_sbml_string(sbml(extra=event)).network
    assert net.x0.tolist() == [x0] and net.event_state0 == (state0,)


CONSTANT_DRAIN = law("drain", "<ci>k</ci>")


@pytest.mark.parametrize("engine_class", [CpuEnsemble, CompiledEnsemble])
def test_general_law_that_does_not_vanish_is_guarded(engine_class):
    """X -> 0 at the constant rate k = 40 (a law that stays positive at X = 0): unguarded, 50
    molecules drained at 40/s would go negative after about 1.25 s. Guarded, X(t) = max(0, 50 - N)
    with N ~ Poisson(k t), and the import says so."""
    from math import lgamma, log

    model = read_sbml_string(sbml(reactions=CONSTANT_DRAIN, parameters='<parameter id="k" value="40" constant="true"/>'))
    assert any("fires only while X >= 1" in item.detail for item in model.imported)
    net = model.network
    states = run(engine_class, net, [0.5, 3.0], 4000)
    assert states.min() >= 0
    assert (states[1] == 0).mean() > 0.99                  # P(N(120) < 50) is about 1e-12
    mean_n = 40 * 0.5
    pmf = np.exp([k * log(mean_n) - mean_n - lgamma(k + 1) for k in range(50)])
    exact = float(np.sum((50 - np.arange(50)) * pmf))    # E max(0, 50 - N)
    got = states[0][:, 0]
    assert abs(got.mean() - exact) < 4 * got.std() / np.sqrt(len(got))
