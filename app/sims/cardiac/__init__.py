"""Cardiac tissue: the Courtemanche atrial model on a geodesic sphere and on 2D sheets, fixed
and adaptive Rush-Larsen solvers (Garcia-Molla et al. 2014)."""

from app.sims.cardiac.config import CardiacConfig as Config, load_config
from app.sims.cardiac.simulation import CardiacFrame as Frame, CardiacSimulation as Simulation

__all__ = ["Config", "Frame", "Simulation", "load_config"]
