"""The CUDA epidermis engine's pair-list geometry, on the host: the grid's bins are wide enough
for the list's radius, and the drift the list allows keeps every pair within the cutoff in it."""

import math

import numpy as np
import pytest

from app.sims.epidermis import model
from app.sims.epidermis.cuda import float_params, grid_layout

from .helpers import config


@pytest.mark.parametrize("boundary", ["periodic", "none"])
@pytest.mark.parametrize("max_bins", [1 << 16, 300])
def test_bins_are_at_least_the_list_radius_wide(boundary, max_bins):
    cfg = config(tissue={"cells": 400, "boundary": boundary, "pitch": 7.0})
    lo, hi = np.array([-3.0, -2.0, -1.0]), np.array([137.0, 141.0, 23.0])
    g = grid_layout(cfg, lo, hi, max_bins)
    reach = cfg.mechanics.inter_cutoff + model.SKIN
    assert g["bins"] == g["nx"] * g["ny"] * g["nz"] <= max_bins
    for axis in "xyz":
        assert 1.0 / g["iw" + axis] >= reach


def test_the_allowed_drift_keeps_every_pair_within_the_cutoff_in_the_list():
    """Two elements each drifting up to the allowance from their places at the build were
    within the list's radius then if they are within the cutoff now."""
    cfg = config(tissue={"cells": 16})
    f = float_params(cfg).astype(np.float64)
    cut, reach, drift = f[12], math.sqrt(f[20]), math.sqrt(f[21])
    assert reach == pytest.approx(cfg.mechanics.inter_cutoff + model.SKIN, rel=1e-6)
    assert cut + 2 * drift < reach
    assert drift == pytest.approx(0.5 * model.SKIN, abs=2e-3)
