"""A run's maps and V series, exported as a ParaView time series (.pvd and .vtu through meshio)."""

import numpy as np
import pytest


def test_a_run_writes_maps_and_a_vtu_series(tmp_path):
    meshio = pytest.importorskip("meshio")
    from app.sims.common.export import export_run
    from app.sims.common.session import run_headless
    from app.sims.common.simulation import DOMAINS

    from .helpers import config
    cfg = config("mesh: {kind: sheet, nx: 16, ny: 4, dx_mm: 0.2}\n"
                 "protocol: {t_end: 10, stimuli: [{start: 1, duration: 2, amplitude: -40, region: {kind: rect, x1: 0.3}}]}\n"
                 "solver: {method: rlfe, dt: 0.02, precision: float64}\n"
                 "output: {random_probes: 0, probe_cells: [0], dt_save: 1.0, snapshot_interval: 1.0, series_every: 2.0}\n")
    session = run_headless(DOMAINS["cardiac"], cfg, "cpu-reference", tmp_path / "run")
    arrays = session.arrays
    assert arrays["V_series"].shape[1] == 64
    np.testing.assert_allclose(arrays["V_series_t"], [0, 2, 4, 6, 8, 10], atol=1e-9)   # fixed steps stop there
    np.testing.assert_allclose(arrays["repolarisation_time"], arrays["activation_time"] + arrays["apd90"])
    files = export_run(tmp_path / "run", "vtu")
    assert files[0].suffix == ".pvd" and len(files) == 1 + len(arrays["V_series_t"])
    last = meshio.read(files[-1])
    np.testing.assert_allclose(last.point_data["V_mV"], arrays["V_series"][-1], rtol=1e-6)
    np.testing.assert_allclose(last.point_data["activation_ms"], arrays["activation_time"])
    assert last.point_data["cv_mm_per_ms"].shape == (64, 3)
    assert f'file="{files[1].name}"' in files[0].read_text()
