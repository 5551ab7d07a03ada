"""Small cultures for the network tests."""

from __future__ import annotations

import dataclasses

import numpy as np

from app.sims.network.config import NetworkConfig
from app.sims.network.cpu import CpuEngine
from app.sims.network.model import Constants, build_culture


def config(**sections) -> NetworkConfig:
    """The default config with sections replaced by keyword dicts, e.g. culture={'width': 4}."""
    cfg = NetworkConfig()
    for name, values in sections.items():
        cfg = dataclasses.replace(cfg, **{name: dataclasses.replace(getattr(cfg, name), **values)})
    return cfg


def engine(cfg: NetworkConfig, radius: float | None = None, culture=None, cls=CpuEngine):
    culture = culture or build_culture(cfg)
    start = cfg.growth.start_radius if radius is None else radius
    return cls(culture, Constants.from_config(cfg), cfg.growth, cfg.run.seed, start)


def spikes_per_neuron(neurons: np.ndarray, n: int) -> np.ndarray:
    return np.bincount(neurons, minlength=n)
