"""CVODE (solver.method cvode): against an independent integrator on a small model, against
the Myokit CVODES references of the shipped models, and its bookkeeping against the explicit
engine's."""

import numpy as np
import pytest

from app.sims.cardiac.engine import Maps
from tests.sims.cardiac.helpers import config, run
from tests.sims.cardiac.synthetic import write_model

from .test_references import preset, reference


def test_cvode_matches_scipy_radau_on_the_synthetic_cell(tmp_path):
    """Two annotated pulses; SciPy's Radau IIA (1e-12, restarted at the pulse edges) on the
    same right-hand side is the reference: V within 1e-4 mV at tolerance 1e-9."""
    from scipy.integrate import solve_ivp
    path = write_model(tmp_path, amp=-25.0, dur=1.5, per=400.0, off=20.0, dk=1e-3)
    arrays, summary = run(f"model: {{file: '{path}'}}\nmesh: {{kind: single}}\nprotocol: {{t_end: 440}}\n"
                          "solver: {method: cvode, at: 1.0e-9, rt: 1.0e-9}\noutput: {random_probes: 0, dt_save: 0}\n")
    assert summary["finished"] and summary["method"] == "cvode"
    from app.sims.cardiac.model import load_model
    m = load_model(str(path))
    p = m.parameter_vector()
    y, t0, ts, ys = m.initial_state(), 0.0, [], []
    for t1, stim in ((20.0, 0.0), (21.5, -25.0), (420.0, 0.0), (421.5, -25.0), (440.0, 0.0)):
        sol = solve_ivp(lambda t, x, s=stim: m.derivative(x[:, None], np.full(1, s), p)[:, 0], (t0, t1), y,
                        method="Radau", rtol=1e-11, atol=1e-11, dense_output=True)
        ct = arrays["cell_t"]
        grid = ct[((ct > t0) | ((ct == 0.0) & (t0 == 0.0))) & (ct <= t1)]
        ts.append(grid)
        ys.append(sol.sol(grid).T)
        y, t0 = sol.y[:, -1], t1
    ref = np.concatenate(ys)
    assert len(ref) == len(arrays["cell_t"])
    np.testing.assert_allclose(arrays["cell_states"][:, 0], ref[:, 0], atol=1e-4)
    np.testing.assert_allclose(arrays["cell_states"][:, 1], 140.0 + 1e-3 * arrays["cell_t"], rtol=1e-12)


@pytest.mark.parametrize("name", ["beeler_reuter_model_1977", "courtemanche_ramirez_nattel_1998"])
def test_cvode_default_matches_the_cvodes_reference_every_beat(name):
    """The single-cell default (CVODE at its default tolerance) on the whole preset protocol:
    APD90 of the last beat within 0.5 % of Myokit's CVODES at 1e-8 (the bound the app
    promises; measured: within 0.1 %), peak within 0.5 mV."""
    from dataclasses import replace

    from app.sims.cardiac.config import CVODE_DEFAULTS
    from app.sims.cardiac.simulation import CardiacSimulation
    cfg = preset(name)
    cfg = replace(cfg, solver=replace(cfg.solver, method="cvode", **CVODE_DEFAULTS))
    sim = CardiacSimulation(cfg, "cpu")
    while not sim.finished:
        sim.advance()
    _, s = sim.results()
    ref = reference(name)["last"]
    assert abs(s["apd90_ms"] - ref["apd90_ms"]) < 0.005 * ref["apd90_ms"]
    assert abs(s["peak_mV"] - ref["peak_mV"]) < 0.5
    assert abs(s["rest_mV"] - ref["rest_mV"]) < 0.1


def test_a_single_cell_without_a_method_runs_cvode_and_tissue_is_refused():
    from app.sims.cardiac.config import CVODE_DEFAULTS, for_backend
    from app.sims.common.config import ConfigError
    cfg = config("mesh: {kind: single}\n")
    assert cfg.solver.method == "auto"
    s = for_backend(cfg, "cpu").solver
    assert s.method == "cvode" and (s.at, s.rt, s.precision) == (CVODE_DEFAULTS["at"], CVODE_DEFAULTS["rt"], "float64")
    s = config("mesh: {kind: single}\nsolver: {method: cvode, at: 1.0e-5}\n").solver
    assert (s.at, s.rt) == (1e-5, CVODE_DEFAULTS["rt"])
    assert config("mesh: {kind: single}\nsolver: {method: bs32, at: 0.1}\n").solver.method == "bs32"
    assert config("mesh: {kind: sheet, nx: 5, ny: 5}\n").solver.method == "rlfe"
    with pytest.raises(ConfigError, match="at most 400 unknowns"):
        config("mesh: {kind: sheet, nx: 10, ny: 10}\nsolver: {method: cvode}\n")
    with pytest.raises(ConfigError, match="lookup_tables must be false"):
        config("mesh: {kind: single}\nsolver: {method: cvode, lookup_tables: true}\n")


def test_auto_is_cvode_on_the_cpu_and_rodas4_on_cuda_and_refuses_its_own_settings():
    """One default for single cells on both engines: ``auto`` resolves per backend (RODAS4 on CUDA,
    where one GPU thread has no CVODE); a tolerance given with it is refused rather than ignored."""
    from app.sims.cardiac.config import AUTO_SOLVERS, for_backend
    from app.sims.common.config import ConfigError
    cfg = config("mesh: {kind: single}\nsolver: {method: auto}\n")
    for backend, engine in (("cpu", "cpu"), ("cpu-reference", "cpu"), ("cuda", "cuda")):
        s = for_backend(cfg, backend).solver
        assert {k: getattr(s, k) for k in AUTO_SOLVERS[engine]} == AUTO_SOLVERS[engine]
    assert for_backend(cfg, "cuda").solver.method == "rodas4"
    rl = config("mesh: {kind: single}\nsolver: {method: rlfe, dt: 0.01}\n")
    assert for_backend(rl, "cuda") is rl
    assert config("mesh: {kind: single}\nsolver: {method: auto, at: 1.0}\n").solver.method == "auto"  # the default
    with pytest.raises(ConfigError, match="solver.at.*method auto sets its own"):
        config("mesh: {kind: single}\nsolver: {method: auto, at: 1.0e-5}\n")
    with pytest.raises(ConfigError, match="auto is for single cells"):
        config("mesh: {kind: sheet, nx: 2, ny: 2}\nsolver: {method: auto}\n")


def test_a_problem_is_built_from_a_resolved_solver_only():
    from app.sims.cardiac.engine import Problem
    with pytest.raises(ValueError, match="resolved per engine"):
        Problem.from_config(config("mesh: {kind: single}\n"))


@pytest.mark.slow
def test_cvode_on_a_small_sheet_conducts():
    """A 10x1 cable of CRN cells (210 unknowns), stimulated at one end: every cell activates,
    in order, at the speed the explicit engine gives (RL Euler, dt 0.01 ms) within 2 %."""
    cable = ("mesh: {kind: sheet, nx: 10, ny: 1, dx_mm: 0.1}\n"
             "protocol: {t_end: 20, stimuli: [{start: 1, duration: 2, amplitude: -40, region: {kind: rect, x1: 0.25}}]}\n"
             "output: {random_probes: 0, probe_cells: [0, 9], dt_save: 0}\n")
    arrays, s = run(cable + "solver: {method: cvode}\n")
    act = arrays["activation_time"]
    assert s["finished"] and np.all(np.isfinite(act)) and np.all(np.diff(act[3:]) > 0)
    ref, _ = run(cable + "solver: {method: rlfe, dt: 0.01, precision: float64}\n", "cpu-reference")
    speed = np.polyfit(act[3:8], np.arange(3, 8) * 0.1, 1)[0]
    ref_speed = np.polyfit(ref["activation_time"][3:8], np.arange(3, 8) * 0.1, 1)[0]
    assert speed == pytest.approx(ref_speed, rel=0.02)


def test_observe_steps_equals_observe_step_by_step():
    rng = np.random.default_rng(3)
    t = np.cumsum(rng.uniform(0.1, 1.0, 400))
    t = np.concatenate([[0.0], t])
    beat = lambda x: -80 + 120 * np.exp(-((x - 60) / 40) ** 2) + 100 * np.exp(-((x - 250) / 30) ** 2)  # noqa: E731
    v = np.stack([beat(t), beat(t - 20), np.full_like(t, -80.0)], 1) + rng.normal(0, 0.5, (len(t), 3))
    one, many = Maps(v[0], -20.0), Maps(v[0], -20.0)
    for k in range(1, len(t)):
        one.observe(t[k - 1], v[k - 1], t[k], v[k])
    for a, b in ((0, 150), (150, 151), (151, len(t))):       # in blocks, as CVODE's stretches come
        many.observe_steps(t[a:b + 1] if b < len(t) else t[a:], v[a:b + 1] if b < len(t) else v[a:])
    for key in ("act_first", "act_last", "vmax", "t_rep"):
        np.testing.assert_array_equal(getattr(one, key), getattr(many, key))
    assert np.isfinite(one.t_rep[:2]).all() and np.isnan(one.act_first[2])
