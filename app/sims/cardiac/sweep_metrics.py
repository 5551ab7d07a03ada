"""Cardiac sweep metrics: APD90, activation time and conduction velocity."""

from __future__ import annotations

import numpy as np

SEED_KEY = None          # the tissue model is deterministic: replicates repeat the run
DEFAULT_METRICS = ("apd90", "activation", "cv")


def _probe_values(arrays, key: str) -> np.ndarray:
    values = np.asarray(arrays[key], dtype=float)
    probes = np.asarray(arrays.get("probe_index", []), dtype=int)
    picked = values[probes] if probes.size else values
    return picked[np.isfinite(picked)]


def apd90(arrays, summary, options) -> dict[str, float]:
    """APD90 (ms) over the probe cells (mean, min, max; per beat, as ``apd90`` in results.npz).

    A single cell reports the analysed beat's APD90 from ``summary.json``.
    """
    if "apd90_ms" in summary:
        return {"apd90_ms": float(summary["apd90_ms"])}
    v = _probe_values(arrays, "apd90")
    if not v.size:
        return {"apd90_mean_ms": float("nan"), "apd90_min_ms": float("nan"), "apd90_max_ms": float("nan")}
    return {"apd90_mean_ms": float(v.mean()), "apd90_min_ms": float(v.min()), "apd90_max_ms": float(v.max())}


def activation(arrays, summary, options) -> dict[str, float]:
    """First activation time (ms) at the probes: mean and latest; fraction of cells activated."""
    act = np.asarray(arrays["activation_time"], dtype=float)
    v = _probe_values(arrays, "activation_time")
    return {"activation_mean_ms": float(v.mean()) if v.size else float("nan"),
            "activation_latest_ms": float(v.max()) if v.size else float("nan"),
            "activated_fraction": float(np.isfinite(act).mean()) if act.size else 0.0}


def cv(arrays, summary, options) -> dict[str, float]:
    """Conduction velocity (m/s): least-squares slope of distance (straight line from the first
    activated cell) against first activation time, over cells beyond 20 % of the largest distance.
    """
    from app.sims.cardiac.engine import build_mesh

    cfg = options.get("config")
    act = np.asarray(arrays["activation_time"], dtype=float)
    if cfg is None or act.size < 3 or np.isfinite(act).sum() < 3:
        return {"cv_m_per_s": float("nan")}
    pos = build_mesh(cfg).positions
    ok = np.isfinite(act)
    first = int(np.nanargmin(np.where(ok, act, np.inf)))
    d = np.linalg.norm(pos - pos[first], axis=1)
    far = ok & (d > 0.2 * d[ok].max())
    if far.sum() < 3 or np.ptp(act[far]) <= 0:
        return {"cv_m_per_s": float("nan")}
    slope = np.polyfit(act[far], d[far], 1)[0]     # mm per ms = m/s
    return {"cv_m_per_s": float(slope)}


METRICS = {"apd90": apd90, "activation": activation, "cv": cv}
