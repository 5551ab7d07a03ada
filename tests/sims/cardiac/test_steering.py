"""Steering a cardiac tissue while it runs: an ablated region stops activating, painted
parameters and stimuli replay bit for bit from config.yaml, and checkpoints carry them."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from app.sims.cardiac.model import config_model
from app.sims.cardiac.simulation import CardiacSimulation
from app.sims.common.config import ConfigError
from app.sims.common.session import Session
from app.sims.common.simulation import find_preset, load_run_config
from tests.sims.common.steering_runs import assert_continue_alike, assert_same_arrays, replay, run_steered

ACH = "acetylcholine_dependent_K_current.ACh"
CORNER = {"kind": "brush", "centre": [0.0, 0.0], "radius": 1.0}
FAR = {"kind": "brush", "centre": [5.6, 5.6], "radius": 1.6}       # the opposite corner's disc


def quiet_sheet(t_end: float = 40.0, paintable: bool = False):
    """A 6 x 6 mm sheet whose configured stimulus never fires: only steered stimuli act (rotor
    cores tracked every millisecond, as results compared bit for bit)."""
    domain, cfg = load_run_config(find_preset("cardiac/lesson-spiral-by-hand"))
    late = replace(cfg.protocol.stimuli[0], start=10 * t_end)
    model = replace(cfg.model, paintable=[ACH]) if paintable else cfg.model
    return domain, replace(cfg, mesh=replace(cfg.mesh, nx=15, ny=15, dx_mm=0.4), model=model,
                           protocol=replace(cfg.protocol, t_end=t_end, stimuli=[late]),
                           output=replace(cfg.output, probe_cells=[0, 224], snapshot_interval=1.0))


def distance(cfg, point) -> np.ndarray:
    """Distance (mm) of each cell of the sheet from ``point``."""
    xy = np.stack(np.divmod(np.arange(cfg.mesh.nx * cfg.mesh.ny), cfg.mesh.nx)[::-1], 1) * cfg.mesh.dx_mm
    return np.hypot(*(xy - point).T)


def test_an_ablated_region_stops_activating():
    """A wave from one corner activates every cell but the scar painted on the other corner;
    without the scar those cells activate too (the kicked disc itself jumps past the threshold
    within the kick: no crossing to see there)."""
    domain, cfg = quiet_sheet()
    far = distance(cfg, 5.6) <= 1.5
    between = (distance(cfg, 5.6) > 1.7) & (distance(cfg, 0.0) > 1.5)
    scarred = run_steered(domain, cfg, "cpu-reference", [(0, "ablate", None, FAR), (0, "stimulate", -40.0, CORNER)])
    act = scarred.arrays["activation_time"]
    assert not np.isfinite(act[far]).any()
    assert np.isfinite(act[between]).all()
    healthy = run_steered(domain, cfg, "cpu-reference", [(0, "stimulate", -40.0, CORNER)])
    assert np.isfinite(healthy.arrays["activation_time"][far]).all()


@pytest.mark.parametrize("backend", ["cpu-reference", "cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_a_steered_tissue_replays_bit_for_bit(backend):
    domain, cfg = quiet_sheet(paintable=True)
    plan = [(0, f"model.{ACH}", 0.1, {"kind": "indices", "indices": list(range(0, 225, 2))}),
            (1, "stimulate", -40.0, CORNER), (2, "ablate", None, FAR), (2, f"scale.{ACH}", 4.0, CORNER),
            (3, "restore", None, FAR)]
    live = run_steered(domain, cfg, backend, plan)
    assert [e.key for e in live.events] == ["model." + ACH, "stimulate", "ablate", "scale." + ACH, "restore"]
    assert live.events[0].old == pytest.approx(0.03) and live.events[3].old is not None
    again = replay(live)
    assert again.events == live.events
    assert_same_arrays(live.arrays, again.arrays)


def test_the_scar_and_painted_values_survive_a_checkpoint():
    domain, cfg = quiet_sheet(10.0, paintable=True)
    sim = CardiacSimulation.from_config(cfg, "cpu-reference")
    sim.steer("stimulate", -40.0, CORNER)
    sim.steer("ablate", None, FAR)
    sim.steer(f"model.{ACH}", 0.2, CORNER)
    sim._steps = 20
    sim.advance()
    resumed = CardiacSimulation.restore(sim.state(), "cpu-reference")
    assert resumed.steered == sim.steered
    assert np.array_equal(resumed.ablated, sim.ablated) and resumed.ablated.sum() > 0
    assert np.array_equal(resumed.problem.param_field, sim.problem.param_field)
    assert_continue_alike(sim, resumed)


def test_a_parameter_not_kept_per_cell_needs_a_restart():
    domain, cfg = quiet_sheet()
    session = Session(domain, cfg, "cpu-reference")
    with pytest.raises(ConfigError, match=rf"'model\.{ACH}' needs a restart"):
        session.steer(f"model.{ACH}", 0.1, CORNER)
    with pytest.raises(ConfigError, match="'ablate' needs a region"):
        session.steer("ablate", None)


def test_a_scar_band_blocks_conduction_on_a_file_mesh(tmp_path):
    """A 3 x 0.2 mm strip of triangles read from a file (finite-element weights): a wave from
    its left edge reaches the right end, but not across a scar painted over its width, nor
    across a 1.2-mm band where the sodium conductance is scaled to 0 (no upstroke there); a
    0.7-mm band of it the wave crosses electrotonically, late."""
    import meshio

    nx, ny, h = 31, 3, 0.1
    x, y = np.meshgrid(np.arange(nx) * h, np.arange(ny) * h)
    points = np.column_stack([x.ravel(), y.ravel(), np.zeros(nx * ny)])
    idx = np.arange(nx * ny).reshape(ny, nx)
    a, b, c, d = idx[:-1, :-1].ravel(), idx[:-1, 1:].ravel(), idx[1:, :-1].ravel(), idx[1:, 1:].ravel()
    meshio.write(tmp_path / "strip.vtu", meshio.Mesh(points, [("triangle", np.concatenate(
        [np.stack([a, b, d], 1), np.stack([a, d, c], 1)]))]))
    domain, cfg = load_run_config(
        f"domain: cardiac\nmesh: {{kind: file, path: {tmp_path / 'strip.vtu'}, "
        "conductivity: {along: 0.1, across: 0.1}}\n"
        "model: {paintable: [fast_sodium_current.g_Na]}\n"
        f"protocol: {{t_end: 20, stimuli: [{{start: 1, duration: 2, amplitude: -60, "
        f"region: {{kind: cells, cells: {idx[:, :5].ravel().tolist()}}}}}]}}\n"
        "solver: {method: rlfe, dt: 0.02, precision: float64}\n"
        "output: {random_probes: 0, probe_cells: [0], dt_save: 1.0}\n", text=True)
    right = idx[:, -3:].ravel()
    scar = {"kind": "brush", "centre": [1.5, 0.1], "radius": 0.35}
    healthy = run_steered(domain, cfg, "cpu-reference", [])
    assert np.isfinite(healthy.arrays["activation_time"][right]).all()
    scarred = run_steered(domain, cfg, "cpu-reference", [(0, "ablate", None, scar)])
    assert not np.isfinite(scarred.arrays["activation_time"][right]).any()
    no_sodium = "scale.fast_sodium_current.g_Na"
    blocked = run_steered(domain, cfg, "cpu-reference", [(0, no_sodium, 0.0, {**scar, "radius": 0.6})])
    assert not np.isfinite(blocked.arrays["activation_time"][right]).any()
    bridged = run_steered(domain, cfg, "cpu-reference", [(0, no_sodium, 0.0, scar)])      # a narrower band
    late, on_time = bridged.arrays["activation_time"][right], healthy.arrays["activation_time"][right]
    assert np.isfinite(late).all() and (late > on_time + 1.0).all()     # crossed electrotonically, later


GKR = "rapid_delayed_rectifier_K_current.g_Kr"


def ikr_sheet(n: int = 11, t_end: float = 450.0):
    """A quiet n x n sheet without ACh (IKr shapes its repolarisation), IKr paintable."""
    domain, cfg = quiet_sheet(t_end)
    return domain, replace(cfg, mesh=replace(cfg.mesh, nx=n, ny=n),
                           model=replace(cfg.model, paintable=[GKR], parameters={ACH: 0.0}),
                           output=replace(cfg.output, probe_cells=[0]))


def single_cell_apd90(domain, cfg, g_kr: float) -> float:
    """APD90 (ms) of one cell of the sheet's model with IKr's conductance ``g_kr``, paced once."""
    from app.sims.cardiac.config import Region

    stimulus = replace(cfg.protocol.stimuli[0], start=1.0, region=Region(kind="all"))
    single = replace(cfg, mesh=replace(cfg.mesh, kind="single"),
                     model=replace(cfg.model, paintable=[], parameters={**cfg.model.parameters, GKR: g_kr}),
                     protocol=replace(cfg.protocol, stimuli=[stimulus]))
    return float(run_steered(domain, single, "cpu-reference", []).arrays["apd90"][0])


def test_scaling_ikr_down_in_a_region_lengthens_its_action_potentials():
    """IKr at a tenth of its configured conductance over the sheet's upper triangle (x > y), a
    wave from the corner on the diagonal: by symmetry every cell and its mirror across the
    diagonal would repolarise alike; each scaled cell's APD90 exceeds its mirror's, by no more
    than a lone cell's prolongation at that block (coupling to unscaled cells only shortens it)."""
    domain, cfg = ikr_sheet()
    n = cfg.mesh.nx
    row, col = np.divmod(np.arange(n * n), n)
    upper = np.flatnonzero(col > row)
    run = run_steered(domain, cfg, "cpu-reference", [
        (0, f"scale.{GKR}", 0.1, {"kind": "indices", "indices": upper.tolist()}),
        (0, "stimulate", -40.0, CORNER)])
    assert run.events[0].old == 1.0
    apd = run.arrays["apd90"].reshape(n, n)
    longer = (apd - apd.T).ravel()[upper]
    g_kr = next(p.default for p in config_model(cfg.model).parameters if p.qname == GKR)
    lone = single_cell_apd90(domain, cfg, 0.1 * g_kr) - single_cell_apd90(domain, cfg, g_kr)
    measured = np.isfinite(longer)
    assert measured.sum() > 0.9 * upper.size
    assert (longer[measured] > 0).all() and (longer[measured] < lone).all(), (longer, lone)


def test_scaling_is_painting_the_factor_times_the_configured_value():
    """One code path: a factor brushed over a region runs bit for bit like the absolute value
    (factor x the configured value) brushed there; a second stroke over the spot does not
    compound, and 'restore' brings the configured value back."""
    domain, cfg = quiet_sheet(5.0, paintable=True)
    sim = CardiacSimulation.from_config(cfg, "cpu-reference")
    k = sim.problem.model.parameter_names.index(ACH)
    configured = float(sim.problem.param_field[k, 0])
    scaled = run_steered(domain, cfg, "cpu-reference", [(0, f"scale.{ACH}", 0.5, FAR), (0, "stimulate", -40.0, FAR)])
    painted = run_steered(domain, cfg, "cpu-reference", [(0, f"model.{ACH}", 0.5 * configured, FAR),
                                                       (0, "stimulate", -40.0, FAR)])
    assert_same_arrays(scaled.arrays, painted.arrays)
    sim.steer(f"scale.{ACH}", 0.5, FAR)
    second = sim.steer(f"scale.{ACH}", 0.5, FAR)
    inside = sim._cells(FAR)
    assert second.old == 0.5 and np.all(sim.problem.param_field[k, inside] == 0.5 * configured)
    sim.steer("restore", None, FAR)
    assert np.all(sim.problem.param_field[k] == configured)
