"""Channel fitting as a Simulation: one optimiser step per slice, live convergence frames.

Phases, in order: ``search`` (a GA generation or a CMA-ES generation per slice on the run's
engine), ``refine`` (Levenberg-Marquardt or Nelder-Mead iterations on the float64 engine),
``uncertainty`` (Gauss-Newton intervals at the best point, one slice) and ``mcmc`` (adaptive
Metropolis steps of many chains, scored in batches on the run's engine).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any, Mapping

import numpy as np

from app.sims.channel import optimizers
from app.sims.channel.config import ChannelConfig, GASettings, load_config
from app.sims.channel.cpu import BAD_SCORE
from app.sims.channel.uncertainty import AdaptiveMetropolis, Intervals, gauss_newton_intervals
from app.sims.channel.engine import CpuGA
from app.sims.common.config import ConfigError
from app.sims.common.engine import config_from_state, config_state, engine_part, engine_state, make_engine
from app.sims.common.steering import steering_from_state, steering_state
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
    phase: str = "search"
    history_phase: np.ndarray = None       # (g,) index into PHASES of each history entry
    weights: np.ndarray = None             # (n_points,) or None (all 1)
    intervals: Intervals | None = None
    posterior_samples: np.ndarray = None   # (k, P) thinned MCMC samples for the corner plot


PHASES = ("ga", "cmaes", "lm", "nelder-mead", "mcmc")
STALL_TOLERANCE = 1e-6       # relative improvement that counts for fit.stall
MAX_POSTERIOR_ROWS = 200_000   # MCMC states kept in results.npz (thinned beyond)

class ChannelSimulation(Simulation):
    """GA fit of a Markov channel model on the CPU or CUDA engine."""

    domain = "channel"

    def __init__(self, cfg: ChannelConfig, backend: str):
        self.cfg, self.backend = cfg, backend
        self.model = cfg.model_()
        fit = cfg.fit_data(self.model)
        self.protocol, self.target, self.weights, self.notes = fit.protocol, fit.target, fit.weights, fit.notes
        self.times = np.concatenate([s.times() for s in self.protocol.sweeps])
        self.settings: GASettings = cfg.ga
        self.box = optimizers.Box(self.model.lower, self.model.upper)
        start = time.perf_counter()
        size = cfg.ga.population
        args = (self.model, self.protocol, self.target, size, cfg.ga.seed, self.weights)
        self.engine = make_engine("channel", backend, *args)
        self._exact = None
        # first-use compile (or cache load) of the compiled CPU engine, for the status and summary
        self.compile_seconds = self.engine.compile_seconds
        self.setup_seconds = time.perf_counter() - start
        self.generation = 0
        self.iterations = 0            # advances that did work: the steering step counter
        self.phase = "search"
        self.best_history: list[float] = []
        self.median_history: list[float] = []
        self.wall_history: list[float] = []
        self.param_history: list[np.ndarray] = []
        self.phase_history: list[int] = []
        self.wall = 0.0
        self.evaluations = 0
        self.best_index = 0
        self.best_chi2_seen = np.inf
        self.best_params = np.full(self.model.n_params, np.nan)
        self.best_traces = np.zeros_like(self.target)
        self.search = None
        self.refiner = None
        self.refine_steps = 0
        self.intervals: Intervals | None = None
        self.mcmc: AdaptiveMetropolis | None = None
        if cfg.fit.optimizer == "cmaes":
            self.search = optimizers.CmaesSearch(self.box, self.engine.evaluate_params, size,
                                                 cfg.ga.seed, cfg.fit.sigma)
            start = time.perf_counter()
            self.search.step()           # generation 0 scored, as the GA's initial population
            self.wall += time.perf_counter() - start
            self._record(self.search.best_params, self.search.best, self.search.median, "cmaes",
                         self.search.evaluations)
        # the GA's initial population is scored by the first advance(): its frame is the run's
        # first (a real result half as far off as one more generation on the reference engine)
        self._initial_pending = self.search is None

    @property
    def exact(self):
        """The engine the refinement and the intervals use: float64 on the CPU (built on
        first use: a GA-only CUDA run never needs it)."""
        if self._exact is None:
            if isinstance(self.engine, CpuGA):
                self._exact = self.engine
            else:
                from app.sims.channel.compiled import CompiledGA
                self._exact = CompiledGA(self.model, self.protocol, self.target, 2, self.cfg.ga.seed,
                                         self.weights)
        return self._exact

    @classmethod
    def from_config(cls, cfg: ChannelConfig, backend: str) -> "ChannelSimulation":
        return cls(cfg, backend)

    # ---- the optimiser loop ----------------------------------------------------------------
    @property
    def best_chi2(self) -> float:
        return self.best_chi2_seen

    @property
    def finished(self) -> bool:
        return self.phase == "done"

    def _search_done(self) -> bool:
        stall = self.cfg.fit.stall
        stalled = (self.search is not None and stall > 0 and len(self.best_history) > stall
                   and self.best_history[-stall - 1] - self.best_chi2 <= STALL_TOLERANCE * self.best_chi2)
        return (stalled or self.generation >= self.settings.generations
                or (bool(self.best_history) and self.best_chi2 <= self.settings.chi2_threshold))

    def _record(self, params: np.ndarray, best: float, median: float, phase: str, evaluations: int) -> None:
        """Append one history entry; the best fit's traces when a better point was found."""
        self.evaluations += evaluations
        if best < self.best_chi2_seen or not np.isfinite(self.best_params).all():
            if not np.array_equal(params, self.best_params):
                self.best_params = np.array(params, float)
                self.best_traces = self.engine.simulate(self.best_params[None])[0]
            self.best_chi2_seen = min(best, self.best_chi2_seen)
        self.best_history.append(self.best_chi2_seen)
        self.median_history.append(median)
        self.wall_history.append(self.wall)
        self.param_history.append(self.box.unit(self.best_params))
        self.phase_history.append(PHASES.index(phase))

    def _score(self) -> None:
        """Evaluate the GA population, then record the best, the median and the best fit."""
        self._initial_pending = False
        start = time.perf_counter()
        scores = self.engine.evaluate()
        self.best_index = int(np.argmin(scores))
        best = float(scores[self.best_index])
        params = self.engine.individual(self.best_index)
        median = self.engine.median()
        self.wall += time.perf_counter() - start
        self._record(params, best, median, "ga", len(scores))

    @property
    def step(self) -> int:
        """Iterations so far: generations of the search, then refinement and MCMC steps."""
        return self.iterations

    def advance(self, until: int | None = None) -> ChannelFrame:
        """One iteration (so never past a step ``until``)."""
        if self.finished or until == self.iterations:
            return self.frame()
        self.iterations += 1
        if self._initial_pending:
            self._score()
            return self.frame()
        start = time.perf_counter()
        if self.phase == "search" and self._search_done():
            self._next_phase()
        elif self.phase == "search":
            self.generation += 1
            if self.search is None:
                s = self.settings
                self.engine.advance(self.generation - 1, self.best_index, s.crossover, s.mutation,
                                  s.creep, s.creep_fraction)
                self.wall += time.perf_counter() - start
                self._score()
                return self.frame()
            before = self.search.evaluations
            self.search.step()
            self.wall += time.perf_counter() - start
            self._record(self.search.best_params, self.search.best, self.search.median, "cmaes",
                         self.search.evaluations - before)
            return self.frame()
        elif self.phase == "refine":
            before = self.refiner.evaluations
            self.refiner.step()
            self.refine_steps += 1
            self.wall += time.perf_counter() - start
            self._record(self.refiner.best_params, self.refiner.best, self.refiner.median,
                         self.cfg.fit.refine, self.refiner.evaluations - before)
            if self.refiner.converged or self.refine_steps >= self.cfg.fit.refine_iterations:
                self._next_phase()
            return self.frame()
        elif self.phase == "uncertainty":
            self.intervals = self.compute_intervals()
            self._next_phase()
        elif self.phase == "mcmc":
            before = self.mcmc.evaluations
            self.mcmc.step()
            self.wall += time.perf_counter() - start
            self._record(self.best_params, self.best_chi2, float("nan"), "mcmc", self.mcmc.evaluations - before)
            if len(self.mcmc.samples) > self.cfg.fit.mcmc_steps:
                self._next_phase()
            return self.frame()
        self.wall += time.perf_counter() - start
        return self.frame()

    def _next_phase(self) -> None:
        order = ["search", "refine", "uncertainty", "mcmc", "done"]
        fit = self.cfg.fit
        wanted = {"search": True, "refine": fit.refine != "none",
                  "uncertainty": fit.uncertainty or fit.mcmc_chains > 0, "mcmc": fit.mcmc_chains > 0,
                  "done": True}
        k = order.index(self.phase) + 1
        while not wanted[order[k]]:
            k += 1
        self.phase = order[k]
        if self.phase == "refine":
            self.refiner = self.make_refiner(fit.refine, self.best_params)
        elif self.phase == "mcmc":
            if self.intervals is None:
                self.intervals = self.compute_intervals()
            self.mcmc = AdaptiveMetropolis(
                self.engine.evaluate_params, self.model.lower, self.model.upper, self.best_chi2,
                self._points(), self.best_params, self.intervals.covariance, fit.mcmc_chains,
                self.cfg.ga.seed)

    def make_refiner(self, kind: str, start: np.ndarray):
        if kind == "lm":
            return optimizers.LevenbergMarquardt(self.box, self.exact.simulate, self.target,
                                                 self.weights, start)
        return optimizers.NelderMead(self.box, self.exact.evaluate_params, start)

    def _points(self) -> int:
        return int(self.protocol.n_points if self.weights is None else np.count_nonzero(self.weights))

    def compute_intervals(self) -> Intervals:
        """Gauss-Newton intervals at the best point, on the float64 engine."""
        lm = optimizers.LevenbergMarquardt(self.box, self.exact.simulate, self.target, self.weights,
                                           self.best_params)
        jacobian = lm.jacobian(lm.u) / self.box.width[None, :]
        self.evaluations += lm.evaluations
        total = float(self.protocol.n_points if self.weights is None else self.weights.sum())
        return gauss_newton_intervals(self.model.param_names, self.best_params, jacobian, lm.residual,
                                      self._points(), total)

    def _compile_note(self) -> str:
        """The compiled engine's first-use compile (or cache load) time for the status bar."""
        if self.compile_seconds < 0.05:
            return ""
        return f", compiled engine ready in {self.compile_seconds:.1f} s (compile or cache load)"

    def _progress(self) -> float:
        if self.finished:
            return 1.0
        search = min(self.generation / self.settings.generations, 1.0)
        if self.phase == "search":
            return 0.9 * search
        if self.phase == "mcmc":
            return 0.9 + 0.1 * len(self.mcmc.samples) / (self.cfg.fit.mcmc_steps + 1)
        return 0.9

    def _status(self) -> str:
        if self.phase == "search":
            name = "CMA-ES" if self.search is not None else "GA"
            return f"{name} generation {self.generation}, best chi2 {self.best_chi2:.4g}"
        if self.phase == "refine":
            return f"{self.cfg.fit.refine} iteration {self.refine_steps}, chi2 {self.best_chi2:.6g}"
        if self.phase == "mcmc":
            return (f"MCMC step {len(self.mcmc.samples) - 1} of {self.cfg.fit.mcmc_steps}, "
                    f"acceptance {self.mcmc.acceptance:.2f}")
        return f"done: chi2 {self.best_chi2:.6g}" + (
            f"; {len(self.intervals.warnings)} identifiability warning(s)"
            if self.intervals and self.intervals.warnings else "")

    def posterior_samples(self, limit: int = MAX_POSTERIOR_ROWS) -> np.ndarray | None:
        """The second half of every MCMC chain, thinned to at most ``limit`` rows (k, P)."""
        if self.mcmc is None:
            return None
        kept = np.concatenate(self.mcmc.samples[len(self.mcmc.samples) // 2:])
        return kept[::max(1, len(kept) // limit)]

    def frame(self) -> ChannelFrame:
        rate = self.evaluations / self.wall if self.wall else 0.0
        return ChannelFrame(
            progress=self._progress(), done=bool(self.finished),
            wall_seconds=self.wall, throughput=rate,
            throughput_unit="evaluations/s",
            status=self._status() + self._compile_note(),
            generation=self.generation, param_names=self.model.param_names,
            history_best=freeze(np.array(self.best_history)),
            history_median=freeze(np.array(self.median_history)),
            history_wall=freeze(np.array(self.wall_history)),
            history_params=freeze(np.array(self.param_history)),
            best_params=freeze(self.best_params), best_chi2=self.best_chi2,
            best_traces=freeze(self.best_traces), target=freeze(self.target), times=freeze(self.times),
            offsets=freeze(self.protocol.offsets()),
            sweep_labels=tuple(s.label for s in self.protocol.sweeps),
            evaluations_per_second=rate, phase=self.phase,
            history_phase=freeze(np.array(self.phase_history, np.int64)),
            weights=None if self.weights is None else freeze(self.weights), intervals=self.intervals,
            posterior_samples=freeze(self.posterior_samples(5000)) if self.mcmc is not None else None)

    def apply_change(self, key: str, value: Any, region: Mapping[str, Any] | None) -> Any:
        """A live GA setting (``ga.<name>``) or ``fixed.<parameter>`` (see ``config.steerables``)
        from the next generation."""
        if key.startswith("fixed."):
            return self._fix(key.partition(".")[2], value)
        name = key.partition(".")[2]
        old = getattr(self.settings, name)
        self.settings = replace(self.settings, **{name: value})
        self.cfg = replace(self.cfg, ga=self.settings)
        return old

    def _fix(self, name: str, value: float | None) -> float | None:
        """Hold parameter ``name`` at ``value`` in the GA search (its whole population column
        and its bounds), or free it (None: the config's bounds); the value it was held at."""
        if self.phase != "search" or self.search is not None:
            raise ConfigError("parameters are fixed or freed during the GA search, not in CMA-ES, "
                              "the refinement or MCMC")
        j = self.model.param_names.index(name)
        lower, upper = self.engine.model.lower.copy(), self.engine.model.upper.copy()
        old = float(lower[j]) if lower[j] == upper[j] else None
        if value is None:
            lower[j], upper[j] = self.model.lower[j], self.model.upper[j]
        else:
            lower[j] = upper[j] = value
            state = self.engine.state()
            state["population"][:, j] = value
            self.engine.restore(state)
        self.engine.set_bounds(lower, upper)
        return old

    # ---- checkpoint and results -----------------------------------------------------------
    @property
    def can_hand_over(self) -> bool:
        """Only the GA search continues exactly from :meth:`state` (see there)."""
        return self.phase == "search"

    def state(self) -> dict[str, Any]:
        """The GA population continues exactly; CMA-ES, a refinement or MCMC restart from the
        best point (their internal state is not saved)."""
        return {**config_state(self.cfg), **steering_state(self.steered), **engine_state(self.engine),
                "generation": np.int64(self.generation), "iterations": np.int64(self.iterations),
                "best_history": np.array(self.best_history),
                "median_history": np.array(self.median_history), "wall_history": np.array(self.wall_history),
                "param_history": np.array(self.param_history), "wall": np.float64(self.wall),
                "phase_history": np.array(self.phase_history, np.int64), "phase": np.array(self.phase),
                "best_params": self.best_params, "best_chi2": np.float64(self.best_chi2),
                "evaluations": np.int64(self.evaluations)}

    @classmethod
    def restore(cls, state: Mapping[str, Any], backend: str) -> "ChannelSimulation":
        cfg = config_from_state(state, load_config)
        sim = cls(cfg, backend)
        sim._initial_pending = False        # the saved population (scored below) replaces it
        phase = str(state.get("phase", "search"))
        sim.engine.restore(engine_part(state))
        sim.generation = int(state["generation"])
        sim.iterations = int(state.get("iterations", sim.generation))
        sim.steered = steering_from_state(state)
        lower, upper = sim.model.lower.copy(), sim.model.upper.copy()
        for event in sim.steered:        # the bounds as steered (the population has its columns)
            if event.key.startswith("fixed."):
                j = sim.model.param_names.index(event.key.partition(".")[2])
                lower[j] = sim.model.lower[j] if event.value is None else event.value
                upper[j] = sim.model.upper[j] if event.value is None else event.value
        sim.engine.set_bounds(lower, upper)
        sim.wall, sim.evaluations = float(state["wall"]), int(state["evaluations"])
        keep = -1 if phase == "search" and sim.search is None else len(state["best_history"])
        sim.best_history = list(state["best_history"][:keep])
        sim.median_history = list(state["median_history"][:keep])
        sim.wall_history = list(state["wall_history"][:keep])
        sim.param_history = list(state["param_history"][:keep])
        sim.phase_history = list(state.get("phase_history", np.zeros(len(state["best_history"]), int))[:keep])
        if phase == "search" and sim.search is None:
            sim.best_chi2_seen = min(sim.best_history, default=np.inf)
            sim._score()    # the restored population's scores (identical to the saved last entry)
            return sim
        sim.best_params = np.array(state["best_params"], float)
        sim.best_chi2_seen = float(state["best_chi2"])
        sim.best_traces = sim.engine.simulate(sim.best_params[None])[0]
        if phase == "search":
            sim.search = optimizers.CmaesSearch(sim.box, sim.engine.evaluate_params, cfg.ga.population,
                                                cfg.ga.seed + sim.generation, cfg.fit.sigma, sim.best_params)
        else:
            sim.phase = "search"
            while sim.phase != phase and not sim.finished:
                sim._next_phase()
        return sim

    def results(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        arrays = {"history_best_chi2": np.array(self.best_history),
                  "history_median_chi2": np.array(self.median_history),
                  "history_wall_seconds": np.array(self.wall_history),
                  "history_params": np.array(self.param_history),
                  "history_phase": np.array(self.phase_history, np.int64), "phase_names": np.array(PHASES),
                  "best_params": self.best_params,
                  "best_traces": self.best_traces, "target": self.target, "times": self.times,
                  "sweep_offsets": self.protocol.offsets(), "param_names": np.array(self.model.param_names),
                  "sweep_labels": np.array([s.label for s in self.protocol.sweeps])}
        if self.weights is not None:
            arrays["weights"] = self.weights
        summary = {
            "best_params": dict(zip(self.model.param_names, map(float, self.best_params))),
            "best_chi2": self.best_chi2, "generations": self.generation,
            "optimizer": self.cfg.fit.optimizer, "refine": self.cfg.fit.refine,
            "refine_iterations": self.refine_steps,
            "population": self.settings.population, "evaluations": self.evaluations,
            "evaluations_per_second": self.evaluations / self.wall if self.wall else 0.0,
            "wall_seconds": self.wall, "setup_seconds": self.setup_seconds,
            "compile_seconds": self.compile_seconds,
            "data_points": int(self.protocol.n_points), "backend": self.backend,
            "reached_threshold": bool(self.best_chi2 <= self.settings.chi2_threshold), **self.notes,
        }
        if self.intervals is not None:
            iv = self.intervals
            arrays.update({"ci_sd": iv.sd, "ci_lower": iv.lower, "ci_upper": iv.upper,
                           "correlation": iv.correlation, "covariance": iv.covariance})
            summary["intervals"] = iv.summary()
        if self.mcmc is not None:
            arrays["posterior_samples"] = self.posterior_samples()
            summary["posterior"] = self.mcmc.posterior(self.model.param_names)
            summary["mcmc_acceptance"] = self.mcmc.acceptance
        if not self.best_chi2 < BAD_SCORE:           # never a valid individual: not a fit
            summary["stopped"] = {"generation": self.generation,
                                  "reason": "every parameter set evaluated was invalid (a rate NaN or "
                                            "infinite, or the simulation failed): no fit"}
        true = self.model.true_values
        if self.cfg.data.source == "surrogate" and not np.isnan(true).any():
            summary["relative_error"] = dict(zip(self.model.param_names,
                                                 map(float, np.abs(self.best_params - true) / np.abs(true))))
        return arrays, summary

    def close(self) -> None:
        self.engine.close()
        if self._exact is not None and self._exact is not self.engine:
            self._exact.close()
