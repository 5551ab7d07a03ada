"""Propensity guards: a propensity that becomes negative, NaN or infinite at a state the run
reaches stops the run in that step (the state in the message is the first bad one), naming
the reaction, the state and the time, on every engine; the CLI exits 3. Also the two hangs at
t = 0: an infinite propensity, and a stoichiometry of 1e12 (a firing budget per interval).

One network serves every case, so the compiled engines compile once: X decays one by one from
x0; the probe reaction's law ``P*(X - Y) + Q/(X - R)`` reads species that never change, so the
initial counts pick the first bad state: negative at X = Y - 1 (P=1, Q=0), infinite at X = R
(P=0, Q=1), NaN at X = R (P=0, Q=0, as 0/0)."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.compute.codegen import parse
from app.sims.ssa.engine import BadPropensity, RunStopped, TooManyFirings
from app.sims.ssa.model import NetworkSpec, ReactionSpec, compile_network

SPECIES = ("X", "Y", "P", "Q", "R", "W")
LAW = "P*(X - Y) + Q/(X - R)"


def probe_network(x0: int, kind: str, target: int):
    """The network whose probe goes bad (``kind``: negative, inf, nan) when X reaches ``target``."""
    counts = {"negative": dict(Y=target + 1, P=1, Q=0, R=10**9),
              "inf": dict(Y=0, P=0, Q=1, R=target), "nan": dict(Y=0, P=0, Q=0, R=target)}[kind]
    spec = NetworkSpec(species={"X": x0, **counts, "W": 0},
                       reactions=[ReactionSpec(rate=1.0, reactants={"X": 1}, name="decay"),
                                  ReactionSpec(rate=1.0, products={"W": 1}, name="probe")])
    net = compile_network(spec)
    return dataclasses.replace(net, laws=(None, parse(LAW, set(SPECIES))))


def _engine(name: str, net, realizations: int, seed: int):
    if name == "numpy":
        from app.sims.ssa.cpu import CpuEnsemble
        return CpuEnsemble(net, realizations, seed, "direct", [0], 8)
    if name == "numpy-logdirect":
        from app.sims.ssa.cpu import CpuEnsemble
        return CpuEnsemble(net, realizations, seed, "logdirect", [0], 8)
    from app.sims.ssa.compiled import CompiledEnsemble
    return CompiledEnsemble(net, realizations, seed, "direct", [0], 8)


def _check(exc: BadPropensity, kind: str, target: int, t_end: float) -> None:
    text = str(exc)
    assert exc.reaction == "probe" and "reaction probe" in text
    state = dict(re.findall(r"(\w)=(-?\d+)", text.split("state ")[1]))
    assert int(state["X"]) == target, text          # stopped at the first bad state, no later
    t = float(re.search(r"at t = ([0-9.e+-]+)", text).group(1))
    assert 0 < t <= t_end
    value = exc.value
    assert {"negative": value < 0, "inf": value == np.inf, "nan": np.isnan(value)}[kind], text


def _run_to_stop(engine, t_end: float) -> BadPropensity:
    with pytest.raises(BadPropensity) as info:
        for t in np.linspace(t_end / 8, t_end, 8):
            while not engine.advance(float(t), 1 << 20):
                pass
    return info.value


KINDS = ("negative", "inf", "nan")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("engine", ["numpy", "numpy-logdirect", "compiled"])
@pytest.mark.parametrize("target", [0, 3])
def test_bad_propensity_stops_in_its_step(engine, kind, target):
    net = probe_network(target + 6, kind, target)
    _check(_run_to_stop(_engine(engine, net, 4, 11), 1e3), kind, target, 1e3)


@settings(derandomize=True, max_examples=60, deadline=None)
@given(kind=st.sampled_from(KINDS), target=st.integers(0, 12), above=st.integers(1, 15),
       realizations=st.integers(1, 6), seed=st.integers(0, 2**32))
def test_generated_numpy_cases(kind, target, above, realizations, seed):
    net = probe_network(target + above, kind, target)
    _check(_run_to_stop(_engine("numpy", net, realizations, seed), 1e4), kind, target, 1e4)


@settings(derandomize=True, max_examples=30, deadline=None)
@given(kind=st.sampled_from(KINDS), target=st.integers(0, 12), above=st.integers(1, 15),
       realizations=st.integers(1, 6), seed=st.integers(0, 2**32))
def test_generated_compiled_cases(kind, target, above, realizations, seed):
    net = probe_network(target + above, kind, target)
    _check(_run_to_stop(_engine("compiled", net, realizations, seed), 1e4), kind, target, 1e4)


@pytest.mark.parametrize("engine", ["numpy", "compiled"])
def test_infinite_at_t0_stops_at_once(engine):
    """The old hang: an infinite propensity at the initial state fired at t = 0 forever."""
    net = probe_network(5, "inf", 5)
    exc = _run_to_stop(_engine(engine, net, 3, 1), 10.0)
    assert "X=5" in str(exc) and exc.value == np.inf


@pytest.mark.parametrize("engine", ["numpy", "compiled"])
def test_legitimate_law_runs(engine):
    """The same law away from its singular point runs to the end without a stop."""
    net = probe_network(30, "negative", -1)      # X - 0 >= 0 at every state X reaches
    eng = _engine(engine, net, 4, 3)
    for t in (1.0, 2.0, 5.0):
        while not eng.advance(t, 1 << 20):
            pass
    assert eng.reactions_fired > 0


# ---- the firing budget (stoichiometry 1e12) and tau-leaping ------------------------------------
GROWTH = """
domain: ssa
model:
  species: {X: 1}
  reactions: [{reactants: {X: 1}, products: {X: %d}, rate: 1.0}]
ensemble: {realizations: 2, t_end: 10.0, samples: 11, algorithm: %s}
"""


@pytest.mark.parametrize("algorithm,backend", [("direct", "cpu-reference"), ("direct", "cpu"),
                                               ("tau-leap", "cpu-reference"), ("tau-leap", "cpu")])
@pytest.mark.parametrize("stoichiometry", [10**12])
def test_huge_stoichiometry_stops_with_the_budget(tmp_path, capsys, algorithm, backend, stoichiometry):
    from app.cli import main

    cfg = tmp_path / "growth.yaml"
    cfg.write_text(GROWTH % (stoichiometry + 1, algorithm))
    code = main(["run", str(cfg), "--backend", backend, "--out", str(tmp_path / "out"), "--no-png"])
    err = capsys.readouterr().err
    assert code == 3, err
    assert "realization" in err and "X=" in err and "limit 1e+10" in err


def test_tau_leap_infinite_mass_action_is_named():
    from app.sims.ssa.tauleap_numpy import TauLeapReference

    spec = NetworkSpec(species={"X": 10**7}, reactions=[ReactionSpec(rate=1e300, reactants={"X": 3})])
    eng = TauLeapReference(compile_network(spec), 2, 1, [0], 8)
    with pytest.raises(BadPropensity, match=r"reaction R1 is inf at t = 0"):
        eng.advance(1.0)


def test_compiled_tau_leap_infinite_mass_action_is_named():
    from app.sims.ssa.tauleap import TauLeapEnsemble

    spec = NetworkSpec(species={"X": 10**7}, reactions=[ReactionSpec(rate=1e300, reactants={"X": 3})])
    eng = TauLeapEnsemble(compile_network(spec), 2, 1, [0], 8)
    with pytest.raises(BadPropensity, match=r"reaction R1 is inf at t = 0"):
        eng.advance(1.0)


def test_run_stopped_is_the_common_base():
    assert issubclass(BadPropensity, RunStopped) and issubclass(TooManyFirings, RunStopped)


# ---- the CLI on SBML kinetic laws: exit 3, file runs no further ---------------------------------
@pytest.mark.parametrize("body,value", [
    ("<apply><divide/><cn>1</cn><cn>0</cn></apply>", "inf"),
    ("<apply><divide/><cn>0</cn><cn>0</cn></apply>", "nan"),
    ("<apply><minus/><cn>2</cn></apply>", "-2.0"),
    ("<apply><divide/><cn>1</cn><apply><minus/><ci>X</ci><cn>49</cn></apply></apply>", "inf"),
])
def test_sbml_laws_exit_3_naming_reaction_state_time(tmp_path, capsys, body, value):
    pytest.importorskip("libsbml")
    from app.cli import main
    from tests.sims.ssa.test_sbml import law, sbml

    path = tmp_path / "bad.xml"
    path.write_text(sbml(reactions=law("r1", body)))
    code = main(["run", str(path), "--backend", "cpu-reference", "--out", str(tmp_path / "o"), "--no-png"])
    err = capsys.readouterr().err
    assert code == 3, err
    assert f"reaction r1 is {value}" in err and "state X=" in err and "at t = " in err


# ---- CUDA --------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("kind", KINDS)
def test_cuda_bad_propensity_flag(kind):
    """The kernel's per-realization flag (read with the tally: no extra host wait) stops the
    run with the reaction; the realization's state is the first bad one."""
    from app.compute.device import backend_context
    from app.sims.ssa.cuda import CudaEnsemble

    net = probe_network(9, kind, 3)
    with backend_context("cuda"):
        eng = CudaEnsemble(net, 256, 5, "direct", [0], 8)
        try:
            with pytest.raises(BadPropensity) as info:
                for t in (1.0, 10.0, 100.0, 1e4):
                    eng.advance(t)
            assert info.value.reaction == "probe" and "X=3" in str(info.value)
        finally:
            eng.close()


@pytest.mark.gpu
def test_cuda_mass_action_guard_costs_nothing_when_finite():
    """A mass-action network runs as before (the total screens every step)."""
    from app.compute.device import backend_context
    from app.sims.ssa.cuda import CudaEnsemble

    spec = NetworkSpec(species={"X": 100}, reactions=[ReactionSpec(rate=0.5, reactants={"X": 1})])
    with backend_context("cuda"):
        eng = CudaEnsemble(compile_network(spec), 1024, 1, "direct", [0], 8)
        try:
            eng.advance(2.0)
            mean = eng.stats(False).mean[0]
        finally:
            eng.close()
    assert abs(mean - 100 * np.exp(-1.0)) < 5 * np.sqrt(100 * np.exp(-1) * (1 - np.exp(-1)) / 1024)


def test_a_decaying_system_is_not_refused_for_its_initial_propensity(tmp_path, capsys):
    """Decay-dimerization's total propensity at t = 0 (about 1e7) times a 1e4-long sample
    interval 'asks' for 1e11 firings; the realizations then fire about 4e5 reactions in all. The
    budget is trusted only after FIRINGS_BEFORE_LIMIT firings, so the run goes through."""
    from app.cli import main

    code = main(["run", "00-decay-dimerization", "--backend", "cpu", "--set", "ensemble.realizations=4",
                 "--set", "ensemble.t_end=1.0e+4", "--set", "ensemble.samples=2",
                 "--out", str(tmp_path / "out"), "--no-png"])
    assert code == 0, capsys.readouterr().err


def test_the_firing_budget_waits_for_its_grace():
    from app.sims.ssa.engine import FIRINGS_BEFORE_LIMIT, check_propensities

    net = probe_network(10, "negative", 0)
    a, x, t = np.full((1, net.n_reactions), 1e7), np.full((1, net.n_species), 10), np.zeros(1)
    check_propensities(net, a, np.zeros(1, int), x, t, t_to=1e4, fired=FIRINGS_BEFORE_LIMIT / 2)
    with pytest.raises(TooManyFirings):
        check_propensities(net, a, np.zeros(1, int), x, t, t_to=1e4, fired=2 * FIRINGS_BEFORE_LIMIT)


def _growth_engine(name: str, net):
    from app.sims.ssa.tauleap import TauLeapEnsemble
    from app.sims.ssa.tauleap_numpy import TauLeapReference

    if name == "tau-leap-numpy":
        return TauLeapReference(net, 2, 1, [0], 8)
    if name == "tau-leap-compiled":
        return TauLeapEnsemble(net, 2, 1, [0], 8)
    return _engine(name, net, 2, 1)


@pytest.mark.parametrize("engine", ["numpy", "compiled", "tau-leap-numpy", "tau-leap-compiled"])
def test_exploding_counts_stop_within_a_few_firings(engine):
    """X -> (1e12 + 1) X: the total propensity doubles within three firings of its first
    over-budget prediction, so every engine stops there instead of waiting out the grace of
    FIRINGS_BEFORE_LIMIT firings (10^6 NumPy vector steps were minutes on a loaded machine)."""
    from app.sims.ssa.tauleap import SSA_STEPS

    spec = NetworkSpec(species={"X": 1}, reactions=[
        ReactionSpec(rate=1.0, reactants={"X": 1}, products={"X": 10**12 + 1}, name="grow")])
    eng = _growth_engine(engine, compile_network(spec))
    with pytest.raises(TooManyFirings, match="limit 1e"):
        while not eng.advance(1.0, 1 << 20):
            pass
    # direct: the doubling is seen at the third firing; tau-leap checks between its bursts of
    # SSA_STEPS exact steps
    assert eng.reactions_fired <= 2 * 3 * (SSA_STEPS if "tau" in engine else 1)


DECAY_DIMERIZATION = NetworkSpec(
    species={"S1": 100_000, "S2": 0, "S3": 0},
    reactions=[ReactionSpec(rate=1.0, reactants={"S1": 1}, name="decay"),
               ReactionSpec(rate=0.002, reactants={"S1": 2}, products={"S2": 1}, name="dimerize"),
               ReactionSpec(rate=0.5, reactants={"S2": 1}, products={"S1": 2}, name="dissociate"),
               ReactionSpec(rate=0.04, reactants={"S2": 1}, products={"S3": 1}, name="convert")])


@pytest.mark.parametrize("engine", ["tau-leap-numpy", "tau-leap-compiled"])
def test_tau_leaping_a_decaying_system_waits_for_the_grace(engine):
    """Tau-leaping keeps the direct method's grace: decay-dimerization's initial total
    propensity (1e7) over a 1e4-long interval predicts 1e11 firings, yet the system decays and
    the run reaches its end, every S1 and S2 converted or decayed (fails with the budget
    applied from the first step)."""
    eng = _growth_engine(engine, compile_network(DECAY_DIMERIZATION))
    while not eng.advance(1.0e4, 1 << 20):
        pass
    x = eng.states()
    assert (x[:, :2] == 0).all() and (x[:, 2] > 0).all(), x


def test_the_budget_trusts_growth_but_not_decay():
    from app.sims.ssa.engine import BUDGET_GROWTH, FIRINGS_BEFORE_LIMIT, over_budget

    rows, work = np.arange(2), np.full(2, 1e11)
    first = np.zeros(2)
    assert not over_budget(work, np.array([1e7, 1e7]), rows, 0.0, first).any()
    assert list(first) == [1e7, 1e7]
    stop = over_budget(work, np.array([BUDGET_GROWTH * 1e7, 0.5e7]), rows, 10.0, first)
    assert list(stop) == [True, False]                    # grew: stopped; decayed: grace
    assert over_budget(work, np.array([1e6, 1e6]), rows, 2 * FIRINGS_BEFORE_LIMIT, first).all()
    assert not over_budget(np.full(2, 1e9), np.array([1e9, 1e9]), rows, 0.0, first).any()
    assert list(first) == [0.0, 0.0]                       # back under the limit: forgotten
