"""The N-version monodomain benchmark (Niederer et al. 2011, Phil Trans R Soc A 369:4331):
a 20 × 7 × 3 mm slab, fibres along the 20 mm axis, ten Tusscher 2006 epicardial cells, the
paper's bidomain conductivities (intracellular 0.17 / 0.019, extracellular 0.62 / 0.24 S/m along /
across) as their monodomain harmonic means σ = σ_i σ_e / (σ_i + σ_e) = 0.1334 / 0.0176 S/m
(= mS/mm), χ = 140 /mm, Cm = 0.01 µF/mm², a 2 ms stimulus of 50,000 µA/cm³ in the 1.5 mm cube
at the corner (0, 0, 0); activation (V crossing 0 mV) read at the corners P1–P8 and the centre P9.

The points and the consensus (mean ± SD over the eleven codes at dt 0.01 ms, from the paper's
supplementary tables) are numbered by distance from the stimulus corner: P1 the corner, P2 the
far end of the 20 mm edge, P3 of the 3 mm edge, P5 of the 7 mm edge, P9 the centre, P8 the
opposite corner.

The slab is written in openCARP's text format (fibres and sheets per element) and run through
the ``mesh: {kind: file}`` path like any user mesh.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from app.sims.cardiac.shapes import structured_slab
from app.sims.cardiac.mesh_io import write_opencarp

SIZE_MM = (20.0, 7.0, 3.0)
POINTS = {"P1": (0, 0, 0), "P2": (20, 0, 0), "P3": (0, 0, 3), "P4": (20, 0, 3), "P5": (0, 7, 0),
          "P6": (20, 7, 0), "P7": (0, 7, 3), "P8": (20, 7, 3), "P9": (10, 3.5, 1.5)}
SIGMA_L = 0.17 * 0.62 / (0.17 + 0.62)      # mS/mm
SIGMA_T = 0.019 * 0.24 / (0.019 + 0.24)
# consensus activation times (ms): mean, SD over the codes, per dx (mm), dt 0.01 ms
CONSENSUS = {
    0.1: {"P1": (1.04, 0.38), "P2": (32.23, 0.56), "P3": (8.95, 0.56), "P4": (33.70, 1.00),
          "P5": (29.76, 1.65), "P6": (43.97, 2.83), "P7": (31.32, 2.12), "P8": (44.93, 3.22),
          "P9": (20.50, 1.30)},
    0.2: {"P1": (1.05, 0.40), "P2": (34.43, 1.48), "P3": (11.29, 1.60), "P4": (36.67, 2.98),
          "P5": (38.56, 5.00), "P6": (52.56, 7.10), "P7": (40.52, 6.08), "P8": (53.81, 8.17),
          "P9": (24.58, 3.76)},
    0.5: {"P1": (1.04, 0.38), "P2": (47.73, 8.33), "P3": (27.37, 11.04), "P4": (54.57, 11.97),
          "P5": (105.66, 33.36), "P6": (117.34, 34.83), "P7": (106.80, 35.08), "P8": (117.86, 36.11),
          "P9": (55.17, 17.40)},
}
STIM_CUBE_MM = 1.5
# 50,000 µA/cm³ over χ Cm = 1400 /cm × 1 µF/cm² = 35.714 µA/µF = pA/pF (negative: inward)
STIM_AMPLITUDE = -50000.0 / (140.0 * 10 * 1.0)


def write_slab(folder: str | Path, dx: float) -> tuple[Path, np.ndarray]:
    """The slab at spacing ``dx`` in openCARP's format (``slab_<dx>.pts/.elem/.lon``, fibres and
    sheets per element); returns the ``.elem`` path and the nodes (mm)."""
    raw = structured_slab(*SIZE_MM, dx)
    return write_opencarp(Path(folder) / f"slab_{dx:g}", raw), raw.points


def stimulus_cells(points: np.ndarray) -> list[int]:
    """Nodes in the stimulus cube (1.5 mm at the origin, edges included)."""
    inside = (points <= STIM_CUBE_MM + 1e-9).all(axis=1)
    return np.flatnonzero(inside).tolist()


def config_text(mesh_path: Path, points: np.ndarray, dt: float, t_end: float, method: str = "rlfe",
                precision: str = "float64", split_dt: float = 0.0, split: str = "strang") -> str:
    """The benchmark's config; ``split_dt`` > 0 splits the diffusion off (:mod:`.splitting`)."""
    probes = point_nodes(points)
    splitting = f", split_dt: {split_dt:g}, split: {split}" if split_dt > 0 else ""
    return (f"domain: cardiac\nname: N-version benchmark dx {mesh_path.stem}\n"
            f"mesh: {{kind: file, path: {mesh_path.name}, conductivity: {{along: {SIGMA_L:.6f}, "
            f"across: {SIGMA_T:.6f}, sheet: {SIGMA_T:.6f}}}, chi: 140, cm: 0.01}}\n"
            "model: {file: ten_tusscher_model_2006_epi}\n"
            f"protocol: {{t_end: {t_end:g}, stimuli: [{{name: S1, start: 0, duration: 2, "
            f"amplitude: {STIM_AMPLITUDE:.6f}, region: {{kind: cells, cells: {stimulus_cells(points)}}}}}]}}\n"
            f"solver: {{method: {method}, dt: {dt:g}, precision: {precision}{splitting}}}\n"
            f"output: {{random_probes: 0, probe_cells: {list(probes.values())}, dt_save: 1.0, "
            "activation_threshold: 0.0}\n")


def point_nodes(points: np.ndarray) -> dict[str, int]:
    """The node nearest each benchmark point."""
    return {k: int(np.argmin(np.linalg.norm(points - np.asarray(p, float), axis=1))) for k, p in POINTS.items()}


def activation_at_points(activation: np.ndarray, points: np.ndarray) -> dict[str, float]:
    return {k: float(activation[i]) for k, i in point_nodes(points).items()}


def run(folder: str | Path, dx: float, dt: float = 0.05, t_end: float = 150.0, backend: str = "cpu",
        precision: str = "float64", split_dt: float = 0.0, split: str = "strang") -> dict:
    """Write the slab and its config into ``folder``, run, and return the activation times at
    P1–P9 (ms), the mesh quality and the run's wall time (``split_dt``: see :func:`config_text`)."""
    from app.sims.cardiac.config import load_config
    from app.sims.cardiac.simulation import CardiacSimulation
    from app.sims.common.config import parse_yaml

    folder = Path(folder)
    mesh_path, points = write_slab(folder, dx)
    cfg_path = folder / f"nversion_{dx:g}.yaml"
    cfg_path.write_text(config_text(mesh_path, points, dt, t_end, precision=precision, split_dt=split_dt,
                                    split=split))
    cfg = load_config(parse_yaml(cfg_path.read_text(), str(cfg_path)))
    sim = CardiacSimulation(cfg, backend)
    while not sim.finished:
        sim.advance()
    arrays, summary = sim.results()
    sim.close()
    return {"dx_mm": dx, "dt_ms": dt, "split_dt_ms": split_dt, "split": split if split_dt > 0 else "",
            "backend": backend, "nodes": int(len(points)),
            "activation_ms": activation_at_points(arrays["activation_time"], points),
            "mesh_quality": summary.get("mesh_quality"), "wall_seconds": summary["wall_seconds"],
            "stopped": summary.get("stopped")}
