"""A growing epidermis: subcellular-element cells with a Notch/Ovol gene network, growth,
division and stratification (Christley et al. 2010)."""

from app.sims.epidermis.config import EpidermisConfig as Config, load_config
from app.sims.epidermis.frame import EpidermisFrame as Frame
from app.sims.epidermis.simulation import EpidermisSimulation as Simulation

__all__ = ["Config", "Frame", "Simulation", "load_config"]
