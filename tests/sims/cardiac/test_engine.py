"""The NumPy tissue engine: propagation, refinement, blow-up detection, adaptive control."""

import dataclasses

import numpy as np
import pytest

from app.sims.cardiac.engine import Problem, RunStopped, CpuTissue
from app.sims.common.config import ConfigError
from app.sims.cardiac.simulation import CardiacSimulation

from .helpers import cable, conduction_velocity, config, finish, run
from .synthetic import markov_run, trace_difference, write_markov_model


def test_planar_wave_velocity_converges_under_refinement():
    cvs = [conduction_velocity(run(cable(dx))[0], dx) for dx in (0.2, 0.1, 0.05)]
    d1, d2 = cvs[1] - cvs[0], cvs[2] - cvs[1]
    assert 0.3 < cvs[-1] < 0.45                               # mm/ms at D = 0.06
    assert d1 > 0 and d2 > 0 and d2 < 0.5 * d1                # differences shrink: it converges


def test_sheet_wave_reaches_far_side_and_apd_is_measured():
    arrays, s = run("mesh: {kind: sheet, nx: 12, ny: 8, dx_mm: 0.2}\n"
                    "protocol: {t_end: 330, stimuli: [{start: 1, duration: 2, amplitude: -40, region: {kind: rect, x1: 0.3}}]}\n"
                    "solver: {method: rlfe, dt: 0.05}\noutput: {random_probes: 5, dt_save: 1}\n")
    assert s["finished"] and s["steps_accepted"] == 6600 and s["steps_rejected"] == 0
    at = arrays["activation_time"]
    assert np.all(np.isfinite(at)) and at.max() > at.min()
    assert np.all((arrays["apd90"] > 250) & (arrays["apd90"] < 340))
    assert arrays["probe_V"].shape == (len(arrays["probe_t"]), 5)
    assert np.allclose(np.diff(arrays["probe_t"]), 1.0)


def test_forward_euler_without_rl_blows_up_and_says_where():
    cfg = config("mesh: {kind: sheet, nx: 4, ny: 1, dx_mm: 0.2}\n"
                 "protocol: {t_end: 20, stimuli: [{start: 1, region: {kind: cells, cells: [0]}}]}\n"
                 "solver: {method: fe, dt: 0.5}\noutput: {random_probes: 0}\n")
    sim = CardiacSimulation(cfg, "cpu")
    while not sim.finished:
        sim.advance()
    _, s = sim.results()
    assert "stopped" in s and not s["finished"]
    st = s["stopped"]
    assert 0 <= st["cell"] < 4 and 0 < st["t_ms"] <= 20
    assert "NaN" in st["reason"] or "exceeds" in st["reason"]
    assert "stopped" in sim.frame().status


def test_same_step_with_rush_larsen_is_stable():
    _, s = run("mesh: {kind: single}\nprotocol: {t_end: 20, stimuli: [{start: 1}]}\n"
               "solver: {method: rlfe, dt: 0.05}\noutput: {random_probes: 0}\n")
    assert s["finished"]


def test_step_floor_stops_adaptive_run():
    p = Problem.from_config(config("mesh: {kind: single}\nprotocol: {t_end: 20, stimuli: [{start: 1}]}\n"
                                   "solver: {method: bs32, dt: 0.01, at: 1.0e-9, rt: 0, dt_min: 0.005}\n"
                                   "output: {random_probes: 0}\n"))
    e = CpuTissue(p)
    with pytest.raises(RunStopped, match="below the floor") as info:
        e.advance(100000)
    assert info.value.cell == 0 and info.value.t < 20


@pytest.mark.parametrize("method", ["te21", "bs32", "rkf45"])
def test_adaptive_pairs_reject_retry_and_land_on_breakpoints(method):
    arrays, s = run(cable(0.2, length=3.0, method=method, t_end=12.0, dt=0.05))
    assert s["finished"] and s["steps_rejected"] > 0
    t = np.cumsum(arrays["h"])
    assert np.isclose(t[-1], 12.0)
    assert np.any(np.isclose(arrays["h_t"], 1.0)) and np.any(np.isclose(arrays["h_t"], 3.0))  # stimulus edges
    assert np.all(np.isfinite(arrays["activation_time"]))


def test_adaptive_solution_approaches_fine_fixed_step():
    ref, _ = run(cable(0.2, length=3.0, method="rlfe", t_end=12.0, dt=0.002))
    a, _ = run(cable(0.2, length=3.0, method="bs32", t_end=12.0, dt=0.01).replace("at: 0.1, rt: 0.01", "at: 1.0e-3, rt: 1.0e-5"))
    assert np.nanmax(np.abs(a["activation_time"] - ref["activation_time"])) < 0.05


def test_checkpoint_resume_matches_straight_run():
    text = cable(0.2, length=2.0, t_end=6.0)
    straight, _ = run(text)
    sim = CardiacSimulation(config(text), "cpu")
    sim.engine.advance(250)
    state = sim.state()
    arrays, _ = finish(CardiacSimulation.restore(state, "cpu"))
    np.testing.assert_allclose(arrays["V_final"], straight["V_final"])
    np.testing.assert_allclose(arrays["probe_V"], straight["probe_V"])


def test_stimulus_regions_are_validated():
    from app.sims.common.config import ConfigError
    with pytest.raises(ConfigError, match="x0 <= x1"):
        config("mesh: {kind: sheet, nx: 4, ny: 4}\nprotocol: {stimuli: [{region: {kind: rect, x0: 2, x1: 1}}]}\n")
    cfg = config("mesh: {kind: sheet, nx: 4, ny: 4, dx_mm: 0.2}\n"
                 "protocol: {stimuli: [{name: S1}, {name: S2, region: {kind: rect, x0: 5, x1: 6}}]}\n")
    with pytest.raises(ValueError, match=r"S2 \(rect\) reaches no cell of this sheet \(x 0..0.6 mm"):
        Problem.from_config(cfg)
    with pytest.raises(ConfigError, match="reaches no cell"):
        CardiacSimulation(cfg, "cpu")



def test_cell_stimulus_over_many_times_is_stim_current_at_each():
    """The trace's dV/dt reads the stimulus at every recorded time at once: the same values as
    one ``stim_current`` call per time, over overlapping trains and pulse edges."""
    from app.sims.cardiac.config import for_backend
    cfg = for_backend(config("mesh: {kind: single}\nprotocol: {t_end: 3000, stimuli: [{start: 10, duration: 2, "
                             "amplitude: -20, period: 500, count: 3}, {start: 1011, duration: 1, amplitude: -7}]}\n"),
                      "cpu")
    p = Problem.from_config(cfg)
    t = np.linspace(0.0, 3000.0, 30001)
    expected = np.array([p.stim_current(x)[0] for x in t])
    np.testing.assert_array_equal(p.cell_stimulus(t), expected)
    assert (expected == -27.0).any() and (expected == -20.0).any()


def test_adaptive_method_integrates_a_stiff_markov_chain_to_its_tolerance(tmp_path):
    """Bogacki-Shampine 3(2) with Rush-Larsen at at = rt = 1e-6 on a cell whose repolarising
    current flows through a stiff Markov chain (tests/sims/cardiac/synthetic.py), against CVODE
    at 1e-10: APD90 within 0.1 % and V within 0.5 mV everywhere (observed: +0.006 %, 0.06 mV at
    the upstroke). Rush-Larsen on the chain's states, each frozen against the others over a step,
    gave -1.0 % and 5.3 mV with no rejected step: the adaptive methods step coupled gates by the
    tableau (CellModel.with_coupled_stepped)."""
    path = write_markov_model(tmp_path)
    ref_arrays, ref = run(markov_run(path, "{method: cvode, at: 1.0e-10, rt: 1.0e-10}"))
    arrays, s = run(markov_run(path, "{method: bs32, at: 1.0e-6, rt: 1.0e-6, precision: float64}"))
    assert 200.0 < ref["apd90_ms"] < 300.0 and ref["peak_mV"] > 20.0, ref
    assert abs(s["apd90_ms"] - ref["apd90_ms"]) < 1e-3 * ref["apd90_ms"], (s["apd90_ms"], ref["apd90_ms"])
    assert trace_difference(arrays, ref_arrays) < 0.5


def _nygren_final_state(method: str, dt: float, tolerances: str = "") -> tuple[np.ndarray, dict]:
    text = ("model: {file: nygren_atrial_model_1998}\nmesh: {kind: single}\n"
            "protocol: {t_end: 20, stimuli: [{start: 1, duration: 2, amplitude: -40}]}\n"
            f"solver: {{method: {method}, dt: {dt}, precision: float64{tolerances}}}\noutput: {{dt_save: 0}}\n")
    arrays, summary = run(text)
    return arrays["cell_states"][-1], summary


def test_grl1_converges_at_first_order_where_rush_larsen_forward_euler_blows_up():
    """Nygren 1998: intracellular Ca²⁺ relaxes at |J| ≈ 22/ms, so forward Euler on it (RLFE)
    is unstable at 0.1 ms (|1 + hJ| > 1) and the run stops; GRL1 steps it by its diagonal
    Jacobian. Against CVODE at 1e-10 over the first 20 ms (the upstroke included), GRL1's error
    halves with the step (order 1: observed orders within 0.2 of 1; measured 2.07 and 2.00
    as ratios)."""
    ref, _ = _nygren_final_state("cvode", 0.01, ", at: 1.0e-10, rt: 1.0e-10")
    errors = []
    for dt in (0.1, 0.05, 0.025):
        y, summary = _nygren_final_state("grl1", dt)
        assert summary["finished"]
        errors.append(np.max(np.abs(y - ref) / (np.abs(ref) + 1e-6)))
    orders = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
    assert np.all(np.abs(orders - 1.0) < 0.2), (errors, orders)
    assert errors[-1] < 0.02


def test_an_unstable_rush_larsen_step_is_refused_with_its_cause():
    """RLFE at 0.1 ms on Nygren: forward Euler on Ca²⁺ amplifies the rest state's fastest mode
    (|1 + hJ| ≈ 1.26); the config says so and names the cure. At 0.05 ms, and with GRL1, it loads."""
    with pytest.raises(ConfigError, match=r"rlfe at dt = 0.1 ms is unstable for model nygren_atrial_model_1998 at "
                       r"its initial state: one step multiplies the mode led by \S+ by 1.2\d.*forward Euler on a "
                       r"fast non-gating state\); use method grl1"):
        config("model: {file: nygren_atrial_model_1998}\nmesh: {kind: single}\nsolver: {method: rlfe, dt: 0.1}\n")
    for solver in ("{method: rlfe, dt: 0.05}", "{method: grl1, dt: 0.1}"):
        config(f"model: {{file: nygren_atrial_model_1998}}\nmesh: {{kind: single}}\nsolver: {solver}\n")
    cfg = config("model: {file: nygren_atrial_model_1998}\nmesh: {kind: single}\nsolver: {method: rlfe, dt: 0.05}\n")
    unstable = dataclasses.replace(cfg, solver=dataclasses.replace(cfg.solver, dt=0.1))     # past the check
    engine = CpuTissue(Problem.from_config(unstable))
    with pytest.raises(RunStopped, match="V is NaN"):       # what the refusal prevents
        while not engine.finished:
            engine.advance(100)


def test_grl1_without_rush_larsen_is_refused():
    with pytest.raises(ConfigError, match="grl1 is a Rush-Larsen method.*rush_larsen must be true"):
        config("mesh: {kind: single}\nsolver: {method: grl1, rush_larsen: false}\n")


def test_a_checkpoint_in_another_state_order_is_refused():
    """The checkpoint names its states; resuming it where they are in another order (a gate
    order that changed between versions), or without names on a model with coupled gates (the
    default CRN: f_Ca and Ca_up), is refused with the reason, never resumed permuted."""
    from app.sims.common.checkpoint import CheckpointError
    sim = CardiacSimulation(config(cable(0.2, length=2.0, t_end=6.0)), "cpu")
    sim.engine.advance(5)
    state = sim.state()
    assert tuple(state["state_names"]) == sim.problem.model.states
    swapped = {**state, "state_names": state["state_names"][::-1]}
    with pytest.raises(CheckpointError, match="not this model's, in this order"):
        CardiacSimulation.restore(swapped, "cpu")
    unnamed = {k: v for k, v in state.items() if k != "state_names"}
    with pytest.raises(CheckpointError, match="does not name its states"):
        CardiacSimulation.restore(unnamed, "cpu")
