"""What the channel panel writes: best parameters (YAML), fitted traces and convergence (CSV),
and the run's arrays (NPZ, the keys of ``results.npz``). No Qt."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from app.sims.channel.data import save_csv_traces
from app.sims.channel.protocol import Protocol
from app.sims.common.config import dump_yaml
from app.sims.common.output import save_csv, save_npz, save_text


def best_parameters(frame) -> dict[str, float]:
    return {name: float(x) for name, x in zip(frame.param_names, frame.best_params)}


def export_best_parameters(path: str | Path, frame) -> Path:
    """``name: value`` for every parameter, headed by a comment with chi^2 and the generation."""
    head = f"# best individual: chi2 = {frame.best_chi2:.10g} at generation {frame.generation}\n"
    return save_text(path, head + dump_yaml(best_parameters(frame)))


def export_traces(path: str | Path, frame, protocol: Protocol) -> Path:
    """The best individual's currents in the CSV layout the data loader reads."""
    if protocol.n_points != len(frame.best_traces):
        raise ValueError(f"the protocol has {protocol.n_points} points, the fit {len(frame.best_traces)}")
    save_csv_traces(path, protocol, np.asarray(frame.best_traces, float))
    return Path(path)


def export_history(path: str | Path, frame) -> Path:
    """One row per generation: generation, best chi^2, median chi^2, wall seconds."""
    best = np.asarray(frame.history_best, float)
    return save_csv(path, ["generation", "best_chi2", "median_chi2", "wall_seconds"],
                    [np.arange(len(best)), best, np.asarray(frame.history_median, float),
                     np.asarray(frame.history_wall, float)])


def frame_arrays(frame) -> dict[str, np.ndarray]:
    """The frame under the keys of ``results.npz`` (plus ``best_params`` and ``best_chi2``;
    intervals and the thinned posterior where the run made them)."""
    arrays = {"history_best_chi2": np.asarray(frame.history_best),
            "history_median_chi2": np.asarray(frame.history_median),
            "history_wall_seconds": np.asarray(frame.history_wall),
            "history_params": np.asarray(frame.history_params),
            "best_traces": np.asarray(frame.best_traces), "target": np.asarray(frame.target),
            "times": np.asarray(frame.times), "sweep_offsets": np.asarray(frame.offsets),
            "param_names": np.array(frame.param_names), "best_params": np.asarray(frame.best_params),
            "best_chi2": np.float64(frame.best_chi2), "sweep_labels": np.array(frame.sweep_labels)}
    if getattr(frame, "history_phase", None) is not None:
        arrays["history_phase"] = np.asarray(frame.history_phase)
    if getattr(frame, "weights", None) is not None:
        arrays["weights"] = np.asarray(frame.weights)
    iv = getattr(frame, "intervals", None)
    if iv is not None:
        arrays.update({"ci_sd": iv.sd, "ci_lower": iv.lower, "ci_upper": iv.upper,
                       "correlation": iv.correlation, "covariance": iv.covariance})
    if getattr(frame, "posterior_samples", None) is not None:
        arrays["posterior_samples"] = np.asarray(frame.posterior_samples)
    return arrays


def export_npz(path: str | Path, frame) -> Path:
    return save_npz(path, frame_arrays(frame))
