"""The frame an epidermis run publishes: the tissue now and its history."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from app.sims.common.simulation import Frame

# Colours of the paper's Figs. 3-4, by element: C1 (membrane-adhesive) red, else by cell state.
ELEMENT_C1, ELEMENT_BASAL, ELEMENT_SUPRABASAL = 0, 1, 2


def element_colours(etype: np.ndarray, element_cell: np.ndarray, suprabasal: np.ndarray) -> np.ndarray:
    """Colour code (int8) per element: C1 elements, else the state of their cell."""
    return np.where(etype == 1, ELEMENT_C1, np.where(suprabasal[element_cell], ELEMENT_SUPRABASAL,
                                                     ELEMENT_BASAL)).astype(np.int8)


@dataclass(frozen=True)
class EpidermisFrame(Frame):
    """All arrays frozen; positions wrapped into the box in periodic mode."""

    step: int = 0
    steps: int = 0
    t: float = 0.0                       # simulated time units (step · dt)
    mode: str = "full"
    cells: int = 0
    elements: int = 0
    box: float = 0.0                     # periodic side L (µm) in x and y; 0 without boundary
    positions: np.ndarray = None         # (M, 3) float32, µm
    element_cell: np.ndarray = None      # (M,) int32
    element_type: np.ndarray = None      # (M,) int8: 0 C0, 1 C1
    element_colour: np.ndarray = None    # (M,) int8: ELEMENT_C1 / ELEMENT_BASAL / ELEMENT_SUPRABASAL
    centres: np.ndarray = None           # (cells, 3) float32
    genes: np.ndarray = None             # (cells, 6) float32, order model.GENES
    suprabasal: np.ndarray = None        # (cells,) bool
    layers: int = 0
    history: Mapping[str, np.ndarray] = None   # step, t, cells, layers, basal_fraction,
                                               # suprabasal_fraction, elements
