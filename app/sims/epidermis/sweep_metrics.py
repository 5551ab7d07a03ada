"""Epidermis sweep metrics: cells, layers and the suprabasal fraction at the end."""

from __future__ import annotations

SEED_KEY = "tissue.seed"
DEFAULT_METRICS = ("tissue",)


def tissue(arrays, summary, options) -> dict[str, float]:
    """Cells, layers and suprabasal fraction of the final tissue."""
    return {"cells": float(summary["cells"]), "layers": float(summary["layers"]),
            "suprabasal_fraction": float(summary["suprabasal_fraction"])}


METRICS = {"tissue": tissue}
