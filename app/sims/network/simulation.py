"""The cultured-network simulation: activity epochs advanced in slices, growth at each epoch
end, a checkpoint after every epoch, frames for the GUI and results for the CLI."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from app.sims.common.checkpoint import refuse_mismatch, refuse_past_end, write_checkpoint
from app.sims.common.checkpoint_schema import ArraySpec, check_arrays, checked_config
from app.sims.common.engine import config_state, device_name, engine_state, make_engine
from app.sims.common.simulation import Frame, Simulation, freeze
from app.sims.common.steering import region_mask, steering_from_state, steering_state
from app.sims.network.config import SYNAPSE_TYPES, NetworkConfig, load_config
from app.sims.network.engine import STATE_KEYS, NetworkEngine
from app.sims.network.model import Constants, build_culture, detect_bursts

CPU_SLICE_SECONDS = 0.15       # wall time the CPU engine aims at per advance()
STRONGEST = 300                # synapses drawn in the culture view
STRONGEST_MAX_NEURONS = 40000  # above this the strongest synapses are not copied back
POP_WINDOW_SECONDS = 20.0
# config keys a resumed run may not change (run length, growth rates and outputs may)
FIXED_ON_RESUME = ("culture", "neuron", "synapses", "growth.start_radius", "run.dt",
                   "run.epoch_seconds")


@dataclass(frozen=True)
class NetworkFrame(Frame):
    """The culture now, recent activity and the per-epoch history."""

    epoch: int = 0                   # epochs completed
    epochs: int = 0
    t: float = 0.0                   # simulated seconds
    width: int = 0
    height: int = 0
    radius: np.ndarray = None        # (N,)
    rate: np.ndarray = None          # (N,) Hz over the last slice(s)
    inhibitory: np.ndarray = None    # (N,) bool
    starter: np.ndarray = None       # (N,) bool
    raster_times: np.ndarray = None  # s
    raster_neurons: np.ndarray = None
    pop_times: np.ndarray = None     # bin centres, s
    pop_rate: np.ndarray = None      # spikes per second per neuron
    burst_times: np.ndarray = None   # starts of detected network bursts in the window, s
    burst_level: float = 0.0         # the detection threshold in pop_rate units
    history: Mapping[str, np.ndarray] = None   # per-epoch arrays
    synapses: int = 0
    strong_pre: np.ndarray = None
    strong_post: np.ndarray = None
    strong_w: np.ndarray = None
    epoch_boundary: bool = False     # this slice ended an epoch (growth done, checkpoint written)


class NetworkSimulation(Simulation):
    """A developing culture on the CPU or CUDA engine."""

    domain = "network"

    def __init__(self, cfg: NetworkConfig, backend: str, engine: NetworkEngine | None = None):
        self.cfg, self.backend = cfg, backend
        self.culture = build_culture(cfg)
        self.consts = Constants.from_config(cfg)
        self.growth = cfg.growth         # as steered (growth.target_rate)
        t0 = time.perf_counter()
        self.engine = engine or make_engine("network", backend, self.culture, self.consts, cfg.growth,
                                            cfg.run.seed, cfg.growth.start_radius)
        self.setup_seconds = time.perf_counter() - t0
        n = self.culture.n
        self.steps_per_epoch = cfg.steps_per_epoch
        self.bin_steps = max(1, int(round(cfg.analysis.burst_bin / cfg.run.dt)))
        self.epoch = 0
        self.step_in_epoch = 0
        self.wall = 0.0
        self.history = {k: [] for k in ("epoch_mean_radius", "epoch_mean_rate", "epoch_synapses",
                                       "epoch_bursts_per_minute", "epoch_wall_seconds")}
        self.epoch_radius: list[np.ndarray] = []    # radii after each epoch's growth (its connectivity)
        self.spikes: list[tuple[np.ndarray, np.ndarray]] = []
        self.n_spikes_dropped = 0
        self.recent: deque[tuple[np.ndarray, np.ndarray]] = deque()
        self.pop = np.zeros(self._epoch_bins())
        self.pop_recent: deque[tuple[int, np.ndarray]] = deque()   # (first step, counts per bin)
        self.rate = np.zeros(n)
        self._slice_steps = max(1, int(round(cfg.run.slice_seconds / cfg.run.dt)))
        if backend != "cuda":
            self._slice_steps = min(self._slice_steps, 200)
        self._epoch_wall = 0.0
        self._strong = self._strongest()
        self.boundary = False

    @classmethod
    def from_config(cls, cfg: NetworkConfig, backend: str) -> "NetworkSimulation":
        path = Path(cfg.run.checkpoint) if cfg.run.checkpoint else None
        if path is not None and cfg.run.resume and path.exists():
            from app.sims.common.session import load_checkpoint
            return cls.restore(load_checkpoint(path, cls.domain), backend, cfg=cfg, path=path)
        return cls(cfg, backend)

    def _epoch_bins(self) -> int:
        return -(-self.steps_per_epoch // self.bin_steps)

    # ---- the loop -----------------------------------------------------------------------
    @property
    def finished(self) -> bool:
        return self.epoch >= self.cfg.run.epochs

    @property
    def sim_seconds(self) -> float:
        return self.engine.step * self.cfg.run.dt

    @property
    def step(self) -> int:
        """Time steps done."""
        return int(self.engine.step)

    @property
    def sim_time(self) -> float:
        return self.sim_seconds

    def advance(self, until: int | None = None) -> NetworkFrame:
        self.boundary = False
        if not self.finished and until != self.step:
            start = time.perf_counter()
            n = min(self._slice_steps, self.steps_per_epoch - self.step_in_epoch,
                    *(() if until is None or until < self.step else (until - self.step,)))
            steps, neurons = self.engine.advance(n)
            self._record(steps, neurons, n)
            self.step_in_epoch += n
            if self.step_in_epoch >= self.steps_per_epoch:
                self._end_epoch()
            elapsed = time.perf_counter() - start
            self.wall += elapsed
            self._epoch_wall += elapsed
            if self.backend != "cuda" and elapsed > 0:
                target = int(n * CPU_SLICE_SECONDS / elapsed)
                self._slice_steps = int(np.clip(target, 10, max(10, 4 * n)))
        return self.frame()

    def _record(self, steps: np.ndarray, neurons: np.ndarray, n: int) -> None:
        dt = self.cfg.run.dt
        mode = self.cfg.analysis.spikes
        if mode != "none" and steps.size:
            self.spikes.append((steps.astype(np.int64), neurons.astype(np.int32)))
        self.recent.append((steps, neurons))
        keep = int(self.cfg.analysis.raster_seconds / dt)
        while len(self.recent) > 1 and (not self.recent[0][0].size or
                                        self.recent[0][0].max() < self.engine.step - keep):
            self.recent.popleft()
        first = self.epoch * self.steps_per_epoch
        bins = (steps - first) // self.bin_steps
        self.pop += np.bincount(bins, minlength=self.pop.size)[:self.pop.size]
        slice_rate = np.bincount(neurons, minlength=self.culture.n) / (n * dt)
        w = min(1.0, n * dt / 1.0)          # about a 1-s moving average
        self.rate = (1 - w) * self.rate + w * slice_rate

    def _end_epoch(self) -> None:
        cfg = self.cfg
        rates = self.engine.grow(cfg.run.epoch_seconds)
        radius = self.engine.radius()
        self.epoch_radius.append(radius)
        threshold = cfg.analysis.burst_fraction * self.culture.n
        bursts = detect_bursts(self.pop, threshold)
        h = self.history
        h["epoch_mean_radius"].append(float(radius.mean()))
        h["epoch_mean_rate"].append(float(rates.mean()))
        h["epoch_synapses"].append(int(self.engine.n_synapses))
        h["epoch_bursts_per_minute"].append(bursts.size / (cfg.run.epoch_seconds / 60.0))
        h["epoch_wall_seconds"].append(self._epoch_wall)
        self.pop_recent.append((self.epoch * self.steps_per_epoch, self.pop.copy()))
        while len(self.pop_recent) > 2:
            self.pop_recent.popleft()
        self.pop = np.zeros(self._epoch_bins())
        self.epoch += 1
        self.step_in_epoch = 0
        self._epoch_wall = 0.0
        if cfg.analysis.spikes == "last_epoch" and not self.finished:
            self.spikes.clear()
        self._strong = self._strongest()
        self.boundary = True
        if cfg.run.checkpoint:
            self.save_checkpoint(cfg.run.checkpoint)

    def _strongest(self):
        if self.culture.n > STRONGEST_MAX_NEURONS:
            return None
        conn = self.engine.connectivity()
        if conn.size > STRONGEST:
            top = np.argpartition(-np.abs(conn.W), STRONGEST)[:STRONGEST]
            return conn.pre[top], conn.post[top], conn.W[top]
        return conn.pre, conn.post, conn.W

    # ---- frames -------------------------------------------------------------------------
    def _pop_window(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        dt, bs, n = self.cfg.run.dt, self.bin_steps, self.culture.n
        parts = [(first, counts) for first, counts in self.pop_recent]
        used = -(-self.step_in_epoch // bs)
        parts.append((self.epoch * self.steps_per_epoch, self.pop[:used]))
        times = np.concatenate([(first + (np.arange(c.size) + 0.5) * bs) * dt for first, c in parts])
        counts = np.concatenate([c for _, c in parts])
        window = int(POP_WINDOW_SECONDS / (bs * dt))
        times, counts = times[-window:], counts[-window:]
        level = self.cfg.analysis.burst_fraction * n
        starts = detect_bursts(counts, level)
        scale = 1.0 / (n * bs * dt)
        return times, counts * scale, times[starts] - 0.5 * bs * dt

    def frame(self) -> NetworkFrame:
        dt = self.cfg.run.dt
        if self.recent:
            steps = np.concatenate([s for s, _ in self.recent])
            neurons = np.concatenate([n for _, n in self.recent])
            keep = steps >= self.engine.step - int(self.cfg.analysis.raster_seconds / dt)
            steps, neurons = steps[keep], neurons[keep]
        else:
            steps = neurons = np.zeros(0, np.int64)
        pop_t, pop_r, bursts = self._pop_window()
        total = self.cfg.run.epochs * self.steps_per_epoch
        done_steps = self.epoch * self.steps_per_epoch + self.step_in_epoch
        strong = self._strong or (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0))
        rtf = self.sim_seconds / self.wall if self.wall > 0 else 0.0
        return NetworkFrame(
            progress=done_steps / total, done=self.finished, wall_seconds=self.wall,
            throughput=rtf, throughput_unit="x realtime",
            status=f"epoch {self.epoch}/{self.cfg.run.epochs}, t = {self.sim_seconds:.1f} s, "
                   f"{self.engine.n_synapses} synapses" + _compile_note(self.engine),
            epoch=self.epoch, epochs=self.cfg.run.epochs, t=self.sim_seconds,
            width=self.culture.width, height=self.culture.height,
            radius=freeze(self.engine.radius()), rate=freeze(self.rate),
            inhibitory=freeze(self.culture.inhibitory), starter=freeze(self.culture.starter),
            raster_times=freeze(steps * dt), raster_neurons=freeze(neurons),
            pop_times=freeze(pop_t), pop_rate=freeze(pop_r), burst_times=freeze(bursts),
            burst_level=self.cfg.analysis.burst_fraction / (self.bin_steps * dt),
            history={k: freeze(np.asarray(v)) for k, v in self.history.items()},
            synapses=int(self.engine.n_synapses),
            strong_pre=freeze(strong[0]), strong_post=freeze(strong[1]), strong_w=freeze(strong[2]),
            epoch_boundary=self.boundary)

    # ---- checkpoint and results ---------------------------------------------------------
    # ---- steering -----------------------------------------------------------------------
    def apply_change(self, key: str, value: Any, region: Mapping[str, Any] | None) -> Any:
        """``stimulate`` (the region's neurons at threshold: they fire at the next step),
        ``scale.<type>`` and ``growth.target_rate`` (the engine's constants, no rebuild)."""
        if key == "stimulate":
            x, y = self.culture.positions()
            cells = region_mask(region, np.column_stack([x, y]).astype(np.float64))
            state = self.engine.state()
            ready = cells & (np.asarray(state["refrac"]) <= 0)
            state["V"] = np.where(ready, np.maximum(state["V"], self.culture.vthresh), state["V"])
            self.engine.restore(state)
            return None
        return self._set_constant(key, value)

    def _set_constant(self, key: str, value: float) -> float:
        """A synapse-type weight factor or the growth target into the engine; the old value."""
        if key.startswith("scale."):
            k = SYNAPSE_TYPES.index(key.partition(".")[2])
            scale = self.consts.w_scale.copy()
            old, scale[k] = float(scale[k]), value
            self.consts = replace(self.consts, w_scale=scale)
        else:
            old = self.growth.target_rate
            self.growth = replace(self.growth, target_rate=value)
        self.engine.set_constants(self.consts, self.growth)
        return old

    def state(self) -> dict[str, Any]:
        steps, neurons = self._spike_arrays()
        hist = {f"hist_{k}": np.asarray(v, np.float64) for k, v in self.history.items()}
        return {**config_state(self.cfg), **steering_state(self.steered), "epoch": np.int64(self.epoch),
                "step_in_epoch": np.int64(self.step_in_epoch), "wall": np.float64(self.wall),
                "pop": self.pop, "rate": self.rate, "spike_steps": steps, "spike_neurons": neurons,
                "epoch_radius": self._epoch_radius(), **hist, **engine_state(self.engine)}

    def _epoch_radius(self) -> np.ndarray:
        """(epochs done, N): each epoch's radii after its growth; NaN rows for epochs run
        before a resume from a checkpoint that did not keep them."""
        return np.array(self.epoch_radius, np.float64).reshape(len(self.epoch_radius), self.culture.n)

    def save_checkpoint(self, path: str | Path) -> Path:
        """The state as one uncompressed NPZ (fast enough to write every epoch), written
        atomically (temporary file, fsync, rename)."""
        return write_checkpoint(path, self.state(), self.domain)

    @classmethod
    def restore(cls, state: Mapping[str, Any], backend: str, cfg: NetworkConfig | None = None,
                path: str | Path | None = None) -> "NetworkSimulation":
        saved = checked_config(state, load_config, path)
        check_arrays(state, checkpoint_schema(saved, state), path)
        cfg = cfg or saved
        refuse_mismatch(path, saved, cfg, FIXED_ON_RESUME, "culture or model")
        refuse_past_end(path, int(state["epoch"]), cfg.run.epochs, "run.epochs", "epochs")
        sim = cls(cfg, backend)
        sim.engine.restore({k: np.asarray(state[f"engine_{k}"]) for k in STATE_KEYS})
        sim.steered = steering_from_state(state)
        for event in sim.steered:        # the factors and targets as steered (set values: idempotent)
            if event.key != "stimulate":
                sim._set_constant(event.key, event.value)
        sim.epoch, sim.step_in_epoch = int(state["epoch"]), int(state["step_in_epoch"])
        sim.wall = float(state["wall"])
        sim.pop = np.asarray(state["pop"], np.float64).copy()
        sim.rate = np.asarray(state["rate"], np.float64).copy()
        for k in sim.history:
            values = np.asarray(state[f"hist_{k}"])
            sim.history[k] = [int(v) for v in values] if k == "epoch_synapses" else [float(v) for v in values]
        kept = np.asarray(state.get("epoch_radius", np.zeros((0, sim.culture.n))), np.float64)
        kept = kept[kept.shape[0] - min(sim.epoch, kept.shape[0]):]
        missing = np.full((sim.epoch - kept.shape[0], sim.culture.n), np.nan)
        sim.epoch_radius = list(np.concatenate([missing, kept]))
        steps = np.asarray(state["spike_steps"], np.int64)
        if steps.size:
            sim.spikes = [(steps, np.asarray(state["spike_neurons"], np.int32))]
        sim._strong = sim._strongest()
        return sim

    def _spike_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """All recorded spikes sorted by (step, neuron); kept that way for the next call."""
        if not self.spikes:
            return np.zeros(0, np.int64), np.zeros(0, np.int32)
        steps = np.concatenate([s for s, _ in self.spikes])
        neurons = np.concatenate([n for _, n in self.spikes])
        if len(self.spikes) > 1 or (steps.size > 1 and (np.diff(steps) < 0).any()):
            order = np.lexsort((neurons, steps))
            steps, neurons = steps[order], neurons[order]
            self.spikes = [(steps, neurons)]
        return steps, neurons

    def results(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        steps, neurons = self._spike_arrays()
        conn = self.engine.connectivity()
        arrays = {
            "spike_times": steps * self.cfg.run.dt, "spike_neurons": neurons,
            **{k: np.asarray(v) for k, v in self.history.items()},
            "final_radius": self.engine.radius(), "epoch_radius": self._epoch_radius(),
            "final_W": conn.W, "final_W_pre": conn.pre.astype(np.int32),
            "final_W_post": conn.post.astype(np.int32),
            "inhibitory": self.culture.inhibitory, "starter": self.culture.starter,
            "grid_shape": np.array([self.culture.height, self.culture.width]),
        }
        summary = {
            "epochs": self.epoch, "sim_seconds": self.sim_seconds, "wall_seconds": self.wall,
            "realtime_factor": self.sim_seconds / self.wall if self.wall else 0.0,
            "neurons": self.culture.n, "synapses": int(conn.size),
            "spikes_recorded": int(steps.size), "setup_seconds": self.setup_seconds,
            "compile_seconds": getattr(self.engine, "compile_seconds", 0.0),
            "backend": self.backend, "device": device_name(self.backend),
            "seed": self.cfg.run.seed, "finished": self.finished,
            **self.engine_summary(),
        }
        return arrays, summary

    def engine_summary(self) -> dict[str, Any]:
        fn = getattr(self.engine, "summary", None)
        return fn() if fn else {}

    def close(self) -> None:
        self.engine.close()


def _compile_note(engine: NetworkEngine) -> str:
    """The compiled CPU engine's first-use compile (or cache load) time for the status bar."""
    seconds = getattr(engine, "compile_seconds", 0.0)
    return f", compiled engine ready in {seconds:.1f} s (compile or cache load)" if seconds >= 0.05 else ""


def checkpoint_schema(cfg: NetworkConfig, state: Mapping[str, Any]) -> list[ArraySpec]:
    """The arrays :meth:`NetworkSimulation.state` writes, sized by ``cfg`` (neurons, epoch bins)
    and by the checkpoint's own synapse and spike counts (equal lengths within each group)."""
    n = cfg.culture.width * cfg.culture.height
    steps = cfg.run.epochs * cfg.steps_per_epoch
    bins = -(-cfg.steps_per_epoch // max(1, int(round(cfg.analysis.burst_bin / cfg.run.dt))))

    def length(name: str) -> int | None:
        a = np.asarray(state.get(name, np.zeros(0)))
        return a.shape[0] if a.ndim == 1 else None

    k, spikes, epochs = length("engine_syn_pre"), length("spike_steps"), length("hist_epoch_synapses")
    out = [ArraySpec("epoch", "int", (), 0, cfg.run.epochs),
           ArraySpec("step_in_epoch", "int", (), 0, cfg.steps_per_epoch),
           ArraySpec("wall", "float", (), 0), ArraySpec("pop", "float", (bins,), 0),
           ArraySpec("rate", "float", (n,), 0), ArraySpec("spike_steps", "int", (spikes,), 0, steps),
           ArraySpec("spike_neurons", "int", (spikes,), 0, n - 1),
           ArraySpec("epoch_radius", "float", (None, n), 0, optional=True, finite=False),
           ArraySpec("engine_step", "int", (), 0, steps), ArraySpec("engine_V", "float", (n,)),
           ArraySpec("engine_refrac", "int", (n,), 0, 2**31 - 1), ArraySpec("engine_gE", "float", (n,)),
           ArraySpec("engine_gI", "float", (n,)), ArraySpec("engine_hist", "int", (n,), 0),
           ArraySpec("engine_counts", "int", (n,), 0), ArraySpec("engine_radius", "float", (n,), 0),
           ArraySpec("engine_syn_pre", "int", (k,), 0, n - 1), ArraySpec("engine_syn_post", "int", (k,), 0, n - 1),
           ArraySpec("engine_syn_u", "float", (k,)), ArraySpec("engine_syn_r", "float", (k,)),
           ArraySpec("engine_syn_last", "int", (k,))]
    out += [ArraySpec(f"hist_{h}", "float", (epochs,), 0) for h in
            ("epoch_mean_radius", "epoch_mean_rate", "epoch_synapses", "epoch_bursts_per_minute",
             "epoch_wall_seconds")]
    return out
