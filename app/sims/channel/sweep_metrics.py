"""Channel-fit sweep metrics: best chi-square and the best parameters."""

from __future__ import annotations

SEED_KEY = "ga.seed"
DEFAULT_METRICS = ("chi2", "parameters")


def chi2(arrays, summary, options) -> dict[str, float]:
    """Best chi-square (pA^2) and the generations it took."""
    return {"best_chi2": float(summary["best_chi2"]), "generations": float(summary["generations"])}


def parameters(arrays, summary, options) -> dict[str, float]:
    """The best individual's parameters."""
    return {f"param_{k}": float(v) for k, v in summary["best_params"].items()}


def relative_error(arrays, summary, options) -> dict[str, float]:
    """Relative error of each parameter against the surrogate's truth (surrogate data only)."""
    return {f"relerr_{k}": float(v) for k, v in summary.get("relative_error", {}).items()}


METRICS = {"chi2": chi2, "parameters": parameters, "relative_error": relative_error}


def uncertainty(arrays, summary, options) -> dict[str, float]:
    """Gauss-Newton standard deviation of each parameter (runs with intervals on)."""
    params = summary.get("intervals", {}).get("parameters", {})
    return {f"sd_{k}": float(v["sd"]) for k, v in params.items()}


METRICS["uncertainty"] = uncertainty
