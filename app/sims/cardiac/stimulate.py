"""Stimulate chosen cells of a running cardiac simulation (teaching: start a spiral by hand).

A stimulus is the steering gesture ``stimulate`` (``Session.steer('stimulate', amplitude,
brush)``, recorded and replayed like every change): it injects the charge of a 2-ms pulse
(``amplitude`` pA/pF, negative depolarising as in the run configs) at once: with Cm = 1 µF/cm²
the membrane voltage of each chosen cell moves by ``-amplitude * duration`` mV, the
operator-split integral of the pulse. The engine is touched only through its checkpoint (the
state array's first row is V), so it works on the NumPy, compiled and CUDA engines.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

log = logging.getLogger(__name__)

STATE_KEYS = ("y", "cuda_y")      # the state array of the CPU engines / of the CUDA engine
DEFAULT_RADIUS_MM = 1.0           # a disc of cells: one cell alone is drained by its neighbours


def cells_near(positions: np.ndarray, point: np.ndarray, radius_mm: float) -> np.ndarray:
    """Indices of the cells within ``radius_mm`` of ``point`` (at least the nearest one)."""
    d = np.linalg.norm(np.asarray(positions, float) - np.asarray(point, float), axis=1)
    near = np.flatnonzero(d <= radius_mm)
    return near if near.size else np.array([int(np.argmin(d))])


def click_region(positions: np.ndarray, cell: int, radius_mm: float = DEFAULT_RADIUS_MM) -> dict:
    """The brush of a click on cell ``cell``: a disc of ``radius_mm`` around it."""
    if not 0 <= cell < len(positions):
        raise ValueError(f"cell {cell} is outside 0..{len(positions) - 1}")
    return {"kind": "brush", "centre": [float(x) for x in positions[cell]], "radius": float(radius_mm)}


@dataclass(frozen=True)
class StimulusRequest:
    """A pulse into the cells within ``radius_mm`` of cell ``cell`` (the clicked one), as the
    steering gesture ``stimulate`` of a simulation driven directly (tests, lessons)."""

    cell: int
    amplitude: float = -40.0        # pA/pF, as in the presets' S1/S2
    radius_mm: float = DEFAULT_RADIUS_MM

    def __call__(self, sim) -> np.ndarray:
        """Apply to ``sim`` (a CardiacSimulation, in its owning thread); returns the cells."""
        region = click_region(sim.problem.mesh.positions, self.cell, self.radius_mm)
        sim.steer("stimulate", self.amplitude, region)
        cells = np.flatnonzero(sim._cells(region))
        log.info("stimulus at t = %.2f ms: %d cells around cell %d", sim.engine.t, cells.size, self.cell)
        return cells


def kick_voltage(engine, cells: np.ndarray, delta_mv: float) -> None:
    """Add ``delta_mv`` to the membrane voltage of ``cells`` through the engine's checkpoint."""
    state = dict(engine.state())
    key = next((k for k in STATE_KEYS if k in state), None)
    if key is None:
        raise RuntimeError("this engine's checkpoint has no state array to stimulate")
    y = np.array(state[key], copy=True)
    y[0, cells] += delta_mv
    state[key] = y
    engine.restore(state)
