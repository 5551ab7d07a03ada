"""Markov ion-channel models fitted to voltage-clamp data by a genetic algorithm (Ben-Shalom et al. 2012)."""

from app.sims.channel.config import ChannelConfig as Config, load_config
from app.sims.channel.simulation import ChannelFrame as Frame, ChannelSimulation as Simulation

__all__ = ["Config", "Frame", "Simulation", "load_config"]
