"""The science check: a development run within a wall-time budget, resumable.

    python -m app.sims.network.develop CONFIG --out DIR [--budget 300] [--backend cuda] [--set k=v]

Runs whole epochs until the budget is spent (or the run ends), checkpointing after every
epoch to ``DIR/checkpoint.npz`` and resuming from it when it exists; writes
``DIR/history.csv`` (one row per epoch), ``DIR/results.npz`` and ``DIR/summary.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

import numpy as np

from app.compute.device import backend_context, resolve_backend
from app.sims.common.output import save_csv
from app.sims.common.session import write_run_outputs
from app.sims.common.simulation import load_run_config
from app.sims.network.simulation import NetworkSimulation

HISTORY = ("epoch_mean_radius", "epoch_mean_rate", "epoch_synapses", "epoch_bursts_per_minute",
           "epoch_wall_seconds")


def write_history(path: Path, history: dict) -> None:
    n = len(history["epoch_mean_radius"])
    save_csv(path, ["epoch", *HISTORY], [np.arange(1, n + 1), *(np.asarray(history[k]) for k in HISTORY)])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget", type=float, default=300.0, help="wall seconds")
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    _, cfg = load_run_config(args.config, overrides=args.overrides)
    cfg = dataclasses.replace(cfg, run=dataclasses.replace(cfg.run, checkpoint=str(out / "checkpoint.npz"),
                                                           resume=True))
    backend, reason = resolve_backend(args.backend)
    print(reason, flush=True)
    start = time.perf_counter()
    with backend_context(backend):
        sim = NetworkSimulation.from_config(cfg, backend)
        print(f"starting at epoch {sim.epoch}", flush=True)
        last_epoch_wall = 0.0
        while not sim.finished:
            elapsed = time.perf_counter() - start
            if sim.step_in_epoch == 0 and elapsed + 1.5 * last_epoch_wall > args.budget:
                break
            t0 = time.perf_counter()
            epoch = sim.epoch
            while sim.epoch == epoch and not sim.finished:
                sim.advance()
            last_epoch_wall = time.perf_counter() - t0
            h = sim.history
            print(f"epoch {sim.epoch:4d}  radius {h['epoch_mean_radius'][-1]:.4f}  rate "
                  f"{h['epoch_mean_rate'][-1]:.3f} Hz  synapses {h['epoch_synapses'][-1]:7d}  "
                  f"bursts/min {h['epoch_bursts_per_minute'][-1]:6.2f}  ({last_epoch_wall:.2f} s)", flush=True)
        arrays, summary = sim.results()
        sim.close()
    write_history(out / "history.csv", sim.history)
    arrays = {k: v for k, v in arrays.items() if k not in ("spike_times", "spike_neurons")}
    write_run_outputs(out, cfg, arrays, summary)
    print(f"{summary['epochs']} epochs, {summary['sim_seconds']:.0f} s simulated in "
          f"{time.perf_counter() - start:.0f} s wall", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
