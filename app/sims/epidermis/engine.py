"""What both epidermis engines provide.

One step (``dt``), both engines, in this order:

1. centres: per cell the centroid (periodic: unwrapped about element 0, then wrapped into
   [0, L)) and the adhesion A = sum of |z| over its C1 elements;
2. neighbour search (cell list or centre cutoff, the same pairs either way) and stage-1 forces
   F(X); in the same pass each element sums, over the elements of *other* cells within
   ``inter_cutoff``, the count and the genes N, D, B of their cells (contact weights);
3. midpoint RK2 for positions: X½ = X + ½dt·F(X); X ← X + dt·F(X½) (stage 2 redoes the
   search at X½, as the paper's kernels do);
4. modes 'genes' and 'full': the gene network, midpoint RK2 with the same dt, the neighbour
   means <N>, <D>, <B> (contact-weighted; 0 for a cell without contacts) and A of step 1
   held for both stages;
5. wrap x and y into [0, L) (periodic).

Mode 'full' also runs, after every ``growth.interval``-th step, a growth event ``k`` (1, 2, ...):
every cell with D < delta_low and fewer than max_elements elements gains one C0 element at
its centre plus :func:`model.growth_jitter`; then the host reads :meth:`element_counts` and
asks the engine to :meth:`divide` the cells that reached max_elements
(:func:`model.split_cell`, genes shared by :func:`model.division_factors`). The attached
daughter keeps the parent's index; free daughters take the indices ``n_cells, n_cells+1, ...``
in the order of the parents. Storage grows (capacity doubles) without losing state.

The details both engines follow (minimum image everywhere, R_MIN, centroids, where a grown
element goes, how a division packs the daughters and which row of the division factors each
gets, capacity, float32 state, the initial tissue and its relaxation) are spelled out in
``model.py``'s docstring, with NumPy reference implementations there (``centroids``,
``adhesion``, ``contact_means``, ``gene_step``, ``grow``, ``divide_cells``,
``reference_forces``, ``initial_state``).
"""

from __future__ import annotations

import numpy as np

from app.sims.common.engine import EngineBase

STATE_KEYS = ("step", "event", "n_cells", "pos", "etype", "count", "genes")


class EpidermisEngine(EngineBase, renamed={"get_state": "state", "set_state": "restore", "run": "advance"}):
    """Interface of the CPU and CUDA engines; state in the canonical layout of ``model``.

    Canonical state: ``step`` (int), ``event`` (growth events done), ``n_cells``, ``pos``
    (float32 [3, max_elements, capacity]), ``etype`` (int8 [max_elements, capacity]),
    ``count`` (int32 [capacity]), ``genes`` (float32 [6, capacity]).
    """

    step: int
    n_cells: int

    def advance(self, nsteps: int) -> None:
        """Advance ``nsteps`` steps, growth events and divisions included (mode 'full')."""
        raise NotImplementedError

    def forces(self) -> tuple[np.ndarray, np.ndarray]:
        """Stage-1 forces at the current state, float32 [3, max_elements, capacity], and the
        per-element contact sums float32 [4, max_elements, capacity] (count, N, D, B)."""
        raise NotImplementedError

    def element_counts(self) -> np.ndarray:
        """Elements per live cell, int32 [n_cells] (the small summary divisions are decided on)."""
        raise NotImplementedError

    def divide(self, parents: np.ndarray) -> None:
        """Divide ``parents`` (cell indices) now, as in a growth event's division phase."""
        raise NotImplementedError

    def cells(self) -> tuple[np.ndarray, np.ndarray]:
        """Centroids float32 [3, n_cells] and genes float32 [6, n_cells] (history, frames)."""
        raise NotImplementedError

    def elements(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Live elements in cell order: positions float32 [M, 3], cell index int32 [M],
        type int8 [M] (a frame's copy)."""
        raise NotImplementedError

    def state(self) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def restore(self, state: dict[str, np.ndarray]) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass
