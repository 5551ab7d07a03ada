"""Operator splitting (``solver.split_dt``): the RKC1 diffusion super-step against the exact
decay of Fourier modes, the split's first order in Δt_s on a cable, the compiled engine against
NumPy, checkpoints and probes on split steps, and the config's refusals."""

import numpy as np
import pytest

from app.sims.cardiac.engine import Problem
from app.sims.cardiac.simulation import CardiacSimulation
from app.sims.cardiac.splitting import (rkc1_amplification, rkc1_parameters, rkc1_stages, rkc1_step,
                                        spectral_bound)
from app.sims.common.config import ConfigError

from .helpers import cable, config, finish, run

N, DX, D = 64, 0.1, 0.1            # a periodic 1-D cable: λ_m = −(4D/dx²) sin²(π m / N)


def periodic_laplacian(v: np.ndarray) -> np.ndarray:
    return D / DX ** 2 * (np.roll(v, 1) + np.roll(v, -1) - 2 * v)


def eigenvalue(m: int) -> float:
    return -4 * D / DX ** 2 * np.sin(np.pi * m / N) ** 2


def mode(m: int) -> np.ndarray:
    return np.cos(2 * np.pi * m * np.arange(N) / N)


@pytest.mark.parametrize("s", [1, 2, 3, 7, 20])
def test_a_super_step_multiplies_each_fourier_mode_by_the_chebyshev_amplification(s):
    h = 0.9 * rkc1_parameters(s)[2] / (4 * D / DX ** 2)
    for m in (1, 5, N // 2):
        got = rkc1_step(mode(m), h, periodic_laplacian, s)
        np.testing.assert_allclose(got, rkc1_amplification(h * eigenvalue(m), s) * mode(m), atol=1e-12)


@pytest.mark.parametrize("s", [1, 2, 4, 10, 40])
def test_the_amplification_is_damped_on_the_whole_stability_interval(s):
    beta = rkc1_parameters(s)[2]
    z = np.linspace(-beta, 0, 20001)
    p = rkc1_amplification(z, s)
    assert np.all(np.abs(p[1:-1]) < 1.0) and abs(p[0]) <= 1 + 1e-12 and p[-1] == pytest.approx(1.0)
    assert abs(rkc1_amplification(-1.01 * beta, s)) > 1.0          # just past it, the mode grows
    assert beta == pytest.approx(2.0 if s == 1 else 2 * s ** 2 * (1 - 0.05 * 2 / 3), rel=0.02)


def test_the_stage_count_is_the_fewest_that_keeps_the_highest_mode_damped():
    rho = spectral_bound(np.full((N, 2), D / DX ** 2), 1.0)
    assert rho == pytest.approx(4 * D / DX ** 2)               # the periodic cable's |λ| max exactly
    for h in (0.01, 0.1, 0.5, 2.0):
        s = rkc1_stages(h, rho)
        v = mode(N // 2)
        for _ in range(50):
            v = rkc1_step(v, h, periodic_laplacian, s)
        assert np.abs(v).max() < 1.0
        if s > 1:                                                 # one stage fewer blows it up
            assert rkc1_parameters(s - 1)[2] < h * rho
            w = mode(N // 2)
            for _ in range(50):
                w = rkc1_step(w, h, periodic_laplacian, s - 1)
            assert np.abs(w).max() > 1.0


def test_a_smooth_mode_decays_at_first_order_in_the_step():
    """Over 2 ms the lowest mode decays as exp(λ t); halving the super-step halves the error."""
    lam, t = eigenvalue(1), 2.0
    errors = []
    for n in (8, 16, 32):
        h = t / n
        v = mode(1)
        for _ in range(n):
            v = rkc1_step(v, h, periodic_laplacian, rkc1_stages(h, 4 * D / DX ** 2))
        errors.append(np.abs(v - np.exp(lam * t) * mode(1)).max())
    assert 1.8 < errors[0] / errors[1] < 2.2 and 1.8 < errors[1] / errors[2] < 2.2


def _split(text: str, split_dt: float, split: str = "godunov") -> str:
    return text.replace("precision: float64}", f"precision: float64, split_dt: {split_dt:g}, split: {split}}}")


def test_the_split_converges_at_first_order_in_the_split_step():
    """Activation times on a 3 mm cable against the unsplit run at the substep dt: the error
    grows linearly with Δt_s (its increments double as Δt_s doubles), Strang's below Godunov's."""
    base = cable(0.2, length=3.0, dt=0.005, t_end=9.0)
    ref = run(base)[0]["activation_time"]
    assert np.isfinite(ref).all()
    errors = {}
    for split in ("godunov", "strang"):
        errors[split] = [np.abs(run(_split(base, h, split))[0]["activation_time"] - ref).max()
                         for h in (0.01, 0.02, 0.04)]
        e = errors[split]
        assert e[0] < e[1] < e[2] < 0.2                                    # ms
        assert 1.6 < (e[2] - e[1]) / (e[1] - e[0]) < 2.5
    assert all(s < g for s, g in zip(errors["strang"], errors["godunov"]))


@pytest.mark.parametrize("split", ["godunov", "strang"])
def test_the_compiled_engine_splits_as_numpy_does(split):
    text = _split(cable(0.2, length=2.0, dt=0.01, t_end=6.0), 0.05, split)
    compiled, numpy_ = run(text, "cpu")[0], run(text, "cpu-reference")[0]
    np.testing.assert_allclose(compiled["activation_time"], numpy_["activation_time"], atol=1e-9)
    np.testing.assert_allclose(compiled["V_final"], numpy_["V_final"], atol=1e-9)
    np.testing.assert_allclose(compiled["probe_V"], numpy_["probe_V"], atol=1e-9)


def test_probes_and_a_checkpoint_fall_on_split_steps():
    text = _split(cable(0.2, length=2.0, dt=0.01, t_end=6.0), 0.05)
    straight, summary = run(text)
    assert summary["steps_accepted"] == 120
    np.testing.assert_allclose(np.diff(straight["probe_t"]), 0.1)         # dt_save 0.1: every 2nd split step
    sim = CardiacSimulation(config(text), "cpu")
    sim.engine.advance(45)
    assert sim.engine.t == pytest.approx(2.25)
    arrays, _ = finish(CardiacSimulation.restore(sim.state(), "cpu"))
    np.testing.assert_allclose(arrays["V_final"], straight["V_final"])
    np.testing.assert_allclose(arrays["activation_time"], straight["activation_time"])


def test_a_stimulus_edge_inside_a_split_step_is_applied_at_its_substep():
    """A pulse from 1.03 to 3.03 ms with Δt_s 0.1: the substeps of dt 0.01 carry it, so the
    stimulated end activates as in the unsplit run to within a split step."""
    text = cable(0.2, length=2.0, dt=0.01, t_end=6.0).replace("start: 1,", "start: 1.03,")
    unsplit = run(text)[0]["activation_time"]
    split = run(_split(text, 0.1))[0]["activation_time"]
    assert abs(split[0] - unsplit[0]) < 0.1


def test_split_settings_are_checked_and_named():
    base = cable(0.2, length=2.0, dt=0.02, t_end=6.0)
    with pytest.raises(ConfigError, match=r"solver.split_dt = 0.05 ms is not a whole number of solver.dt = 0.02"):
        config(_split(base, 0.05))
    with pytest.raises(ConfigError, match="needs a fixed-step method.*bs32 is not one"):
        config(_split(base.replace("method: rlfe", "method: bs32"), 0.1))
    with pytest.raises(ConfigError, match="split: must be one of|godunov"):
        config(_split(base, 0.1, "lie"))
    with pytest.raises(ConfigError, match="a single cell has none"):
        config("mesh: {kind: single}\nsolver: {method: rlfe, dt: 0.02, split_dt: 0.1}\n")
    with pytest.raises(ConfigError, match="method midpoint: on CUDA the split step's cell model runs a one-stage"):
        CardiacSimulation(config(_split(base.replace("method: rlfe", "method: midpoint"), 0.1)), "cuda")
    assert Problem.from_config(config(_split(base, 0.1))).step_dt == 0.1


def test_a_split_step_longer_than_the_stable_diffusion_step_is_accepted(tmp_path):
    """The explicit step is refused past the mesh's stable step (here 0.06 ms: the N-version slab
    at dx 0.5 mm with ten times its conductivities); the split's diffusion is not bounded by it
    (the super-step takes more stages)."""
    from app.sims.cardiac import nversion
    path, points = nversion.write_slab(tmp_path, 0.5)
    text = nversion.config_text(path, points, 0.1, 5.0).replace(f"path: {path.name}", f"path: {path}")
    for sigma in (nversion.SIGMA_L, nversion.SIGMA_T):
        text = text.replace(f"{sigma:.6f}", f"{10 * sigma:.6f}")
    with pytest.raises(ConfigError, match="exceeds the stable diffusion step 0.05.* split the diffusion off"):
        config(text.replace("domain: cardiac\n", ""))
    split = config(text.replace("domain: cardiac\n", "").replace("precision: float64}",
                                                                   "precision: float64, split_dt: 0.2}"))
    assert split.solver.split_dt == 0.2
    problem = Problem.from_config(split)
    rho = spectral_bound(problem.mesh.inv_d2, problem.D)
    assert rkc1_stages(0.2, rho) >= 2 and 0.2 * rho > 2


def test_steered_weights_set_the_super_steps_stages_anew():
    """Ablation lowers weights, restoring raises them again: the stage count follows the
    operator the next split step uses (too few stages would blow the diffusion up)."""
    from app.sims.cardiac.engine import CpuTissue
    problem = Problem.from_config(config(_split(cable(0.2, length=2.0, dt=0.01, t_end=1.0), 0.1, "strang")))
    engine = CpuTissue(problem)
    w = problem.mesh.inv_d2.copy()
    rho = spectral_bound(w, problem.D)
    assert engine._diffusion_stages == {0.5: rkc1_stages(0.05, rho), 1.0: rkc1_stages(0.1, rho)}
    engine.set_tissue(16 * w, None)
    assert engine._diffusion_stages[0.5] == rkc1_stages(0.05, 16 * rho) > rkc1_stages(0.05, rho)
    engine.advance(10)
    assert np.isfinite(engine.voltage()).all() and np.abs(engine.voltage()).max() < 200
