"""A tiny domain from outside ``app``: an ensemble of radioactive-decay chains.

Each realization starts with ``atoms`` atoms; over a step ``dt`` every atom survives with
probability ``exp(-rate dt)``, so the survivors are a binomial draw from the last count (the
exact pure-death process sampled at the step times). The mean is ``atoms exp(-rate t)``.
This is the domain CONTRIBUTING.md walks through ("Adding a domain"); its manifest is
``tests.plugins.decay.manifest:DOMAIN``, registered in tests as an entry point would be.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from app.sims.common.config import Document, build, spec
from app.sims.common.simulation import Frame, Simulation, freeze

STEPS_PER_SLICE = 50


@dataclass(frozen=True)
class DecaySettings:
    atoms: int = field(default=1000, metadata=spec(range=(1, 10**9), doc="atoms per realization at t = 0"))
    rate: float = field(default=0.5, metadata=spec(range=(1e-6, 1e6), doc="decay rate", unit="1/s"))
    t_end: float = field(default=4.0, metadata=spec(range=(1e-6, 1e6), doc="end time", unit="s"))
    steps: int = field(default=200, metadata=spec(range=(1, 1_000_000), doc="time steps to t_end"))
    realizations: int = field(default=500, metadata=spec(range=(1, 1_000_000), doc="independent chains"))
    seed: int = field(default=1, metadata=spec(range=(0, 2**63 - 1), doc="random seed"))


@dataclass(frozen=True)
class Config:
    domain: str = "decay"
    name: str = ""
    description: str = ""
    decay: DecaySettings = field(default_factory=DecaySettings)


def load_config(doc: Document) -> Config:
    return build(Config, doc.data, doc)


@dataclass(frozen=True)
class DecayFrame(Frame):
    times: np.ndarray = None      # (k,)
    mean: np.ndarray = None       # (k,) mean survivors
    expected: np.ndarray = None   # (k,) atoms exp(-rate t)


class DecayEngine:
    """The NumPy engine: one survivor count per realization."""

    def __init__(self, settings: DecaySettings):
        self.p_survive = float(np.exp(-settings.rate * settings.t_end / settings.steps))
        self.rng = np.random.default_rng(settings.seed)
        self.counts = np.full(settings.realizations, settings.atoms, np.int64)

    def advance(self, steps: int) -> np.ndarray:
        """``steps`` time steps; the mean count after each."""
        means = np.empty(steps)
        for i in range(steps):
            self.counts = self.rng.binomial(self.counts, self.p_survive)
            means[i] = self.counts.mean()
        return means

    def state(self) -> dict[str, np.ndarray]:
        return {"counts": self.counts.copy()}

    def restore(self, state: Mapping[str, np.ndarray]) -> None:
        self.counts = np.array(state["counts"], np.int64)

    def close(self) -> None:
        pass


class DecaySimulation(Simulation):
    domain = "decay"

    def __init__(self, cfg: Config, backend: str):
        from app.sims.common.registry import DOMAINS

        self.cfg, self.backend = cfg, backend
        s = cfg.decay
        self.engine = DOMAINS["decay"].engine_class(backend)(s)
        self.times = np.linspace(0.0, s.t_end, s.steps + 1)
        self.mean = np.empty(s.steps + 1)
        self.mean[0] = s.atoms
        self.k = 1
        self.wall = 0.0

    @classmethod
    def from_config(cls, cfg: Config, backend: str) -> "DecaySimulation":
        return cls(cfg, backend)

    @property
    def finished(self) -> bool:
        return self.k >= len(self.times)

    def advance(self) -> DecayFrame:
        start = time.perf_counter()
        steps = min(STEPS_PER_SLICE, len(self.times) - self.k)
        self.mean[self.k:self.k + steps] = self.engine.advance(steps)
        self.k += steps
        self.wall += time.perf_counter() - start
        s = self.cfg.decay
        times = self.times[:self.k]
        return DecayFrame(progress=self.k / len(self.times), done=self.finished, wall_seconds=self.wall,
                          throughput=(self.k - 1) * s.realizations / max(self.wall, 1e-9),
                          throughput_unit="chain steps/s", status=f"t = {times[-1]:.3g}",
                          times=freeze(times), mean=freeze(self.mean[:self.k]),
                          expected=freeze(s.atoms * np.exp(-s.rate * times)))

    def state(self) -> dict[str, Any]:
        raise NotImplementedError("the decay example keeps no checkpoints")

    @classmethod
    def restore(cls, state: Mapping[str, Any], backend: str) -> "DecaySimulation":
        raise NotImplementedError("the decay example keeps no checkpoints")

    def results(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        return ({"times": self.times[:self.k], "mean": self.mean[:self.k]},
                {"finished": self.finished, "wall_seconds": self.wall, "backend": self.backend})


Simulation = DecaySimulation
Frame = DecayFrame
