"""The SSA simulation: an ensemble advanced by bounded slices of one sample interval at most,
frames for the GUI.

On the CPU a slice gives every realization at most ``n`` engine steps towards the next sample
time, so a sample interval can take several slices. A change is taken between any two slices:
each realization takes it where it is inside the interval, and the event records the engine
steps into the interval (``within``). The engines' state after ``a`` then ``b`` steps equals
their state after ``a + b`` steps (each realization runs its own Philox stream and stops where
its budget ends), so a replay that stops at ``within`` reproduces the run bit for bit. Samples
at and after the end of that interval see the change in every realization.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from app.sims.common.config import ConfigError
from app.sims.common.checkpoint_schema import ArraySpec, check_arrays, checked_config
from app.sims.common.engine import (config_state, device_name, engine_part,
                                     engine_state, make_engine)
from app.sims.common.simulation import Frame, Simulation, freeze, slice_after_change
from app.sims.common.steering import steering_from_state, steering_state
from app.sims.ssa.config import SSAConfig, load_config
from app.sims.ssa.engine import EnsembleEngine, IntervalStats, RunStopped, initial_stats
from app.sims.ssa.stats import Histogram

CPU_SLICE_SECONDS = 0.15
PREVIEW_FRACTION = 16      # explore: a first look with 1/16 of the ensemble
PREVIEW_MIN = 32


@dataclass(frozen=True)
class SSAFrame(Frame):
    """Ensemble statistics at the sample times reached so far."""

    species: tuple[str, ...] = ()
    times: np.ndarray = None            # (k,)
    mean: np.ndarray = None             # (k, S)
    std: np.ndarray = None              # (k, S)
    hist_species: tuple[int, ...] = ()
    hist_lo: np.ndarray = None          # (k, H)
    hist_width: np.ndarray = None       # (k, H)
    hist_counts: np.ndarray = None      # (k, H, bins)
    realizations: int = 0
    reactions_fired: int = 0
    grid_index: np.ndarray | None = None  # (n, n) species index of A_ij for the heat map
    final: np.ndarray | None = None       # (R, S) at t_end, once done

    def histogram(self, k: int, h: int) -> Histogram:
        return Histogram(int(self.hist_lo[k, h]), int(self.hist_width[k, h]), self.hist_counts[k, h])


class SSASimulation(Simulation):
    """Ensemble SSA on the CPU or CUDA engine."""

    domain = "ssa"

    def __init__(self, cfg: SSAConfig, backend: str, engine: EnsembleEngine | None = None):
        self.cfg, self.backend = cfg, backend
        self.net = cfg.network()
        ens = cfg.ensemble
        self.times = cfg.sample_times()
        self.hist_idx = cfg.histogram_indices(self.net)
        self.snapshot_k = sorted({int(np.argmin(np.abs(self.times - t))) for t in ens.snapshot_times})
        self.mode = "continue"         # steering: explore re-runs the ensemble on each change
        self.previewing = False        # explore: the small ensemble runs before the full one
        self._base = 0                 # steps of the ensembles run before this one (explore)
        self._within = 0               # engine steps into the sample interval in flight (CPU)
        self.wall = 0.0
        self._steps = 64
        t0 = time.perf_counter()
        self._start(engine or _make_engine(cfg, self.net, backend, self.hist_idx))
        self.setup_seconds = time.perf_counter() - t0

    def _start(self, engine: EnsembleEngine) -> None:
        """Run ``engine`` from t = 0 (fresh statistics)."""
        self.engine = engine
        s, h, k, bins = self.net.n_species, len(self.hist_idx), len(self.times), self.cfg.ensemble.histogram_bins
        self.mean = np.zeros((k, s))
        self.var = np.zeros((k, s))
        self.hist_lo = np.zeros((k, h), np.int64)
        self.hist_width = np.ones((k, h), np.int64)
        self.hist_counts = np.zeros((k, h, bins), np.int64)
        self.snapshots: dict[int, np.ndarray] = {}
        self.final: np.ndarray | None = None
        self.k = 0                     # samples recorded so far
        self.stopped: str | None = None
        self._record(initial_stats(self.net, engine.realizations, self.hist_idx, bins,
                                   keep_states=0 in self.snapshot_k))

    @classmethod
    def from_config(cls, cfg: SSAConfig, backend: str) -> "SSASimulation":
        return cls(cfg, backend)

    # ---- the loop -----------------------------------------------------------------------
    @property
    def finished(self) -> bool:
        return (self.k >= len(self.times) and not self.previewing) or self.stopped is not None

    @property
    def step(self) -> int:
        """The sample the ensemble is at (explore: counting on over the re-runs)."""
        return self._base + self.k - 1

    @property
    def within(self) -> int:
        """Engine steps each realization has taken (at most) into the interval after :attr:`step`."""
        return self._within

    @property
    def sim_time(self) -> float:
        return float(self.times[self.k - 1])

    @property
    def can_hand_over(self) -> bool:
        return not self.previewing

    def advance(self, until: int | None = None, within: int = 0) -> SSAFrame:
        """One sample interval at most (so never past a step ``until``), and on the CPU never
        past ``within`` engine steps into the interval after step ``until``."""
        if self.previewing and self.k >= len(self.times):     # the preview is done: the full ensemble
            self._rerun(preview=False)
        steps = self._steps
        if until == self.step and self.backend != "cuda":      # a replayed change inside this interval
            steps = within - self._within
        if not self.finished and steps > 0:
            start = time.perf_counter()
            try:
                done = self.engine.advance(float(self.times[self.k]), steps)
            except RunStopped as exc:     # an overflow, a bad propensity: stop with the last sample, say why
                self.stopped, done = str(exc), False
            self._within = 0 if done or self.stopped is not None else self._within + steps
            elapsed = time.perf_counter() - start
            self.wall += elapsed
            if self.backend != "cuda":   # keep a CPU slice near CPU_SLICE_SECONDS
                scale = CPU_SLICE_SECONDS / max(elapsed, 1e-4)
                self._steps = int(np.clip(self._steps * min(max(scale, 0.5), 2.0), 8, 1 << 20))
            if done:
                last = self.k == len(self.times) - 1
                self._record(self.engine.stats(keep_states=last or self.k in self.snapshot_k))
        return self.frame()

    def _record(self, st: IntervalStats) -> None:
        k = self.k
        self.mean[k], self.var[k] = st.mean, st.var
        for h, hist in enumerate(st.histograms):
            self.hist_lo[k, h], self.hist_width[k, h] = hist.lo, hist.width
            self.hist_counts[k, h] = hist.counts
        if st.states is not None:
            if k in self.snapshot_k:
                self.snapshots[k] = st.states
            if k == len(self.times) - 1:
                self.final = st.states
        self.k += 1

    def frame(self) -> SSAFrame:
        k = max(self.k, 1)
        rate = self.engine.reactions_fired / self.wall if self.wall > 0 else 0.0
        return SSAFrame(
            progress=self.k / len(self.times), done=self.finished, wall_seconds=self.wall,
            throughput=rate, throughput_unit="reactions/s",
            status=self.stopped or (
                ("explore, a first look: " if self.previewing else "")
                + f"t = {self.times[k - 1]:.4g} of {self.times[-1]:.4g}"
                + ("" if self.k >= len(self.times) else f" (running to {self.times[self.k]:.4g})") + ", "
                f"{self.engine.realizations} realizations" + _compile_note(self.engine)),
            species=self.net.species, times=freeze(self.times[:k]), mean=freeze(self.mean[:k]),
            std=freeze(np.sqrt(self.var[:k])), hist_species=tuple(self.hist_idx),
            hist_lo=freeze(self.hist_lo[:k]), hist_width=freeze(self.hist_width[:k]),
            hist_counts=freeze(self.hist_counts[:k]), realizations=self.engine.realizations,
            reactions_fired=self.engine.reactions_fired,
            grid_index=None if self.net.grid_index is None else freeze(self.net.grid_index),
            final=None if self.final is None else freeze(self.final))

    # ---- steering ---------------------------------------------------------------------
    def apply_change(self, key: str, value: Any, region: Mapping[str, Any] | None) -> Any:
        """``mode``, ``rates.<reaction>``, ``initial.<species>`` (see ``config.steerables``)."""
        if key == "mode":
            old, self.mode = self.mode, value
            return old
        if self.backend != "cuda":        # a short slice next: the first frame with the change comes soon
            self._steps = slice_after_change(self._steps, least=8)
        old = self._set_value(key, value)
        if self.mode == "explore":
            self._rerun(preview=True)
        elif key.startswith("rates."):
            self.engine.set_rates(self.net.rates)
        else:
            i = self.net.species.index(key.partition(".")[2])
            state = self.engine.state()
            state["x"][:, i] = value
            self.engine.restore(state)
        return old

    def _set_value(self, key: str, value: Any) -> Any:
        """Put a steered rate or initial count into :attr:`net`; the value it replaced."""
        kind, _, name = key.partition(".")
        if kind == "rates":
            j = self.net.reaction_names.index(name)
            rates = self.net.rates.copy()
            old, rates[j] = float(rates[j]), value
            self.net = self.net.with_values(rates=rates)
        else:
            i = self.net.species.index(name)
            x0 = self.net.x0.copy()
            old, x0[i] = int(x0[i]), value
            self.net = self.net.with_values(x0=x0)
        return old

    def _rerun(self, preview: bool) -> None:
        """Explore: the ensemble again from t = 0 with :attr:`net`; with ``preview`` a small one
        first (:data:`PREVIEW_FRACTION` of it, but no fewer than the engine runs in the time of
        one: a GPU that holds the whole ensemble at once runs it without a first look), then
        the full one."""
        full = self.cfg.ensemble.realizations
        small = min(full, max(PREVIEW_MIN, full // PREVIEW_FRACTION, self.engine.at_once))
        self.previewing = preview and small < full
        ens = self.cfg.ensemble
        engine = make_ssa_engine(self.net, self.backend, small if self.previewing else full, ens.seed,
                                 ens.algorithm, self.hist_idx, ens.histogram_bins, ens.epsilon)
        self._base = self.step + 1
        self.engine.close()
        self._within = 0
        self._start(engine)

    # ---- checkpoint and results ---------------------------------------------------------
    def state(self) -> dict[str, Any]:
        if self.previewing:
            raise ConfigError("explore mode is showing its first look (a small ensemble); a "
                              "checkpoint waits for the full ensemble")
        return {**config_state(self.cfg), **steering_state(self.steered), "k": np.int64(self.k),
                "step_base": np.int64(self._base), "within": np.int64(self._within),
                "wall": np.float64(self.wall), "mean": self.mean, "var": self.var,
                "hist_lo": self.hist_lo, "hist_width": self.hist_width,
                "hist_counts": self.hist_counts, **engine_state(self.engine)}

    @classmethod
    def restore(cls, state: Mapping[str, Any], backend: str,
                path: str | Path | None = None) -> "SSASimulation":
        cfg = checked_config(state, load_config, path)
        check_arrays(state, checkpoint_schema(cfg), path)
        sim = cls(cfg, backend)
        sim.steered = steering_from_state(state)
        for event in sim.steered:        # the network as steered (the engine has its own copy)
            if event.key == "mode":
                sim.mode = event.value
            else:
                sim._set_value(event.key, event.value)
        sim.engine.restore(engine_part(state))
        sim.k, sim.wall = int(state["k"]), float(state["wall"])
        sim._base = int(state.get("step_base", 0))
        sim._within = int(state.get("within", 0))
        for name in ("mean", "var", "hist_lo", "hist_width", "hist_counts"):
            getattr(sim, name)[...] = state[name]
        return sim

    def results(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        k = self.k
        arrays = {
            "times": self.times[:k], "species": np.array(self.net.species),
            "mean": self.mean[:k], "std": np.sqrt(self.var[:k]),
            "final": self.final if self.final is not None else self.engine.states(),
            "hist_species": np.array([self.net.species[i] for i in self.hist_idx]),
            "hist_lo": self.hist_lo[:k], "hist_width": self.hist_width[:k],
            "hist_counts": self.hist_counts[:k],
        }
        if self.snapshots:
            keys = sorted(self.snapshots)
            arrays["snapshot_times"] = self.times[keys]
            arrays["snapshots"] = np.stack([self.snapshots[i] for i in keys])
        if self.net.grid_index is not None:
            arrays["grid_index"] = self.net.grid_index
        summary = {
            "realizations": self.engine.realizations,
            "reactions_fired": int(self.engine.reactions_fired),
            "wall_seconds": self.wall,
            "reactions_per_second": self.engine.reactions_fired / self.wall if self.wall else 0.0,
            "setup_seconds": self.setup_seconds,
            "compile_seconds": self.engine.compile_seconds,
            "backend": self.backend, "device": device_name(self.backend),
            "algorithm": self.cfg.ensemble.algorithm, "seed": self.cfg.ensemble.seed,
            "t_end": self.cfg.ensemble.t_end, "samples_done": k,
            "finished": self.finished and self.stopped is None,
        }
        if self.stopped is not None:
            summary["stopped"] = {"t": float(self.times[k - 1]), "reason": self.stopped}
        return arrays, summary

    def close(self) -> None:
        self.engine.close()


def _make_engine(cfg: SSAConfig, net, backend: str, hist_idx: list[int]) -> EnsembleEngine:
    ens = cfg.ensemble
    return make_ssa_engine(net, backend, ens.realizations, ens.seed, ens.algorithm, hist_idx,
                           ens.histogram_bins, ens.epsilon)


TAU_LEAP_ENGINES = {"cpu-reference": ("app.sims.ssa.tauleap_numpy", "TauLeapReference"),
                    "cpu": ("app.sims.ssa.tauleap", "TauLeapEnsemble")}


def make_ssa_engine(net, backend: str, realizations: int, seed: int, algorithm: str,
                    hist_idx: list[int], bins: int, epsilon: float = 0.03) -> EnsembleEngine:
    """The engine of ``backend`` running ``algorithm`` on ``net``: the manifest's engines for
    the exact methods and CUDA, the tau-leaping engines for ``tau-leap`` on the CPU."""
    if algorithm == "tau-leap" and backend != "cuda":
        import importlib
        module, name = TAU_LEAP_ENGINES["cpu-reference" if backend == "cpu-reference" else "cpu"]
        return getattr(importlib.import_module(module), name)(net, realizations, seed, hist_idx, bins, epsilon)
    extra = {"epsilon": epsilon} if backend == "cuda" else {}
    return make_engine("ssa", backend, net, realizations, seed, algorithm, hist_idx, bins, **extra)


def _compile_note(engine: EnsembleEngine) -> str:
    """The first-use compile time for the status bar, where there was one worth naming."""
    seconds = engine.compile_seconds
    return f", compiled engine ready in {seconds:.1f} s (compile or cache load)" if seconds >= 0.05 else ""



def checkpoint_schema(cfg: SSAConfig) -> list[ArraySpec]:
    """The arrays :meth:`SSASimulation.state` writes, sized by ``cfg``: realizations R,
    species S, reactions M, sample times K, histogram species H and bins."""
    net = cfg.network()
    r, s, m = cfg.ensemble.realizations, net.n_species, net.n_reactions
    k, h, bins = len(cfg.sample_times()), len(cfg.histogram_indices(net)), cfg.ensemble.histogram_bins
    return [ArraySpec("k", "int", (), 1, k), ArraySpec("wall", "float", (), 0),
            ArraySpec("mean", "float", (k, s)), ArraySpec("var", "float", (k, s), 0),
            ArraySpec("hist_lo", "int", (k, h)), ArraySpec("hist_width", "int", (k, h), 1),
            ArraySpec("hist_counts", "int", (k, h, bins), 0, r),
            ArraySpec("engine_x", "int", (r, s), 0), ArraySpec("engine_draws", "int", (r,), 0),
            ArraySpec("engine_t", "float", (r,), 0, float(cfg.sample_times()[-1])),
            ArraySpec("engine_active", "bool", (r,)), ArraySpec("engine_rates", "float", (m,), 0),
            ArraySpec("engine_events", "int", (r,), 0, 2**32 - 1, optional=True),
            ArraySpec("engine_reactions_fired", "int", (), 0),
            ArraySpec("step_base", "int", (), 0, 2**62, optional=True),
            ArraySpec("mid_interval", "bool", (), optional=True),    # checkpoints before 'within'
            ArraySpec("within", "int", (), 0, 2**62, optional=True)]
