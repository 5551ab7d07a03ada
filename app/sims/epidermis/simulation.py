"""The epidermis simulation: steps advanced in slices, a history of cells, layers and states,
frames for the GUI, results for the CLI, checkpoints in the canonical (engine-agnostic) state."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from app.sims.common.config import dotted_items, dump_yaml, parse_yaml, set_path, to_plain
from app.sims.common.checkpoint import refuse_mismatch, refuse_past_end, write_checkpoint
from app.sims.common.checkpoint_schema import ArraySpec, check_arrays, checked_config
from app.sims.common.engine import config_state, device_name, engine_state, make_engine
from app.sims.common.simulation import Simulation, freeze
from app.sims.common.steering import region_mask, steering_from_state, steering_state
from app.sims.epidermis import model
from app.sims.epidermis.config import EpidermisConfig, load_config
from app.sims.epidermis.engine import STATE_KEYS, EpidermisEngine
from app.sims.epidermis.frame import EpidermisFrame, element_colours

CPU_SLICE_SECONDS = 0.15       # wall time the CPU engine aims at per advance()
HISTORY_KEYS = ("step", "t", "cells", "layers", "basal_fraction", "suprabasal_fraction",
                "elements")


class EpidermisSimulation(Simulation):
    """A growing epidermis on the CPU or CUDA engine."""

    domain = "epidermis"

    def __init__(self, cfg: EpidermisConfig, backend: str, state: Mapping[str, np.ndarray] | None = None,
                 engine: EpidermisEngine | None = None):
        """From ``state`` (a tissue at a step of the run), else from the placed initial tissue,
        whose ``run.relax_steps`` relaxation steps are the first slices of :meth:`advance`."""
        self.cfg, self.backend = cfg, backend
        t0 = time.perf_counter()
        self.relax_left = 0            # relaxation steps still to run before step 0
        self.relax_seconds = 0.0
        self.growth_paused = False     # steering: the engine runs mode genes meanwhile
        if engine is None:
            if state is None:
                state = model.place_cells(cfg)
                self.relax_left = cfg.run.relax_steps
                if not self.relax_left:
                    state = model.relaxed(state, cfg)
            engine = make_engine("epidermis", backend, self._engine_config(cfg), dict(state))
        self.engine = engine
        self.setup_seconds = time.perf_counter() - t0
        self.wall = 0.0
        self.steps_run = 0             # steps done by this process (throughput)
        self.run_wall = 0.0
        self.history: dict[str, list] = {k: [] for k in HISTORY_KEYS}
        self._slice = cfg.run.slice_steps if backend == "cuda" else 10
        self._cells = None             # (centres, genes) of the current step, cached
        self.stopped: str | None = None

    @classmethod
    def from_config(cls, cfg: EpidermisConfig, backend: str) -> "EpidermisSimulation":
        path = Path(cfg.run.checkpoint) if cfg.run.checkpoint else None
        if path is not None and cfg.run.resume and path.exists():
            from app.sims.common.session import load_checkpoint
            return cls.restore(load_checkpoint(path, cls.domain), backend, cfg=cfg, path=path)
        sim = cls(cfg, backend)
        if not sim.relax_left:
            sim._record()
        return sim

    def _engine_config(self, cfg: EpidermisConfig) -> EpidermisConfig:
        """The config the engine runs now: the relaxation's (movement only) until step 0, mode
        genes while growth is paused, else ``cfg``."""
        if self.relax_left:
            return model.relaxation_config(cfg)
        return replace(cfg, run=replace(cfg.run, mode="genes")) if self.growth_paused else cfg

    # ---- the loop -----------------------------------------------------------------------
    @property
    def step(self) -> int:
        return 0 if self.relax_left else int(self.engine.step)

    @property
    def can_hand_over(self) -> bool:
        return not self.relax_left

    @property
    def sim_time(self) -> float:
        return self.step * self.cfg.run.dt

    @property
    def finished(self) -> bool:
        return self.step >= self.cfg.run.steps or self.stopped is not None

    def _check_finite(self) -> None:
        """Stop (with the reason) once a cell's centre or genes are not finite: a blow-up."""
        centres, genes = self.cells()
        bad = ~(np.isfinite(centres).all(axis=0) & np.isfinite(genes).all(axis=0))
        if bad.any():
            self.stopped = (f"step {self.step}: cell {int(np.flatnonzero(bad)[0])} has a non-finite "
                            "position or gene value (the mechanics blew up: lower run.dt)")

    def _relax(self) -> None:
        """A slice of the initial relaxation; at its end the tissue at step 0 on the run's engine."""
        start = time.perf_counter()
        n = min(self._slice, self.relax_left)
        try:
            self.engine.advance(n)
        except model.BlownUpError as exc:
            self.stopped = str(exc)
        self.relax_left -= n
        self._cells = None
        elapsed = time.perf_counter() - start
        self.relax_seconds += elapsed
        self.wall += elapsed
        self._adapt_slice(n, elapsed)
        if not self.relax_left and self.stopped is None:
            self._rebuild(self.cfg, model.relaxed(self.engine.state(), self.cfg))
            self._record()

    def _finish_relaxation(self) -> None:
        """The rest of the initial relaxation now (a change or a checkpoint is of step 0 on)."""
        while self.relax_left and self.stopped is None:
            self._relax()

    def _adapt_slice(self, n: int, elapsed: float) -> None:
        """The CPU engines' slice: about CPU_SLICE_SECONDS of wall time."""
        if self.backend != "cuda" and elapsed > 0 and n == self._slice:
            target = int(n * CPU_SLICE_SECONDS / elapsed)
            self._slice = int(np.clip(target, 1, max(2, 2 * n)))

    def advance(self, until: int | None = None, within: int = 0) -> EpidermisFrame:
        run = self.cfg.run
        if self.relax_left and self.stopped is None:
            self._relax()
        elif not self.finished and until != self.step:
            start = time.perf_counter()
            every = run.history_every
            next_sample = (self.step // every + 1) * every
            n = max(1, min(self._slice, next_sample - self.step, run.steps - self.step,
                           *(() if until is None or until < self.step else (until - self.step,))))
            before = self.step
            try:
                self.engine.advance(n)
            except model.BlownUpError as exc:      # stop with what the run had, and say why
                self.stopped = str(exc)
            self._cells = None
            if self.stopped is None:
                self._check_finite()
            if self.step % every == 0 or self.finished:
                self._record()
            elapsed = time.perf_counter() - start
            self.wall += elapsed
            self.run_wall += elapsed
            self.steps_run += n
            self._adapt_slice(n, elapsed)
            interval = self.cfg.growth.interval
            grew = run.mode == "full" and self.step // interval > before // interval
            if run.checkpoint and (grew or self.finished) and self.stopped is None:
                self.save_checkpoint(run.checkpoint)
        return self.frame()

    def cells(self) -> tuple[np.ndarray, np.ndarray]:
        """Centres (3, n) and genes (6, n) now (cached until the next slice)."""
        if self._cells is None:
            self._cells = self.engine.cells()
        return self._cells

    def _record(self) -> None:
        h = self.history
        if h["step"] and h["step"][-1] == self.step:
            return
        centres, genes = self.cells()
        n = centres.shape[1]
        supra = model.suprabasal(genes)
        h["step"].append(self.step)
        h["t"].append(self.step * self.cfg.run.dt)
        h["cells"].append(n)
        h["layers"].append(model.count_layers(centres[2], self.cfg.run.layer_thickness))
        h["basal_fraction"].append(float((~supra).mean()) if n else 0.0)
        h["suprabasal_fraction"].append(float(supra.mean()) if n else 0.0)
        h["elements"].append(int(self.engine.element_counts().sum()))

    # ---- frames -------------------------------------------------------------------------
    def frame(self) -> EpidermisFrame:
        cfg = self.cfg
        centres, genes = self.cells()
        pos, cell, etype = self.engine.elements()
        supra = model.suprabasal(genes)
        colour = element_colours(etype, cell, supra)
        layers = model.count_layers(centres[2], cfg.run.layer_thickness)
        n = centres.shape[1]
        rate = self.steps_run / self.run_wall if self.run_wall > 0 else 0.0
        return EpidermisFrame(
            progress=min(1.0, self.step / cfg.run.steps), done=self.finished,
            wall_seconds=self.wall, throughput=rate, throughput_unit="steps/s",
            status=self.stopped or (self._relax_status(n) if self.relax_left else
                                    f"step {self.step:,}/{cfg.run.steps:,}, {n} cell{'' if n == 1 else 's'}, "
                                    f"{layers} layer{'' if layers == 1 else 's'}, "
                                    f"{supra.mean() if n else 0:.0%} suprabasal" + _compile_note(self.engine)),
            step=self.step, steps=cfg.run.steps, t=self.step * cfg.run.dt, mode=cfg.run.mode,
            cells=n, elements=int(pos.shape[0]), box=float(model.box_of(cfg) or 0.0),
            positions=freeze(pos), element_cell=freeze(cell), element_type=freeze(etype),
            element_colour=freeze(colour), centres=freeze(centres.T), genes=freeze(genes.T),
            suprabasal=freeze(supra), layers=layers,
            history={k: freeze(np.asarray(v)) for k, v in self.history.items()})

    def _relax_status(self, cells: int) -> str:
        total = self.cfg.run.relax_steps
        return (f"relaxing the initial {cells} cell{'' if cells == 1 else 's'} (movement only) before "
                f"step 0: {total - self.relax_left:,}/{total:,}" + _compile_note(self.engine))

    # ---- steering -----------------------------------------------------------------------
    def apply_change(self, key: str, value: Any, region: Mapping[str, Any] | None) -> Any:
        """``wound``, ``growth.paused`` (run.mode genes while paused), a mechanics, genes, growth
        or live run setting (dotted key, see ``config.steerables``): the config checked as a
        whole, the engine rebuilt from its exact state; at step 0 (after the relaxation)."""
        self._finish_relaxation()
        if key == "wound":
            self._rebuild(self.cfg, wound(self.engine.state(), self.cfg, region))
            return None
        if key == "growth.paused":
            old, self.growth_paused = self.growth_paused, bool(value)
            self._rebuild(self.cfg, self.engine.state())
            return old
        return self._set_setting(key, value)

    def _set_setting(self, key: str, value: Any) -> Any:
        data = to_plain(self.cfg)
        old = dict(dotted_items(data))[key]
        set_path(data, key, dump_yaml(value))
        cfg = load_config(parse_yaml(dump_yaml(data), "<steering>"))
        if cfg != self.cfg:
            self._rebuild(cfg, self.engine.state())
        return old

    def _rebuild(self, cfg: EpidermisConfig, state: Mapping[str, np.ndarray]) -> None:
        """The engine again, from ``state`` with ``cfg`` (run.mode genes while growth is paused)."""
        self.engine.close()
        self.engine = make_engine("epidermis", self.backend, self._engine_config(cfg), dict(state))
        self.cfg = cfg
        self._cells = None


    # ---- checkpoint and results ---------------------------------------------------------
    def state(self) -> dict[str, Any]:
        self._finish_relaxation()       # a checkpoint is of a step of the run
        hist = {f"hist_{k}": np.asarray(v, np.float64) for k, v in self.history.items()}
        return {**config_state(self.cfg), **steering_state(self.steered), "wall": np.float64(self.wall),
                **hist, **engine_state(self.engine)}

    def save_checkpoint(self, path: str | Path) -> Path:
        """The state as one uncompressed NPZ, written atomically."""
        return write_checkpoint(path, self.state(), self.domain)

    @classmethod
    def restore(cls, state: Mapping[str, Any], backend: str, cfg: EpidermisConfig | None = None,
                path: str | Path | None = None) -> "EpidermisSimulation":
        saved = checked_config(state, load_config, path)
        check_arrays(state, checkpoint_schema(saved, state), path)
        cfg = cfg or saved
        refuse_mismatch(path, saved, cfg, ("tissue", "run.mode"), "tissue or mode")
        refuse_past_end(path, int(np.asarray(state["engine_step"])), cfg.run.steps, "run.steps", "steps")
        engine_state = {k: np.asarray(state[f"engine_{k}"]) for k in STATE_KEYS}
        sim = cls(cfg, backend, state=engine_state)
        sim.steered = steering_from_state(state)
        paused = [e.value for e in sim.steered if e.key == "growth.paused"]
        if paused and paused[-1]:
            sim.growth_paused = True
            sim._rebuild(sim.cfg, sim.engine.state())
        sim.wall = float(state["wall"])
        for k in HISTORY_KEYS:
            values = np.asarray(state[f"hist_{k}"])
            sim.history[k] = [float(v) for v in values] if k in ("t", "basal_fraction",
                                                                  "suprabasal_fraction") \
                else [int(v) for v in values]
        if not sim.history["step"]:
            sim._record()
        return sim

    def results(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        centres, genes = self.cells()
        pos, cell, etype = self.engine.elements()
        supra = model.suprabasal(genes)
        n = centres.shape[1]
        arrays = {"positions": pos, "element_cell": cell, "element_type": etype,
                  "cell_state": genes.T, "cell_centres": centres.T,
                  "cell_suprabasal": supra,
                  **{f"history_{k}": np.asarray(v) for k, v in self.history.items()}}
        rate = self.steps_run / self.run_wall if self.run_wall > 0 else 0.0
        summary = {
            "cells": n, "elements": int(pos.shape[0]), "steps": self.step,
            "wall_seconds": self.wall, "steps_per_second": rate,
            "layers": model.count_layers(centres[2], self.cfg.run.layer_thickness),
            "suprabasal_fraction": float(supra.mean()) if n else 0.0,
            "mode": self.cfg.run.mode, "search": self.cfg.run.search,
            "boundary": self.cfg.tissue.boundary, "backend": self.backend,
            "device": device_name(self.backend), "setup_seconds": self.setup_seconds,
            "relax_seconds": self.relax_seconds, "seed": self.cfg.tissue.seed,
            "compile_seconds": getattr(self.engine, "compile_seconds", 0.0),
            "finished": self.finished and self.stopped is None,
        }
        if self.stopped is not None:
            summary["stopped"] = {"step": self.step, "reason": self.stopped}
        return arrays, summary

    def close(self) -> None:
        self.engine.close()


def _compile_note(engine) -> str:
    """The compiled CPU engine's first-use compile (or cache load) time for the status bar."""
    seconds = getattr(engine, "compile_seconds", 0.0)
    return f", compiled engine ready in {seconds:.1f} s (compile or cache load)" if seconds >= 0.05 else ""


def checkpoint_schema(cfg: EpidermisConfig, state: Mapping[str, Any]) -> list[ArraySpec]:
    """The arrays :meth:`EpidermisSimulation.state` writes: the cell capacity is the
    checkpoint's own (it doubles as the tissue grows), at least the config's initial one."""
    count = np.asarray(state.get("engine_count", np.zeros(0)))
    cap = count.shape[0] if count.ndim == 1 and count.shape[0] >= model.capacity_for(cfg.tissue.cells) \
        else model.capacity_for(cfg.tissue.cells)
    e = cfg.tissue.max_elements
    hist = np.asarray(state.get("hist_step", np.zeros(0)))
    h = hist.shape[0] if hist.ndim == 1 else None
    return [ArraySpec("wall", "float", (), 0), ArraySpec("engine_step", "int", (), 0, cfg.run.steps),
            ArraySpec("engine_event", "int", (), 0, cfg.run.steps),
            ArraySpec("engine_n_cells", "int", (), 1, cap), ArraySpec("engine_pos", "float", (3, e, cap)),
            ArraySpec("engine_etype", "int", (e, cap), 0, 1), ArraySpec("engine_count", "int", (cap,), 0, e),
            ArraySpec("engine_genes", "float", (6, cap))] + [
        ArraySpec(f"hist_{k}", "float", (h,), 0) for k in HISTORY_KEYS]


def wound(state: Mapping[str, np.ndarray], cfg: EpidermisConfig, region: Mapping[str, Any] | None) -> dict:
    """``state`` without the cells whose centre is in ``region`` (the others keep their order)."""
    out = {k: np.array(v) for k, v in state.items()}
    n = int(out["n_cells"])
    centres = model.centroids(out["pos"], out["count"], n, model.box_of(cfg))
    gone = region_mask(region or {"kind": "indices", "indices": []}, centres.T)
    keep = np.flatnonzero(~gone)
    for name, axis in (("pos", 2), ("etype", 1), ("count", 0), ("genes", 1)):
        a = out[name]
        moved = np.take(a, keep, axis=axis)
        index = [slice(None)] * a.ndim
        index[axis] = slice(0, keep.size)
        tail = list(index)
        tail[axis] = slice(keep.size, n)
        a[tuple(index)] = moved
        a[tuple(tail)] = 0
    out["n_cells"] = np.asarray(keep.size, out["n_cells"].dtype)
    return out
