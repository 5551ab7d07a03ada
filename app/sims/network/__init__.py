"""A developing cortical culture: LIF neurons, Tsodyks-Markram synapses, neurite growth."""

from app.sims.network.config import NetworkConfig as Config, load_config
from app.sims.network.simulation import NetworkFrame as Frame, NetworkSimulation as Simulation

__all__ = ["Config", "Frame", "Simulation", "load_config"]
