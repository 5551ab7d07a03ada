"""A stimulus requested during a run starts a wave from the chosen cells (teaching clicks)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from app.sims.cardiac.simulation import CardiacSimulation
from app.sims.cardiac.stimulate import StimulusRequest, cells_near
from app.sims.common.simulation import find_preset, load_run_config


def quiet_sheet(t_end: float = 45.0):
    """A 6 x 6 mm sheet whose only configured stimulus comes after the end (never fires)."""
    _, cfg = load_run_config(find_preset("cardiac/lesson-spiral-by-hand"))
    late = replace(cfg.protocol.stimuli[0], start=10 * t_end)
    return replace(cfg, mesh=replace(cfg.mesh, nx=15, ny=15, dx_mm=0.4),
                   protocol=replace(cfg.protocol, t_end=t_end, stimuli=[late]),
                   output=replace(cfg.output, probe_cells=[0]))


def run(cfg, stimulate_at: float | None, backend: str = "cpu-reference") -> dict:
    sim = CardiacSimulation.from_config(cfg, backend)
    requested = stimulate_at is None
    while not sim.finished:
        if not requested and sim.engine.t >= stimulate_at:
            cells = StimulusRequest(cell=0)(sim)
            assert 0 in cells and cells.size > 1          # a disc around the clicked corner
            requested = True
        sim._steps = 10                                   # slices of 1 ms
        sim.advance()
    arrays, _ = sim.results()
    sim.close()
    return arrays


def test_a_click_starts_a_wave_that_crosses_the_sheet():
    cfg = quiet_sheet()
    arrays = run(cfg, stimulate_at=5.0)
    act = arrays["activation_time"]
    # the kicked disc jumps past the detection threshold within the kick (no crossing to see
    # there); its first cell fires a full upstroke, and every other cell activates by conduction
    t, v = arrays["probe_t"], arrays["probe_V"][:, 0]
    assert v[t < 5.0].max() < -70 and v[(t > 5.0) & (t < 8.0)].max() > 10.0
    positions = np.stack(np.divmod(np.arange(act.size), cfg.mesh.nx), 1) * cfg.mesh.dx_mm
    distance = np.hypot(*positions.T)
    outside = distance > 1.5
    assert np.all(np.isfinite(act[outside])) and np.all(act[outside] > 5.0)
    far = np.argmax(distance)                            # the opposite corner, 7.9 mm away
    assert act[far] > 15.0 and act[far] == act[outside].max()   # reached last, by conduction


def test_without_the_click_nothing_fires():
    act = run(quiet_sheet(20.0), stimulate_at=None)["activation_time"]
    assert not np.isfinite(act).any()


def test_cells_near_picks_a_disc_or_the_nearest_cell():
    pos = np.stack(np.meshgrid(np.arange(5.0), np.arange(5.0)), -1).reshape(-1, 2)
    pos = np.column_stack([pos, np.zeros(len(pos))])
    assert sorted(cells_near(pos, pos[12], 1.0)) == [7, 11, 12, 13, 17]
    assert list(cells_near(pos, [0.2, 0.1, 0.0], 0.01)) == [0]


def test_a_cell_outside_the_mesh_is_refused():
    sim = CardiacSimulation.from_config(quiet_sheet(5.0), "cpu-reference")
    with pytest.raises(ValueError, match="outside"):
        StimulusRequest(cell=10_000)(sim)
    sim.close()
