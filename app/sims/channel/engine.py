"""The GA engines: a population, its scores, and one generation at a time.

Every engine also scores and simulates any batch of parameter rows (``evaluate_params``,
``simulate``): what CMA-ES, the local refinement and the MCMC chains call.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from app.sims.channel import cpu, ga
from app.sims.channel.model import ChannelModel
from app.sims.channel.protocol import Protocol
from app.sims.common.engine import EngineBase


class CpuGA(EngineBase, renamed={"get_population": "state", "set_population": "restore", "breed": "advance"}):
    """Population and GA operators in NumPy float64 (the reference; small populations)."""

    def __init__(self, model: ChannelModel, protocol: Protocol, target: np.ndarray, size: int, seed: int,
                 weights: np.ndarray | None = None):
        self.model, self.protocol, self.target, self.seed = model, protocol, target, seed
        self.weights = None if weights is None else np.asarray(weights, np.float64)
        self.population = ga.initial_population(seed, size, model.lower, model.upper)
        self.scores = np.full(size, np.inf)
        self.chunk = max(16, 2_000_000 // max(protocol.n_points, 1))

    @property
    def size(self) -> int:
        return len(self.population)

    def evaluate(self) -> np.ndarray:
        """Score every individual; returns the scores (host copy)."""
        self.scores = self.evaluate_params(self.population)
        return self.scores

    def evaluate_params(self, params: np.ndarray) -> np.ndarray:
        """chi^2 (k,) of parameter rows (k, P)."""
        return cpu.evaluate(self.model, self.protocol, params, self.target, self.chunk, self.weights)

    def simulate(self, params: np.ndarray) -> np.ndarray:
        """Currents (k, n_points) of parameter rows (k, P), float64."""
        return cpu.simulate(self.model, self.protocol, params)

    def advance(self, generation: int, best: int, crossover: float, mutation: float,
                creep: float = 0.0, creep_fraction: float = 0.0) -> None:
        """Breed the next generation from the scored one (elitism keeps ``best``)."""
        self.population = ga.breed(self.population, self.scores, best, generation, self.seed,
                                   self.model.lower, self.model.upper, crossover, mutation,
                                   creep, creep_fraction)

    def set_bounds(self, lower: np.ndarray, upper: np.ndarray) -> None:
        """Steering: the search box the next generations breed in (lower = upper fixes a parameter)."""
        self.model = replace(self.model, lower=np.asarray(lower, np.float64), upper=np.asarray(upper, np.float64))

    def traces(self, index: int) -> np.ndarray:
        """Simulated currents of one individual (float64)."""
        return self.simulate(self.population[index][None, :])[0]

    def median(self) -> float:
        return float(np.median(self.scores))

    def individual(self, index: int) -> np.ndarray:
        return self.population[index].copy()

    def state(self) -> dict[str, np.ndarray]:
        return {"population": self.population.copy()}

    def restore(self, state: dict[str, np.ndarray]) -> None:
        self.population = np.array(state["population"], np.float64)
