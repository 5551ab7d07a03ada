"""The tissue readouts kept in results.npz (pseudo-ECG rows, phase singularities, the V series)
sit on a grid of simulated time: however a run is sliced into advances, they are the same."""

from __future__ import annotations

import numpy as np
import pytest

from app.compute.device import backend_context
from app.sims.cardiac.simulation import CardiacSimulation
from tests.sims.cardiac.helpers import config

READOUT_EVERY, SERIES_EVERY = 0.5, 2.0
GRID_KEYS = ("ecg_t", "ecg", "ps_t", "ps_xyz", "ps_charge", "V_series_t", "V_series")


def broken_wave(method: str, t_end: float = 27.0) -> str:
    """A 6 x 6 mm Hodgkin-Huxley sheet, S1 from the left edge, S2 on the lower left quadrant in
    the S1 wave's tail, two pseudo-ECG electrodes. With RLFE at 0.02 ms the S2 wave breaks
    (phase singularities from about 21 ms); the adaptive method's S2 wave does not."""
    solver = ("{method: rlfe, dt: 0.02, precision: float64}" if method == "rlfe" else
              f"{{method: {method}, dt: 0.01, at: 0.01, rt: 0.01, dt_max: 0.1, precision: float64}}")
    return ("mesh: {kind: sheet, nx: 31, ny: 31, dx_mm: 0.2, electrodes: [[3, 3, 2], [-1, 7, 1]]}\n"
            "model: {file: hodgkin_huxley_squid_axon_model_1952_modified}\n"
            f"protocol: {{t_end: {t_end}, stimuli: ["
            "{name: S1, start: 1, duration: 1, amplitude: -60, region: {kind: rect, x1: 0.3}}, "
            "{name: S2, start: 12, duration: 1, amplitude: -60, region: {kind: rect, x1: 3, y1: 3}}]}\n"
            f"solver: {solver}\n"
            f"output: {{random_probes: 0, probe_cells: [0], readout_every: {READOUT_EVERY}, "
            f"singularity_delay: 3, series_every: {SERIES_EVERY}}}\n")


def sliced_run(text: str, backend: str, slices) -> dict[str, np.ndarray]:
    """The run's results, advanced by the numbers of steps ``slices`` gives in turn."""
    with backend_context(backend):           # CUDA: the device's context in this thread
        sim = CardiacSimulation(config(text), backend)
        while not sim.finished:
            sim._steps = next(slices)
            sim.advance(until=sim.step + sim._steps)
        arrays = sim.results()[0]
        sim.close()
    return arrays


def short_and_long():
    """Slices of 1 to 7 steps (seeded), and slices of 400."""
    rng = np.random.default_rng(3)
    return iter(lambda: int(rng.integers(1, 8)), None), iter(lambda: 400, None)


@pytest.mark.parametrize("backend", ["cpu-reference", "cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("method", ["rlfe", "bs32"])
def test_readouts_do_not_depend_on_the_slices(backend, method):
    """Slices of 1 to 7 steps and of 400 keep the same rows: on the grid for a fixed step, at
    the first accepted step at or past each multiple of the interval for an adaptive one (the
    tracker reads the ECG's V: with the same rows of V it finds the same singularities)."""
    t_end = 27.0 if method == "rlfe" else 12.0
    text = broken_wave(method, t_end)
    short, long = (sliced_run(text, backend, s) for s in short_and_long())
    for key in GRID_KEYS:
        assert np.array_equal(short[key], long[key]), key
    assert np.ptp(short["ecg"]) > 1.0 and (len(short["ps_t"]) > 0 or method != "rlfe")
    grid = np.arange(len(short["ecg_t"])) * READOUT_EVERY
    t = short["ecg_t"]
    assert grid[-1] == pytest.approx(t_end) and np.all(t >= grid * (1 - 1e-9))
    if method == "rlfe":
        np.testing.assert_allclose(t, grid, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(short["V_series_t"], np.arange(0, t_end, SERIES_EVERY), rtol=1e-12, atol=1e-12)
    else:
        assert np.all(t < grid + 0.1)                              # within a step (dt_max)


def test_a_resumed_run_keeps_the_readouts_of_the_whole_run():
    """The checkpoint carries the ECG rows, the tracker's rows and look-back and the V series:
    resumed at 20 ms (inside the S2 wave's break), the run ends with the continued run's
    arrays; a checkpoint whose rows disagree in number is refused."""
    from app.sims.common.checkpoint import CheckpointError
    from tests.sims.common.steering_runs import assert_continue_alike

    sim = CardiacSimulation(config(broken_wave("rlfe")), "cpu")
    sim._steps = 1000
    sim.advance()
    state = sim.state()
    assert len(state["tracker_past_t"]) > 1 and len(state["ecg_t"]) == 41
    resumed = CardiacSimulation.restore(state, "cpu")
    assert_continue_alike(sim, resumed)
    assert len(sim.results()[0]["ps_t"]) > 0
    for key in ("ecg_t", "series_t"):
        with pytest.raises(CheckpointError, match=f"{key}, .* have different lengths"):
            CardiacSimulation.restore({**state, key: state[key][:-1]}, "cpu")


def test_a_kept_voltage_is_a_copy_handed_over_in_float64():
    """The engine offers V from a buffer it reuses (the CUDA snapshots' page-locked memory): the
    grid keeps a copy in V's precision, and hands it over in float64."""
    from app.sims.cardiac.engine import VoltageGrid
    grid = VoltageGrid(0.5)
    buffer = np.array([-80.25, 10.5], np.float32)
    grid.offer(0.48, buffer)                   # not due
    grid.offer(0.5, buffer)
    buffer[:] = 7.0
    (t, v), = grid.take()
    assert t == 0.5 and v.dtype == np.float64 and v.tolist() == [-80.25, 10.5]
    assert grid.take() == []
