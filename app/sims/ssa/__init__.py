"""Ensemble stochastic simulation (Gillespie SSA), one realization per GPU thread."""

from app.sims.ssa.config import SSAConfig as Config, load_config
from app.sims.ssa.simulation import SSAFrame as Frame, SSASimulation as Simulation

__all__ = ["Config", "Frame", "Simulation", "load_config"]
