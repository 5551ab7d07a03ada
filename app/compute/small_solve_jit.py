""":func:`app.compute.small_solve.solve_in_place` compiled by numba, for generated modules (kept
apart so that importing the NumPy algorithm does not import numba)."""

from __future__ import annotations

from numba import njit

from app.compute.jit import CACHE
from app.compute.small_solve import solve_in_place

solve_in_place_jit = njit(nogil=True, cache=CACHE, error_model="numpy")(solve_in_place)
