"""Channel fitting as a Simulation: one GA generation per slice, live convergence frames."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any, Mapping

import numpy as np

from app.sims.channel.config import ChannelConfig, GASettings, load_config
from app.sims.common.config import ConfigError, build, dump_yaml, parse_yaml
from app.sims.common.engine import config_from_state, config_state, engine_part, engine_state, make_engine
from app.sims.common.simulation import Frame, Simulation, freeze


@dataclass(frozen=True)
class ChannelFrame(Frame):
    """Convergence so far and the best fit against the data."""

    generation: int = 0
    param_names: tuple[str, ...] = ()
    history_best: np.ndarray = None        # (g,) best chi^2 per generation
    history_median: np.ndarray = None      # (g,)
    history_wall: np.ndarray = None        # (g,) seconds since the start
    history_params: np.ndarray = None      # (g, P) best parameters, normalised to their ranges
    best_params: np.ndarray = None         # (P,)
    best_chi2: float = np.inf
    best_traces: np.ndarray = None         # (n_points,) pA
    target: np.ndarray = None              # (n_points,) pA
    times: np.ndarray = None               # (n_points,) ms from each sweep's start
    offsets: np.ndarray = None             # (sweeps + 1,) sweep boundaries in the flat vectors
    sweep_labels: tuple[str, ...] = ()
    evaluations_per_second: float = 0.0


class ChannelSimulation(Simulation):
    """GA fit of a Markov channel model on the CPU or CUDA engine."""

    domain = "channel"

    def __init__(self, cfg: ChannelConfig, backend: str):
        self.cfg, self.backend = cfg, backend
        self.model = cfg.model_()
        self.protocol = cfg.protocol()
        self.target = cfg.target(self.model, self.protocol)
        self.times = np.concatenate([s.times() for s in self.protocol.sweeps])
        self.settings: GASettings = cfg.ga
        start = time.perf_counter()
        self.engine = make_engine("channel", backend, self.model, self.protocol, self.target,
                                  cfg.ga.population, cfg.ga.seed)
        # first-use compile (or cache load) of the compiled CPU engine, for the status and summary
        self.compile_seconds = self.engine.compile_seconds
        self.setup_seconds = time.perf_counter() - start
        self.generation = 0
        self.best_history: list[float] = []
        self.median_history: list[float] = []
        self.wall_history: list[float] = []
        self.param_history: list[np.ndarray] = []
        self.wall = 0.0
        self.evaluations = 0
        self.best_index = 0
        self.best_params = np.full(self.model.n_params, np.nan)
        self.best_traces = np.zeros_like(self.target)
        self._score()

    @classmethod
    def from_config(cls, cfg: ChannelConfig, backend: str) -> "ChannelSimulation":
        return cls(cfg, backend)

    # ---- the GA loop -------------------------------------------------------------------
    @property
    def best_chi2(self) -> float:
        return self.best_history[-1] if self.best_history else np.inf

    @property
    def finished(self) -> bool:
        return (self.generation >= self.settings.generations
                or (self.best_history and self.best_chi2 <= self.settings.chi2_threshold))

    def _score(self) -> None:
        """Evaluate, then record the best, the median and (when it changed) the best fit."""
        start = time.perf_counter()
        scores = self.engine.evaluate()
        self.evaluations += len(scores)
        self.best_index = int(np.argmin(scores))
        best = float(scores[self.best_index])
        params = self.engine.individual(self.best_index)
        if not np.array_equal(params, self.best_params):
            self.best_params = params
            self.best_traces = self.engine.traces(self.best_index)
        self.best_history.append(best)
        self.median_history.append(self.engine.median())
        self.wall += time.perf_counter() - start
        self.wall_history.append(self.wall)
        self.param_history.append((params - self.model.lower) / (self.model.upper - self.model.lower))

    def advance(self) -> ChannelFrame:
        if not self.finished:
            start = time.perf_counter()
            s = self.settings
            self.engine.advance(self.generation, self.best_index, s.crossover, s.mutation,
                              s.creep, s.creep_fraction)
            self.wall += time.perf_counter() - start
            self.generation += 1
            self._score()
        return self.frame()

    def _compile_note(self) -> str:
        """The compiled engine's first-use compile (or cache load) time for the status bar."""
        if self.compile_seconds < 0.05:
            return ""
        return f", compiled engine ready in {self.compile_seconds:.1f} s (compile or cache load)"

    def frame(self) -> ChannelFrame:
        rate = self.evaluations / self.wall if self.wall else 0.0
        return ChannelFrame(
            progress=min(self.generation / self.settings.generations, 1.0), done=bool(self.finished),
            wall_seconds=self.wall, throughput=rate,
            throughput_unit="evaluations/s",
            status=f"generation {self.generation}, best chi2 {self.best_chi2:.4g}" + self._compile_note(),
            generation=self.generation, param_names=self.model.param_names,
            history_best=freeze(np.array(self.best_history)),
            history_median=freeze(np.array(self.median_history)),
            history_wall=freeze(np.array(self.wall_history)),
            history_params=freeze(np.array(self.param_history)),
            best_params=freeze(self.best_params), best_chi2=self.best_chi2,
            best_traces=freeze(self.best_traces), target=freeze(self.target), times=freeze(self.times),
            offsets=freeze(self.protocol.offsets()),
            sweep_labels=tuple(s.label for s in self.protocol.sweeps),
            evaluations_per_second=rate)

    def update(self, changes: Mapping[str, Any]) -> None:
        """GA settings (crossover, mutation, chi2_threshold, generations) between generations."""
        doc = parse_yaml(dump_yaml({**_plain(self.settings), **changes}), "<changes>")
        settings = build(GASettings, doc.data, doc)
        fixed = {"population", "seed"} & {k for k in changes if changes[k] != getattr(self.settings, k)}
        if fixed:
            raise ConfigError(f"{', '.join(sorted(fixed))} cannot change during a run")
        self.settings = settings
        self.cfg = replace(self.cfg, ga=settings)

    # ---- checkpoint and results -----------------------------------------------------------
    def state(self) -> dict[str, Any]:
        return {**config_state(self.cfg), **engine_state(self.engine), "generation": np.int64(self.generation),
                "best_history": np.array(self.best_history),
                "median_history": np.array(self.median_history), "wall_history": np.array(self.wall_history),
                "param_history": np.array(self.param_history), "wall": np.float64(self.wall),
                "evaluations": np.int64(self.evaluations)}

    @classmethod
    def restore(cls, state: Mapping[str, Any], backend: str) -> "ChannelSimulation":
        sim = cls(config_from_state(state, load_config), backend)
        sim.engine.restore(engine_part(state))
        sim.generation = int(state["generation"])
        sim.wall, sim.evaluations = float(state["wall"]), int(state["evaluations"])
        sim.best_history = list(state["best_history"][:-1])
        sim.median_history = list(state["median_history"][:-1])
        sim.wall_history = list(state["wall_history"][:-1])
        sim.param_history = list(state["param_history"][:-1])
        sim._score()    # the restored population's scores (identical to the saved last entry)
        return sim

    def results(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        arrays = {"history_best_chi2": np.array(self.best_history),
                  "history_median_chi2": np.array(self.median_history),
                  "history_wall_seconds": np.array(self.wall_history),
                  "history_params": np.array(self.param_history),
                  "best_traces": self.best_traces, "target": self.target, "times": self.times,
                  "sweep_offsets": self.protocol.offsets(), "param_names": np.array(self.model.param_names)}
        summary = {
            "best_params": dict(zip(self.model.param_names, map(float, self.best_params))),
            "best_chi2": self.best_chi2, "generations": self.generation,
            "population": self.settings.population, "evaluations": self.evaluations,
            "evaluations_per_second": self.evaluations / self.wall if self.wall else 0.0,
            "wall_seconds": self.wall, "setup_seconds": self.setup_seconds,
            "compile_seconds": self.compile_seconds,
            "data_points": int(self.protocol.n_points), "backend": self.backend,
            "reached_threshold": bool(self.best_chi2 <= self.settings.chi2_threshold),
        }
        true = self.model.true_values
        if self.cfg.data.source == "surrogate" and not np.isnan(true).any():
            summary["relative_error"] = dict(zip(self.model.param_names,
                                                 map(float, np.abs(self.best_params - true) / np.abs(true))))
        return arrays, summary

    def close(self) -> None:
        self.engine.close()


def _plain(settings: GASettings) -> dict:
    from app.sims.common.config import to_plain
    return to_plain(settings)
