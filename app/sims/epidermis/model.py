"""The epidermis model's mathematics in NumPy: potentials, the gene network, the growth and
division rules, the parameter vector the CUDA kernels read.

Both engines use exactly these definitions (the CUDA kernels in ``kernels/epidermis.cu``
mirror them line by line; ``tests/sims/epidermis`` compares them).

Storage (both engines, and the canonical checkpoint) follows the paper's Algorithm 1:
structure of arrays with the cell index contiguous, ``pos[3, max_elements, capacity]``,
``etype[max_elements, capacity]`` (0 = C0, 1 = C1 membrane-adhesive), ``count[capacity]``
(elements per cell, 0 beyond ``n_cells``), ``genes[6, capacity]`` in the order of ``GENES``.
"""

from __future__ import annotations

import numpy as np

from app.compute import philox
from app.sims.epidermis.config import EpidermisConfig, Hill, Morse

GENES = ("N", "D", "B", "O2", "O1", "M")
N_, D_, B_, O2_, O1_, M_ = range(6)
HILLS = ("BN", "ON", "ND", "VO", "GO", "OV", "AV", "OM")

# Philox streams (stream id = cell index + offset; draw n = event number)
STREAM_INITIAL = 0            # initial placement and genes: stream = cell
STREAM_GROWTH = 1 << 40       # growth jitter: stream = STREAM_GROWTH + cell, n = growth event
STREAM_DIVISION = 2 << 40     # division noise: stream = STREAM_DIVISION + parent, n = event


# ---- potentials -------------------------------------------------------------------------
def morse_energy(r: np.ndarray, m: Morse) -> np.ndarray:
    return m.U0 * np.exp(-r / m.xi1) - m.V0 * np.exp(-r / m.xi2)


def morse_force_over_r(r: np.ndarray, m: Morse) -> np.ndarray:
    """-V'(r)/r: multiply by the displacement (x_i - x_j) to get the force on i."""
    return (m.U0 / m.xi1 * np.exp(-r / m.xi1) - m.V0 / m.xi2 * np.exp(-r / m.xi2)) / r


def inter_force_over_r(r: np.ndarray, m: Morse, cutoff: float) -> np.ndarray:
    """Intercellular: the repulsive part only, the Morse force where it pushes and r < cutoff.

    With the default cutoff at the intracellular minimum r* = 2·xi1·ln(2·U0/V0) = 3.22 µm the
    force falls continuously to zero there. Energy: V(r) - V(cutoff) inside, 0 outside.
    """
    f = morse_force_over_r(r, m)
    return np.where((r < cutoff) & (f > 0), f, 0.0)


def inter_energy(r: np.ndarray, m: Morse, cutoff: float) -> np.ndarray:
    """Energy whose gradient is :func:`inter_force_over_r` (for finite-difference tests)."""
    r_min = m.xi1 * m.xi2 / (m.xi2 - m.xi1) * np.log(m.U0 * m.xi2 / (m.V0 * m.xi1)) \
        if m.xi2 != m.xi1 and m.V0 > 0 else np.inf
    edge = min(cutoff, r_min)
    rr = np.minimum(r, edge)
    return np.where(r < edge, morse_energy(rr, m) - morse_energy(np.asarray(edge), m), 0.0)


def membrane_force_z(z: np.ndarray, etype: np.ndarray, m: Morse, wall: float) -> np.ndarray:
    """z-force from the basement membrane: Morse in z for C1 elements, a linear wall below 0."""
    zc = np.maximum(z, 1e-6)
    bm = (m.U0 / m.xi1 * np.exp(-zc / m.xi1) - m.V0 / m.xi2 * np.exp(-zc / m.xi2))
    return np.where(etype == 1, bm, 0.0) + np.where(z < 0, -wall * z, 0.0)


def membrane_energy(z: np.ndarray, etype: np.ndarray, m: Morse, wall: float) -> np.ndarray:
    zc = np.maximum(z, 1e-6)
    return np.where(etype == 1, morse_energy(zc, m), 0.0) + np.where(z < 0, 0.5 * wall * z * z, 0.0)


def minimum_image(d: np.ndarray, box: float | None) -> np.ndarray:
    """Periodic displacement in x or y: d - L·rint(d/L) (no-op without a box)."""
    return d if not box else d - box * np.rint(d / box)


# ---- gene network -----------------------------------------------------------------------
def hill(x: np.ndarray, p: Hill) -> np.ndarray:
    return p.a + p.b / (1.0 + (p.c * x) ** p.h)


def gene_rhs(g: np.ndarray, mean_N: np.ndarray, mean_D: np.ndarray, mean_B: np.ndarray,
             A: np.ndarray, s) -> np.ndarray:
    """d/dt of the six gene products ``g[6, n]`` (the paper's equations, GeneSettings ``s``).

    ``mean_*``: contact-weighted averages over neighbouring cells; ``A``: sum of |z| of the
    cell's C1 elements.
    """
    N, D, B, O2, O1, M = g
    out = np.empty_like(g)
    out[N_] = -s.k_a * N * mean_D + s.k_d * B - s.d_N * N + hill(B, s.BN) * hill(O2, s.ON)
    out[D_] = -s.k_a * D * mean_N + s.k_d * mean_B - s.d_D * D + hill(N, s.ND)
    out[B_] = s.k_a * N * mean_D - s.k_d * B - s.d_B * B
    out[O2_] = -s.d_O2 * O2 + hill(O1, s.VO) * hill(np.asarray(s.G), s.GO)
    out[O1_] = -s.d_O1 * O1 + hill(O2, s.OV) * hill(A, s.AV)
    out[M_] = -s.d_M * M + hill(O2, s.OM)
    return out


def suprabasal(g: np.ndarray) -> np.ndarray:
    """Cell state: True where Ovol1 exceeds Ovol2 (suprabasal), False (basal) otherwise."""
    return g[O1_] > g[O2_]


# ---- growth and division ----------------------------------------------------------------
def growth_jitter(seed: int, cells: np.ndarray, event: int, jitter: float) -> np.ndarray:
    """Offsets (3, n) of the new element of each cell from its centre: uniform in ±jitter."""
    w = philox.draw(seed, STREAM_GROWTH + np.asarray(cells, np.uint64), event)
    u = philox.to_unit_float32(w[:3]).astype(np.float64)
    return (2.0 * u - 1.0) * jitter


def division_factors(seed: int, parents: np.ndarray, event: int, noise: float) -> np.ndarray:
    """Gene-share factors (2, n): each daughter gets 0.5·(1 + noise·(2u - 1)) of the parent."""
    w = philox.draw(seed, STREAM_DIVISION + np.asarray(parents, np.uint64), event)
    u = philox.to_unit_float32(w[:2]).astype(np.float64)
    return 0.5 * (1.0 + noise * (2.0 * u - 1.0))


def division_axis(p: np.ndarray, mode: str, iterations: int = 16) -> np.ndarray:
    """Unit split axis of one cell's elements ``p[3, n]`` (already unwrapped): z for
    'vertical', else the principal axis by power iteration from (0.1, 0.2, 1) normalised."""
    if mode == "vertical":
        return np.array([0.0, 0.0, 1.0])
    q = p - p.mean(axis=1, keepdims=True)
    cov = q @ q.T
    v = np.array([0.1, 0.2, 1.0])
    v /= np.linalg.norm(v)
    for _ in range(iterations):
        w = cov @ v
        nrm = np.linalg.norm(w)
        if nrm < 1e-12:
            break
        v = w / nrm
    return v


def split_cell(p: np.ndarray, etype: np.ndarray, mode: str, c1_height: float
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Split one cell's ``n`` elements (positions ``p[3, n]`` unwrapped, types ``etype[n]``).

    Elements are ranked by their projection on the split axis (ties by slot); the lower half
    forms daughter a, the upper half daughter b. The attached daughter is the one with more C1
    elements (a tie: the lower mean z); it keeps its slot order and is re-typed (C1 where
    z < c1_height), the other daughter becomes all C0.

    Returns (slots of the attached daughter, slots of the free daughter, new types of all
    ``n`` slots).
    """
    n = p.shape[1]
    axis = division_axis(p, mode)
    proj = axis @ (p - p.mean(axis=1, keepdims=True))
    order = np.lexsort((np.arange(n), proj))
    a, b = np.sort(order[: n // 2]), np.sort(order[n // 2:])
    ca, cb = int((etype[a] == 1).sum()), int((etype[b] == 1).sum())
    if ca < cb or (ca == cb and p[2, a].mean() > p[2, b].mean()):
        a, b = b, a
    new = np.zeros(n, dtype=etype.dtype)
    new[a] = (p[2, a] < c1_height).astype(etype.dtype)
    return a, b, new


# ---- summaries --------------------------------------------------------------------------
def count_layers(centre_z: np.ndarray, thickness: float, min_fraction: float = 0.02) -> int:
    """Layers: consecutive z-bins of ``thickness`` from the membrane up, each holding at least
    ``max(1, min_fraction · cells)`` cell centres."""
    if centre_z.size == 0:
        return 0
    bins = np.bincount(np.maximum(centre_z // thickness, 0).astype(np.int64))
    need = max(1, int(np.ceil(min_fraction * centre_z.size)))
    full = bins >= need
    return int(np.argmin(full)) if not full.all() else int(full.size)
