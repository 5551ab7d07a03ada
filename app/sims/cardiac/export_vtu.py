"""``python -m app export RUN --to vtu``: a cardiac run's tissue as a ParaView time series."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from app.sims.cardiac.readouts import conduction_velocity, repolarisation, write_vtu_series


def export_run(folder: Path, out: Path) -> list[Path]:
    """The run's tissue as a ParaView time series: V at
    every recorded snapshot (``V_series``; else the final V) with the activation,
    repolarisation, APD90 and conduction-velocity maps in every file."""
    from app.sims.cardiac.engine import build_mesh
    from app.sims.common.config import ConfigError
    from app.sims.common.export import load_results, load_run

    cfg = load_run(folder)
    arrays = load_results(folder)
    mesh = build_mesh(cfg)
    if mesh.elements is None:
        raise ConfigError(f"{folder}: a single-cell run has no tissue to write as VTU")
    if "V_series" in arrays and len(arrays["V_series"]):
        times, v = arrays["V_series_t"], arrays["V_series"]
    else:
        times, v = np.array([float(cfg.protocol.t_end)]), arrays["V_final"][None]
    act, apd = arrays["activation_time"], arrays["apd90"]
    maps = {"activation_ms": act, "apd90_ms": apd, "repolarisation_ms": repolarisation(act, apd),
            "cv_mm_per_ms": conduction_velocity(mesh, act)}
    return write_vtu_series(out, mesh, times, {"V_mV": v}, maps)
