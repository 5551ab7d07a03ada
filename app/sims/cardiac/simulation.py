"""The cardiac simulation: a tissue engine advanced in slices, frames for the GUI, results."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from app.sims.cardiac.config import STIMULUS_MS, CardiacConfig, for_backend, load_config
from app.sims.cardiac.engine import Problem, RunStopped
from app.sims.cardiac.mesh import Mesh
from app.sims.cardiac.metrics import beat_metrics, spontaneous_beat
from app.sims.cardiac.readouts import SingularityTracker, conduction_velocity, repolarisation
from app.sims.cardiac.stimulate import cells_near, kick_voltage
from app.sims.common.checkpoint import CheckpointError, refuse_mismatch, refuse_past_end, write_checkpoint
from app.sims.common.config import ConfigError
from app.sims.common.checkpoint_schema import ArraySpec, check_arrays, checked_config, like
from app.sims.common.engine import (config_state, device_name, engine_part,
                                     engine_state, make_engine)
from app.sims.common.simulation import Frame, Simulation, freeze, slice_after_change
from app.sims.common.steering import region_mask, steering_from_state, steering_state

CPU_SLICE_SECONDS = 0.15
RESTITUTION_DEFINITIONS = (
    "apd90_per_beat_ms: from the beat's max dV/dt to V below peak - 0.9 (peak - rest) of the beat "
    "itself (rest = V at its stimulus onset), as apd90_ms; apd90_s1_ms: the same with the rest of "
    "the reference beat (V at the onset of the train's last S1; dynamic: of the longest period's last "
    "beat) and the beat's own peak; "
    "di_*: from the previous beat's repolarisation (same definition) to this beat's max dV/dt")
# config keys a resumed run may not change (the run length, checkpoints and live views may)
FIXED_ON_RESUME = ("mesh", "D", "model", "protocol.stimuli", "solver", "output.random_probes",
                   "output.probe_cells", "output.probe_seed", "output.dt_save",
                   "output.activation_threshold", "restitution")


@dataclass(frozen=True)
class CardiacFrame(Frame):
    t: float = 0.0
    t_end: float = 0.0
    mesh_kind: str = "sheet"
    shape: tuple[int, int] | None = None
    V: np.ndarray = None                  # (N,) now
    probe_index: np.ndarray = None
    probe_t: np.ndarray = None
    probe_V: np.ndarray = None            # (T, P)
    h_t: np.ndarray | None = None         # step-size history (adaptive)
    h: np.ndarray | None = None
    steps_accepted: int = 0
    steps_rejected: int = 0
    activation_time: np.ndarray | None = None   # first activation so far (NaN: not yet); tissue only
    apd90: np.ndarray | None = None             # when done
    stopped: str = ""
    mesh: Mesh | None = None              # positions, faces, shape: what the tissue view draws
    singularities: np.ndarray | None = None   # (K, 3) phase singularities (rotor cores) now, mm


class CardiacSimulation(Simulation):
    domain = "cardiac"

    def __init__(self, cfg: CardiacConfig, backend: str, problem: Problem | None = None):
        self.cfg, self.backend = cfg, backend
        t0 = time.perf_counter()
        try:
            self.problem = problem or Problem.from_config(for_backend(cfg, backend))
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        self.engine = make_engine("cardiac", backend, self.problem)
        m = self.problem.mesh            # one read-only copy for the frames (the views draw it)
        self.frame_mesh = replace(m, positions=freeze(m.positions), neighbours=freeze(m.neighbours),
                                  inv_d2=freeze(m.inv_d2), faces=None if m.faces is None else freeze(m.faces))
        self._ecg, self._ecg_rows = None, []
        if cfg.mesh.electrodes and m.elements is not None:
            from app.sims.cardiac.ecg import Electrodes
            try:
                self._ecg = Electrodes(m, np.asarray(cfg.mesh.electrodes, float))
            except ValueError as exc:
                raise ConfigError(f"mesh.electrodes: {exc}") from None
            self._ecg_rows = [(self.engine.t, self._ecg(self.engine.voltage()))]
        self._tracker = SingularityTracker(m, cfg.output.singularity_delay)
        self._tracker.observe(self.engine.t, self.engine.voltage())
        out = cfg.output         # V kept on grids of simulated time by the engine, whatever the slices
        self._readouts = (self.engine.keep_voltage(out.readout_every)
                          if self._ecg is not None or self._tracker.active else None)
        self._series_grid = self.engine.keep_voltage(out.series_every) if out.series_every > 0 else None
        self._series: list[tuple[float, np.ndarray]] = []
        if self._series_grid is not None:
            self._series.append((self.engine.t, np.asarray(self.engine.voltage(), np.float32)))
        self.setup_seconds = time.perf_counter() - t0
        self.wall = 0.0
        self._steps = 16
        self.stopped: RunStopped | None = None
        self._last_checkpoint = 0.0
        # steering: the configured coupling and parameters, and the cells made scar
        self._base_inv_d2 = np.array(m.inv_d2, copy=True)
        self._base_field = None if self.problem.param_field is None else self.problem.param_field.copy()
        self.ablated = np.zeros(m.n_cells, bool)

    @classmethod
    def from_config(cls, cfg: CardiacConfig, backend: str) -> "CardiacSimulation":
        path = Path(cfg.run.checkpoint) if cfg.run.checkpoint else None
        if path is not None and cfg.run.resume and path.exists():
            from app.sims.common.session import load_checkpoint
            return cls.restore(load_checkpoint(path, cls.domain), backend, cfg=cfg, path=path)
        return cls(cfg, backend)

    @property
    def finished(self) -> bool:
        return self.stopped is not None or self.engine.finished

    @property
    def step(self) -> int:
        """Time steps tried so far (accepted and rejected)."""
        return int(self.engine.steps_accepted + self.engine.steps_rejected)

    @property
    def sim_time(self) -> float:
        return float(self.engine.t)

    def advance(self, until: int | None = None, within: int = 0) -> CardiacFrame:
        if not self.finished and until != self.step:
            start = time.perf_counter()
            try:
                if until is not None:
                    self.engine.advance(min(self._steps if self.backend != "cuda" else 1 << 30,
                                            until - self.step))
                elif self.backend == "cuda":
                    self.engine.advance_time(self.cfg.output.snapshot_interval)
                else:
                    self.engine.advance(self._steps)
            except RunStopped as exc:
                self.stopped = exc
            self._take_readouts()
            run = self.cfg.run
            if run.checkpoint and self.stopped is None and (
                    self.engine.finished or self.engine.t >= self._last_checkpoint + run.checkpoint_every):
                self.save_checkpoint(run.checkpoint)
            elapsed = time.perf_counter() - start
            self.wall += elapsed
            if self.backend != "cuda":
                scale = CPU_SLICE_SECONDS / max(elapsed, 1e-4)
                self._steps = int(np.clip(self._steps * min(max(scale, 0.5), 2.0), 1, 1 << 20))
        return self.frame()

    def frame(self) -> CardiacFrame:
        e = self.engine
        pt, pv = e.recordings()
        hist = getattr(e, "h_history", None)
        done = self.finished
        acts = e.activation() if done else None
        first = acts["activation_time"] if acts else e.activation_time() if self.problem.n_cells > 1 else None
        rate = e.t / self.wall if self.wall > 0 else 0.0
        status = f"t = {e.t:.2f} of {self.problem.t_end:g} ms, {e.steps_accepted} steps"
        if e.steps_rejected:
            status += f" ({e.steps_rejected} rejected)"
        compile_s = getattr(e, "compile_seconds", 0.0)   # the compiled CPU engine's first use
        if compile_s >= 0.05:
            status += f", compiled engine ready in {compile_s:.1f} s (compile or cache load)"
        if self.stopped is not None:
            status = str(self.stopped)
        return CardiacFrame(
            progress=min(e.t / self.problem.t_end, 1.0), done=done, wall_seconds=self.wall,
            throughput=rate, throughput_unit="sim ms/s", status=status, t=e.t,
            t_end=self.problem.t_end, mesh_kind=self.problem.mesh.kind, shape=self.problem.mesh.shape,
            V=freeze(e.voltage()), probe_index=freeze(self.problem.probes), probe_t=freeze(pt),
            probe_V=freeze(pv),
            h_t=freeze(np.array([x[0] for x in hist])) if hist else None,
            h=freeze(np.array([x[1] for x in hist])) if hist else None,
            steps_accepted=e.steps_accepted, steps_rejected=e.steps_rejected, mesh=self.frame_mesh,
            activation_time=freeze(first) if first is not None else None,   # live: CV arrows
            apd90=freeze(acts["apd90"]) if acts and done else None,
            singularities=freeze(self._tracker.now), stopped=str(self.stopped or ""))

    def _take_readouts(self) -> None:
        """The pseudo-ECG rows, singularities and V series of the grid times the last advance passed."""
        if self._readouts is not None:
            for t, v in self._readouts.take():
                if self._ecg is not None:
                    self._ecg_rows.append((t, self._ecg(v)))
                self._tracker.observe(t, v)
        if self._series_grid is not None:
            self._series += [(t, v.astype(np.float32)) for t, v in self._series_grid.take()]

    # ---- steering -------------------------------------------------------------------------
    def apply_change(self, key: str, value: Any, region: Mapping[str, Any] | None) -> Any:
        """``ablate``, ``restore``, ``stimulate``, ``model.<paintable parameter>`` (a value) and
        ``scale.<paintable parameter>`` (a factor of the configured value) on the cells of
        ``region`` (see ``config.steerables``); the engine's arrays change in place. A parameter
        gesture returns the median in the region of what it replaced (value or factor)."""
        if self.backend != "cuda":        # a short slice next: the first frame with the change comes soon
            self._steps = slice_after_change(self._steps)
        cells = self._cells(region)
        if key == "stimulate":
            kick_voltage(self.engine, np.flatnonzero(cells), -float(value if value is not None else -40.0)
                         * STIMULUS_MS)
            return None
        field = None if self.problem.param_field is None else self.problem.param_field.copy()
        old: float | None = None
        if key == "ablate":
            self.ablated |= cells
        elif key == "restore":
            self.ablated &= ~cells
            if field is not None:
                field[:, cells] = self._base_field[:, cells]
        else:
            kind, _, name = key.partition(".")
            k = self.problem.model.parameter_names.index(name)
            now, base = field[k, cells], self._base_field[k, cells]
            if kind == "scale":         # of the configured value: strokes over one spot do not compound
                factors = now[base != 0] / base[base != 0]
                old = float(np.median(factors)) if factors.size else None
                field[k, cells] = value * base
            else:
                old = float(np.median(now)) if now.size else None
                field[k, cells] = value
        self._push(field)
        return old

    def _cells(self, region: Mapping[str, Any] | None) -> np.ndarray:
        """Mask of the cells in a region (a brush reaches at least its nearest cell)."""
        positions = self.problem.mesh.positions
        if region is not None and region["kind"] == "brush":
            centre = np.zeros(positions.shape[1])
            centre[:len(region["centre"])] = region["centre"][:positions.shape[1]]
            mask = np.zeros(len(positions), bool)
            mask[cells_near(positions, centre, region["radius"])] = True
            return mask
        return region_mask(region or {"kind": "indices", "indices": []}, positions)

    def _push(self, field: np.ndarray | None) -> None:
        """The coupling without the scar's edges and ``field`` to the engine."""
        keep = ~self.ablated
        p = self.problem
        inv_d2 = (self._base_inv_d2 * (keep[:, None] & keep[p.mesh.neighbours])).astype(self._base_inv_d2.dtype)
        self.engine.set_tissue(inv_d2, field)
        p.mesh = replace(p.mesh, inv_d2=inv_d2)     # the engine's problem (the CUDA engine's too)
        if field is not None:
            p.param_field = field

    # ---- checkpoint and results ---------------------------------------------------------
    def state(self) -> dict[str, Any]:
        hist = getattr(self.engine, "h_history", None) or []
        steered = {} if not self.steered else {"steer_ablated": self.ablated.copy(), **(
            {} if self.problem.param_field is None else {"steer_param_field": self.problem.param_field.copy()})}
        kept = {} if self._ecg is None else {"ecg_t": np.array([r[0] for r in self._ecg_rows]),
                                             "ecg": np.array([r[1] for r in self._ecg_rows])}
        if self._series_grid is not None:
            kept.update(series_t=np.array([r[0] for r in self._series]),
                        series_v=np.array([r[1] for r in self._series], np.float32))
        return {**config_state(self.cfg), **steering_state(self.steered), **steered, **kept,
                **self._tracker.state(), "wall": np.float64(self.wall), "t": np.float64(self.engine.t),
                "h_history": np.array(hist, np.float64).reshape(-1, 2),
                "state_names": np.array(self.problem.model.states), **engine_state(self.engine)}

    def save_checkpoint(self, path: str | Path) -> Path:
        """The state as one NPZ (with the whole step-size history), written atomically."""
        self._last_checkpoint = self.engine.t
        return write_checkpoint(path, self.state(), self.domain)

    @classmethod
    def restore(cls, state: Mapping[str, Any], backend: str, cfg: CardiacConfig | None = None,
                path: str | Path | None = None) -> "CardiacSimulation":
        saved = checked_config(state, load_config, path)
        cfg = cfg or saved
        refuse_mismatch(path, saved, cfg, FIXED_ON_RESUME, "tissue, model or solver")
        check_arrays(state, [ArraySpec("t", "float", (), 0, optional=True), ArraySpec("wall", "float", (), 0),
                             ArraySpec("h_history", "float", (None, 2), optional=True)], path)
        done = float(state["t"] if "t" in state else state["engine_t"])
        refuse_past_end(path, done, cfg.protocol.t_end, "protocol.t_end", "ms")
        sim = cls(cfg, backend)
        _check_state_order(state, sim.problem.model, path)
        check_arrays(state, checkpoint_schema(sim.engine.state(), state), path)
        try:
            sim.engine.restore(engine_part(state))
        except (KeyError, ValueError) as exc:
            raise CheckpointError(path or "<state>", f"cannot resume it on this engine: {exc}") from None
        sim._restore_readouts(state, path)
        if "h_history" in state and hasattr(sim.engine, "h_history"):
            sim.engine.h_history = [(float(t), float(h)) for t, h in np.asarray(state["h_history"])]
        sim.wall = float(state["wall"])
        sim._last_checkpoint = sim.engine.t
        sim.steered = steering_from_state(state)
        if "steer_ablated" in state:
            n, field = sim.problem.n_cells, sim.problem.param_field
            check_arrays(state, [ArraySpec("steer_ablated", "bool", (n,)), ArraySpec(
                "steer_param_field", "float", None if field is None else field.shape, optional=True)], path)
            sim.ablated = np.asarray(state["steer_ablated"], bool).copy()
            sim._push(None if field is None else np.array(state["steer_param_field"], field.dtype))
        return sim

    def _restore_readouts(self, state: Mapping[str, Any], path: str | Path | None) -> None:
        """The pseudo-ECG rows, the tracking and the V series so far (a checkpoint without them:
        from now on)."""
        n, v = self.problem.n_cells, self.engine.voltage()
        if self._series_grid is not None:
            check_arrays(state, [ArraySpec("series_t", "float", (None,), 0, optional=True),
                                 ArraySpec("series_v", "float", (None, n), optional=True)], path)
            _same_lengths(state, ("series_t", "series_v"), path)
            rows = zip(state["series_t"], state["series_v"]) if "series_t" in state else [(self.engine.t, v)]
            self._series = [(float(t), np.asarray(row, np.float32)) for t, row in rows]
        if self._ecg is not None:
            m = len(self._ecg.positions)
            check_arrays(state, [ArraySpec("ecg_t", "float", (None,), 0, optional=True),
                                 ArraySpec("ecg", "float", (None, m), optional=True)], path)
            _same_lengths(state, ("ecg_t", "ecg"), path)
            if "ecg_t" in state:
                self._ecg_rows = [(float(t), np.asarray(row, float)) for t, row in zip(state["ecg_t"], state["ecg"])]
            else:
                self._ecg_rows = [(self.engine.t, self._ecg(v))]
        if not self._tracker.active:
            return
        specs = [ArraySpec("tracker_ps_t", "float", (None,), 0), ArraySpec("tracker_ps_xyz", "float", (None, 3)),
                 ArraySpec("tracker_ps_charge", "int", (None,), -1, 1), ArraySpec("tracker_now", "float", (None, 3)),
                 ArraySpec("tracker_past_t", "float", (None,), 0), ArraySpec("tracker_past_v", "float", (None, n))]
        if "tracker_past_t" in state:
            check_arrays(state, specs, path)
            _same_lengths(state, ("tracker_ps_t", "tracker_ps_xyz", "tracker_ps_charge"), path)
            _same_lengths(state, ("tracker_past_t", "tracker_past_v"), path)
            self._tracker.restore(state)
        else:
            self._tracker = SingularityTracker(self.problem.mesh, self.cfg.output.singularity_delay)
            self._tracker.observe(self.engine.t, v)

    def results(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        e, p = self.engine, self.problem
        pt, pv = e.recordings()
        acts = e.activation()
        arrays = {"probe_index": p.probes, "probe_t": pt, "probe_V": pv,
                  "activation_time": acts["activation_time"], "activation_last": acts["activation_last"],
                  "apd90": acts["apd90"], "V_final": e.voltage()}
        arrays["repolarisation_time"] = repolarisation(acts["activation_time"], acts["apd90"])
        arrays["cv_vectors"] = conduction_velocity(p.mesh, acts["activation_time"])
        arrays.update(self._tracker.arrays())
        if self._series:
            arrays["V_series_t"] = np.array([s[0] for s in self._series])
            arrays["V_series"] = np.stack([s[1] for s in self._series])
        hist = getattr(e, "h_history", None)
        if hist:
            arrays["h_t"] = np.array([x[0] for x in hist])
            arrays["h"] = np.array([x[1] for x in hist])
        summary: dict[str, Any] = {
            "steps_accepted": int(e.steps_accepted), "steps_rejected": int(e.steps_rejected),
            "sim_ms": float(e.t), "wall_seconds": self.wall, "setup_seconds": self.setup_seconds,
            "compile_seconds": getattr(self.engine, "compile_seconds", 0.0),
            "sim_ms_per_wall_second": e.t / self.wall if self.wall else 0.0,
            "backend": self.backend, "device": device_name(self.backend),
            "method": p.cfg.solver.method, "rush_larsen": p.tableau is not None and p.tableau.rl,
            "precision": p.cfg.solver.precision, "method_requested": self.cfg.solver.method,
            "n_cells": p.n_cells, "mesh": p.mesh.kind,
            "finished": self.finished and self.stopped is None,
        }
        if self._ecg is not None:       # sampled every output.readout_every ms
            arrays["ecg_t"] = np.array([r[0] for r in self._ecg_rows])
            arrays["ecg"] = np.array([r[1] for r in self._ecg_rows])
            arrays["ecg_electrodes"] = self._ecg.positions
        if self.cfg.mesh.kind == "file":
            from app.sims.cardiac.fem import settings_report
            summary["mesh_quality"] = settings_report(self.cfg.mesh)[1]
        if self.stopped is not None:
            summary["stopped"] = {"t_ms": self.stopped.t, "cell": self.stopped.cell,
                                  "reason": self.stopped.reason}
        hist_states = e.cell_history() if hasattr(e, "cell_history") else None
        if p.n_cells == 1 and hist_states is not None:
            t, ys = hist_states
            dv = p.model.rates(ys, p.cell_stimulus(t), p.cell_params)[0][0]
            arrays["cell_t"], arrays["cell_states"], arrays["cell_dVdt"] = t, ys.T, dv
            summary.update(self._beat(t, ys[0], dv))
            trace = (t, ys[0], dv)
        else:
            trace = (pt, pv[:, 0], None)          # the first probe; dV/dt by differences
            if p.n_cells == 1 and len(pt) > 3:    # CUDA: every accepted step with dt_save 0
                summary.update(self._beat(pt, pv[:, 0], None))
        if self.cfg.restitution.kind != "none" and len(trace[0]) > 3:
            rows = self.restitution(*trace)
            summary["restitution"] = {"apd_shown": self.cfg.restitution.apd, "rows": rows,
                                      "definitions": RESTITUTION_DEFINITIONS}
            for key in ("interval_ms", "apd90_per_beat_ms", "di_per_beat_ms", "apd90_s1_ms", "di_s1_ms"):
                arrays[f"restitution_{key}"] = np.array([r[key] for r in rows])
        return arrays, summary

    def restitution(self, t: np.ndarray, v: np.ndarray, dv: np.ndarray | None = None) -> list[dict]:
        """The restitution rows the trace covers so far (also for live plots)."""
        from app.sims.cardiac.config import restitution_pulses
        from app.sims.cardiac.restitution import curve
        return curve(t, v, restitution_pulses(self.cfg), dv, t_end=self.problem.t_end)

    def _beat(self, t: np.ndarray, v: np.ndarray, dv: np.ndarray | None) -> dict[str, Any]:
        """Rest, peak, max dV/dt and APD90 of the analysed beat: the last stimulus onset followed
        by 400 ms, or a self-oscillating cell's last spontaneous beat."""
        onset, window = _analysed_onset(self.problem), 1000.0
        if onset is None:
            onset, window = spontaneous_beat(t, v, self.cfg.output.activation_threshold) or (None, 0)
        if onset is None:
            return {}
        return {**beat_metrics(t, v, onset, dv, window), "beat_onset_ms": onset}

    def close(self) -> None:
        self.engine.close()


def _same_lengths(state: Mapping[str, Any], keys: tuple[str, ...], path: str | Path | None) -> None:
    """Refuse a checkpoint whose arrays ``keys`` (those present) have different numbers of rows."""
    lengths = {k: len(state[k]) for k in keys if k in state}
    if len(set(lengths.values())) > 1:
        raise CheckpointError(path or "<state>", f"the arrays {', '.join(lengths)} have different lengths "
                              f"{list(lengths.values())} (the checkpoint is damaged or was edited)")
    if lengths and len(lengths) < len(keys):
        raise CheckpointError(path or "<state>", f"of the arrays {', '.join(keys)} only {', '.join(lengths)} "
                              "are there (the checkpoint is damaged or was edited)")


def _check_state_order(state: Mapping[str, Any], model, path: str | Path | None) -> None:
    """Refuse a checkpoint whose states are in another order than the model's now (its
    ``state_names``); one without them (written before they were saved) only where the model has
    no coupled gate, whose place among the gates changed then."""
    names = state.get("state_names")
    if names is None:
        if model.imported.n_coupled:
            raise CheckpointError(path or "<state>", "it does not name its states, and this model's "
                                  "gate order changed since (coupled gates first): rerun from the start")
        return
    if tuple(str(n) for n in np.asarray(names).ravel()) != tuple(model.states):
        raise CheckpointError(path or "<state>", "its states are not this model's, in this order: "
                              "rerun from the start")


def _analysed_onset(p: Problem) -> float | None:
    """The last stimulus onset followed by at least 400 ms of run (else the first)."""
    onsets = []
    for start, _, amplitude, period, count in p.stim_table[:len(p.cfg.protocol.stimuli)]:
        if amplitude == 0.0:
            continue
        onsets += list(start + period * np.arange(int(count)))
    onsets = sorted(o for o in onsets if o < p.t_end)
    if not onsets:
        return None
    full = [o for o in onsets if p.t_end - o >= 400.0]
    return float(full[-1] if full else onsets[0])


def checkpoint_schema(fresh: Mapping[str, Any], state: Mapping[str, Any]) -> list:
    """The engine arrays of a checkpoint, shaped like those of the engine just built for its
    config (``fresh``, its ``state()``); none where the checkpoint is another engine's (the
    engine's own restore says which one to resume it with)."""
    own = "cuda_y" if "cuda_y" in fresh else "y"
    if f"engine_{own}" not in state:
        return []
    return like(fresh, "engine_", free=("probe_t", "probe_v", "h_history"),
                nonfinite=("act_first", "act_last", "vmax", "t_rep", "cuda_maps",
                           "cuda_cd"))        # cuda_cd: inf = no readout pause due
