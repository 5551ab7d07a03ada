""":func:`app.compute.small_expm.expm_in_place` compiled by numba, for generated modules (kept
apart so that importing the NumPy algorithm does not import numba)."""

from __future__ import annotations

from numba import njit

from app.compute.jit import CACHE
from app.compute.small_expm import expm_in_place

expm_in_place_jit = njit(nogil=True, cache=CACHE, error_model="numpy")(expm_in_place)
