"""The epidermis model's mathematics in NumPy: potentials, the gene network, the growth and
division rules, the parameter vector the CUDA kernels read.

Both engines use exactly these definitions (the CUDA kernels in ``kernels/epidermis.cu``
mirror them line by line; ``tests/sims/epidermis`` compares them).

Storage (both engines, and the canonical checkpoint) follows the paper's Algorithm 1:
structure of arrays with the cell index contiguous, ``pos[3, max_elements, capacity]``,
``etype[max_elements, capacity]`` (0 = C0, 1 = C1 membrane-adhesive), ``count[capacity]``
(elements per cell, 0 beyond ``n_cells``), ``genes[6, capacity]`` in the order of ``GENES``.
Slots beyond a cell's count hold zeros (positions) and 0 (types).

Details both engines follow (settled here; the CUDA engine mirrors them):

- Distances: every element-element difference uses the minimum image in x and y (periodic),
  intracellular pairs included (a cell may straddle the box edge). Distances below
  :data:`R_MIN` are taken as ``R_MIN`` in the force (coincident elements, d = 0, exert none).
- Centres (:func:`centroids`): x and y unwrapped about the cell's element 0
  (``x0 + minimum_image(x - x0)``), averaged, wrapped into [0, L); z averaged.
- Growth (:func:`grow`): the new element goes to slot ``count`` of its cell, type C0, at the
  cell's centre (as :func:`centroids`, from the positions after the step) plus
  :func:`growth_jitter`, x and y wrapped into [0, L), rounded to float32.
- Division (:func:`divide_cells`): positions are unwrapped about element 0 only to choose the
  split (:func:`split_cell`); the stored (wrapped) positions are copied unchanged, the attached
  daughter's elements packed into slots 0.. of the parent's index in their old slot order, the
  free daughter's into the new index. Gene shares: row 0 of :func:`division_factors` goes to the
  attached daughter, row 1 to the free one (draw ``n`` = the current growth event number).
- Capacity (:func:`capacity_for`): ``max(64, 2·cells)`` rounded up to a multiple of 32 at the
  start; doubled (repeatedly) when the cells after a division would not fit.
- State values are float32 (the CPU engine computes in float64 and rounds positions and genes
  to float32 after every step, so checkpoints are exact and resumes bit-identical).
- The initial tissue (:func:`initial_state`): placement (:func:`place_cells`, all C0), then
  ``run.relax_steps`` steps of mode 'movement' on the engine that will run the tissue, then C1
  where z < ``c1_height`` (:func:`type_c1`); ``step`` and ``event`` start at 0 after that.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Mapping

import numpy as np

from app.compute import philox
from app.sims.common.progress import SetupProgress
from app.sims.epidermis.config import EpidermisConfig, Hill, Morse

GENES = ("N", "D", "B", "O2", "O1", "M")
N_, D_, B_, O2_, O1_, M_ = range(6)
HILLS = ("BN", "ON", "ND", "VO", "GO", "OV", "AV", "OM")

# Philox streams (stream id = cell index + offset; draw n = event number)
STREAM_INITIAL = 0            # initial placement and genes: stream = cell
STREAM_GROWTH = 1 << 40       # growth jitter: stream = STREAM_GROWTH + cell, n = growth event
STREAM_DIVISION = 2 << 40     # division noise: stream = STREAM_DIVISION + parent, n = event
STREAM_LAYOUT = 3 << 40       # 'random' layout: one stream, draws n = 0, 1, ... (2 centres each)

R_MIN = 1e-6                  # µm; shorter distances count as this in the forces
MAX_STEP_MOVE = 2.0           # µm; an element moving farther in one step means a blown-up state
SKIN = 0.8                    # µm; Verlet skin of every engine's intercellular pair list
MIN_SEPARATION = 0.6          # initial elements at least this x r* (intracellular minimum) apart
RANDOM_SPACING = 1.6          # 'random' layout: centres at least this x cell_radius apart


class BlownUpError(RuntimeError):
    """The state became NaN or an element jumped more than MAX_STEP_MOVE in one step."""


# ---- potentials -------------------------------------------------------------------------
def morse_energy(r: np.ndarray, m: Morse) -> np.ndarray:
    return m.U0 * np.exp(-r / m.xi1) - m.V0 * np.exp(-r / m.xi2)


def morse_force_over_r(r: np.ndarray, m: Morse) -> np.ndarray:
    """-V'(r)/r: multiply by the displacement (x_i - x_j) to get the force on i."""
    return (m.U0 / m.xi1 * np.exp(-r / m.xi1) - m.V0 / m.xi2 * np.exp(-r / m.xi2)) / r


def inter_force_over_r(r: np.ndarray, m: Morse, cutoff: float) -> np.ndarray:
    """Intercellular: the repulsive part only, the Morse force where it pushes and r < cutoff.

    With the default cutoff at the intracellular minimum (:func:`morse_minimum`; 3.22 µm for
    the defaults) the force falls continuously to zero there. Energy: V(r) - V(cutoff) inside, 0 outside.
    """
    f = morse_force_over_r(r, m)
    return np.where((r < cutoff) & (f > 0), f, 0.0)


def inter_energy(r: np.ndarray, m: Morse, cutoff: float) -> np.ndarray:
    """Energy whose gradient is :func:`inter_force_over_r` (for finite-difference tests)."""
    edge = min(cutoff, morse_minimum(m))
    rr = np.minimum(r, edge)
    return np.where(r < edge, morse_energy(rr, m) - morse_energy(np.asarray(edge), m), 0.0)


def membrane_force_z(z: np.ndarray, etype: np.ndarray, m: Morse, wall: float) -> np.ndarray:
    """z-force from the basement membrane: Morse in z for C1 elements, a linear wall below 0."""
    zc = np.maximum(z, 1e-6)
    bm = (m.U0 / m.xi1 * np.exp(-zc / m.xi1) - m.V0 / m.xi2 * np.exp(-zc / m.xi2))
    return np.where(etype == 1, bm, 0.0) + np.where(z < 0, -wall * z, 0.0)


def membrane_energy(z: np.ndarray, etype: np.ndarray, m: Morse, wall: float) -> np.ndarray:
    """Energy of :func:`membrane_force_z`: below z = 1e-6 the C1 term continues linearly (the
    force stays at its value there), plus the wall ½·wall·z² below 0."""
    zc = np.maximum(z, 1e-6)
    fc = m.U0 / m.xi1 * np.exp(-zc / m.xi1) - m.V0 / m.xi2 * np.exp(-zc / m.xi2)
    bm = morse_energy(zc, m) + fc * (zc - z)
    return np.where(etype == 1, bm, 0.0) + np.where(z < 0, 0.5 * wall * z * z, 0.0)


def minimum_image(d: np.ndarray, box: float | None) -> np.ndarray:
    """Periodic displacement in x or y: d - L·rint(d/L) (no-op without a box)."""
    return d if not box else d - box * np.rint(d / box)


def morse_minimum(m: Morse) -> float:
    """r* where the Morse force vanishes (3.22 µm for the defaults; inf without attraction)."""
    if m.V0 <= 0 or m.xi2 <= m.xi1 or m.U0 * m.xi2 <= m.V0 * m.xi1:
        return float("inf") if m.V0 <= 0 or m.xi2 <= m.xi1 else 0.0
    return m.xi1 * m.xi2 / (m.xi2 - m.xi1) * float(np.log(m.U0 * m.xi2 / (m.V0 * m.xi1)))


def box_of(cfg: EpidermisConfig) -> float | None:
    """The periodic side L, or None without boundary."""
    return cfg.box if cfg.tissue.boundary == "periodic" else None


def wrap(x: np.ndarray, box: float | None) -> np.ndarray:
    """x or y into [0, L) (no-op without a box)."""
    if not box:
        return x
    out = x - box * np.floor(x / box)
    return np.where(out >= box, out - box, out)       # rounding can land exactly on L


def wrap_float32(p: np.ndarray, box: float | None) -> np.ndarray:
    """Positions ``p[3, ...]`` in their stored form: x and y wrapped into [0, L), rounded to
    float32 (where that rounding lands on L, 0)."""
    out = np.empty(p.shape, np.float32)
    out[:2] = wrap(p[:2], box)
    out[2] = p[2]
    if box:
        out[:2] = np.where(out[:2] >= np.float32(box), np.float32(0.0), out[:2])
    return out


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


# ---- canonical state helpers -----------------------------------------------------------
def capacity_for(cells: int) -> int:
    """Initial cell capacity: max(64, 2·cells) rounded up to a multiple of 32."""
    c = max(64, 2 * int(cells))
    return -(-c // 32) * 32


def valid_mask(count: np.ndarray, n_cells: int, slots: int) -> np.ndarray:
    """bool [slots, n_cells]: slot k of cell c holds an element."""
    return np.arange(slots)[:, None] < np.asarray(count[:n_cells])[None, :]


def centroids(pos: np.ndarray, count: np.ndarray, n_cells: int, box: float | None) -> np.ndarray:
    """Cell centres float64 [3, n_cells]: x, y unwrapped about element 0, averaged, wrapped."""
    p = np.asarray(pos[:, :, :n_cells], np.float64)
    cnt = np.asarray(count[:n_cells])
    valid = valid_mask(cnt, n_cells, p.shape[1])
    out = np.empty((3, n_cells))
    n = np.maximum(cnt, 1)
    for a in range(3):
        if a < 2 and box:
            d = minimum_image(p[a] - p[a, 0], box)
            out[a] = wrap(p[a, 0] + np.where(valid, d, 0.0).sum(axis=0) / n, box)
        else:
            out[a] = np.where(valid, p[a], 0.0).sum(axis=0) / n
    return out


def adhesion(pos: np.ndarray, etype: np.ndarray, count: np.ndarray, n_cells: int) -> np.ndarray:
    """A per cell: the sum of |z| over its C1 elements, float64 [n_cells]."""
    valid = valid_mask(count, n_cells, pos.shape[1])
    c1 = valid & (np.asarray(etype[:, :n_cells]) == 1)
    return np.where(c1, np.abs(np.asarray(pos[2, :, :n_cells], np.float64)), 0.0).sum(axis=0)


def contact_means(contacts: np.ndarray, count: np.ndarray, n_cells: int) -> np.ndarray:
    """Contact-weighted neighbour means <N>, <D>, <B> float64 [3, n_cells] from the per-element
    contact sums ``contacts[4, slots, ...]`` (count, N, D, B); 0 for a cell without contacts."""
    valid = valid_mask(count, n_cells, contacts.shape[1])
    s = np.where(valid[None], np.asarray(contacts[:, :, :n_cells], np.float64), 0.0).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(s[0] > 0, s[1:] / np.where(s[0] > 0, s[0], 1.0), 0.0)


def gene_step(g: np.ndarray, means: np.ndarray, A: np.ndarray, s, dt: float) -> np.ndarray:
    """One midpoint-RK2 step of the gene network, ``means`` and ``A`` held for both stages."""
    g = np.asarray(g, np.float64)
    k1 = gene_rhs(g, means[0], means[1], means[2], A, s)
    k2 = gene_rhs(g + 0.5 * dt * k1, means[0], means[1], means[2], A, s)
    return g + dt * k2


def empty_state(cells: int, max_elements: int) -> dict:
    cap = capacity_for(cells)
    return {"step": np.int64(0), "event": np.int64(0), "n_cells": np.int64(cells),
            "pos": np.zeros((3, max_elements, cap), np.float32),
            "etype": np.zeros((max_elements, cap), np.int8),
            "count": np.zeros(cap, np.int32), "genes": np.zeros((6, cap), np.float32)}


def grow_capacity(state: dict, need: int) -> dict:
    """Double the capacity of ``state`` (in place, arrays replaced) until ``need`` cells fit."""
    cap = state["count"].shape[0]
    new = cap
    while new < need:
        new *= 2
    if new == cap:
        return state
    for key in ("pos", "etype", "count", "genes"):
        old = state[key]
        arr = np.zeros(old.shape[:-1] + (new,), old.dtype)
        arr[..., :cap] = old
        state[key] = arr
    return state


# ---- the initial tissue ----------------------------------------------------------------
def _lattice_centres(cfg: EpidermisConfig) -> np.ndarray:
    t, side = cfg.tissue, cfg.grid_side
    c = np.arange(t.cells)
    return np.stack([(c % side + 0.5) * t.pitch, (c // side + 0.5) * t.pitch,
                     np.full(t.cells, t.cell_radius * 1.05)])


def _random_centres(cfg: EpidermisConfig) -> np.ndarray:
    """Dart throwing in the box (minimum image when periodic), Philox stream STREAM_LAYOUT."""
    t, L, box = cfg.tissue, cfg.box, box_of(cfg)
    need = RANDOM_SPACING * t.cell_radius
    xy = np.empty((2, t.cells))
    n_ok, n = 0, 0
    batch = 256
    report = SetupProgress(f"placing {t.cells:,} cells at random", t.cells)
    while n_ok < t.cells:
        report(n_ok)
        if n > 2000 * t.cells + 10000:
            raise ValueError(f"cannot place {t.cells} cells at random {need:g} µm apart in a "
                             f"{L:g} µm box; use the lattice layout or a larger pitch")
        w = philox.to_unit_float32(philox.draw(
            cfg.tissue.seed, np.full(batch, STREAM_LAYOUT, np.uint64),
            np.arange(n, n + batch, dtype=np.uint64))).astype(np.float64) * L
        n += batch
        for x, y in w.T.reshape(-1, 2):          # draw n gives (w0, w1) then (w2, w3)
            if n_ok:
                dx = minimum_image(xy[0, :n_ok] - x, box)
                dy = minimum_image(xy[1, :n_ok] - y, box)
                if (dx * dx + dy * dy).min() < need * need:
                    continue
            xy[:, n_ok] = x, y
            n_ok += 1
            if n_ok == t.cells:
                break
    return np.vstack([xy, np.full((1, t.cells), t.cell_radius * 1.05)])


def _ball_offsets(cfg: EpidermisConfig) -> np.ndarray:
    """Element offsets float64 [3, elements, cells]: uniform in a ball of cell_radius, at least
    MIN_SEPARATION·r* apart (shrunk by 10 % after every 200 rejections in a row), by rejection
    from the cube; candidate t of cell c is Philox draw 1 + t of stream STREAM_INITIAL + c."""
    t = cfg.tissue
    C, n0, R = t.cells, t.elements, t.cell_radius
    sep = np.full(C, min(MIN_SEPARATION * morse_minimum(cfg.mechanics.intra), 2.0 * R))
    out = np.zeros((3, n0, C))
    placed = np.zeros(C, np.int64)
    misses = np.zeros(C, np.int64)
    draw = np.zeros(C, np.int64)
    streams = STREAM_INITIAL + np.arange(C, dtype=np.uint64)
    slots = np.arange(n0)[:, None]
    report = SetupProgress(f"placing the elements of {C:,} cells", C * n0)
    while True:
        act = np.flatnonzero(placed < n0)
        if act.size == 0:
            return out
        report(int(placed.sum()))
        w = philox.draw(t.seed, streams[act], (1 + draw[act]).astype(np.uint64))
        draw[act] += 1
        cand = (2.0 * philox.to_unit_float32(w[:3]).astype(np.float64) - 1.0) * R
        inside = (cand * cand).sum(axis=0) <= R * R
        d = out[:, :, act] - cand[:, None, :]
        r2 = (d * d).sum(axis=0)
        r2 = np.where(slots < placed[act][None, :], r2, np.inf)
        ok = inside & (r2.min(axis=0) >= sep[act] ** 2)
        good = act[ok]
        out[:, placed[good], good] = cand[:, ok]
        placed[good] += 1
        misses[good] = 0
        bad = act[~ok]
        misses[bad] += 1
        shrink = bad[misses[bad] >= 200]
        sep[shrink] *= 0.9
        misses[shrink] = 0


def place_cells(cfg: EpidermisConfig) -> dict:
    """The unrelaxed initial tissue in the canonical layout: every element C0, N = D =
    initial·(1 + initial_noise·(2u - 1)) with u from Philox draw 0 (words 0, 1) of stream
    STREAM_INITIAL + cell, the other genes 0."""
    t = cfg.tissue
    C = t.cells
    state = empty_state(C, t.max_elements)
    centres = _random_centres(cfg) if t.layout == "random" else _lattice_centres(cfg)
    p = centres[:, None, :] + _ball_offsets(cfg)
    box = box_of(cfg)
    p[0], p[1] = wrap(p[0], box), wrap(p[1], box)
    state["pos"][:, :t.elements, :C] = p.astype(np.float32)
    state["count"][:C] = t.elements
    w = philox.draw(t.seed, STREAM_INITIAL + np.arange(C, dtype=np.uint64), 0)
    u = philox.to_unit_float32(w[:2]).astype(np.float64)
    g = cfg.genes
    state["genes"][[N_, D_], :C] = (g.initial * (1.0 + g.initial_noise * (2.0 * u - 1.0))
                                    ).astype(np.float32)
    return state


def type_c1(state: dict, c1_height: float) -> dict:
    """Every element below ``c1_height`` becomes C1, the others C0 (all cells attached)."""
    n = int(state["n_cells"])
    valid = valid_mask(state["count"], n, state["etype"].shape[0])
    etype = np.zeros_like(state["etype"])
    etype[:, :n] = (valid & (state["pos"][2, :, :n] < c1_height)).astype(np.int8)
    state["etype"] = etype
    return state


def initial_state(cfg: EpidermisConfig, engine: Callable | None = None, relax: bool = True) -> dict:
    """The tissue at step 0: :func:`place_cells`, ``run.relax_steps`` movement-only steps on
    ``engine`` (a class taking ``(cfg, state)``; the CPU engine when None), then :func:`type_c1`."""
    state = place_cells(cfg)
    if relax and cfg.run.relax_steps > 0:
        if engine is None:
            from app.sims.common.registry import DOMAINS     # by name: cpu.py imports this module
            engine = DOMAINS["epidermis"].engine_class("cpu-reference")
        eng = engine(relaxation_config(cfg), state)
        try:
            report = SetupProgress(f"relaxing {cfg.tissue.cells:,} initial cells", cfg.run.relax_steps)
            chunk = max(1, min(cfg.run.relax_steps, 10))
            for done in range(0, cfg.run.relax_steps, chunk):
                eng.advance(min(chunk, cfg.run.relax_steps - done))
                report(done + chunk)
            state = eng.state()
        finally:
            eng.close()
    return relaxed(state, cfg)


def relaxation_config(cfg: EpidermisConfig) -> EpidermisConfig:
    """The config the initial relaxation's steps run with: mode 'movement'."""
    return dataclasses.replace(cfg, run=dataclasses.replace(cfg.run, mode="movement"))


def relaxed(state: Mapping[str, np.ndarray], cfg: EpidermisConfig) -> dict:
    """The tissue at step 0 from the relaxation's last state: a copy with ``step`` and
    ``event`` 0 and :func:`type_c1`."""
    out = {k: np.array(v) for k, v in state.items()}
    out["step"], out["event"] = np.int64(0), np.int64(0)
    return type_c1(out, cfg.mechanics.c1_height)


# ---- growth and division on the canonical state ----------------------------------------
def grow(state: dict, cfg: EpidermisConfig, event: int) -> np.ndarray:
    """Growth phase of growth event ``event``: every live cell with D < delta_low and fewer
    than max_elements elements gains one C0 element (in place). Returns the grown cells."""
    n = int(state["n_cells"])
    count, E = state["count"], state["pos"].shape[1]
    cells = np.flatnonzero((state["genes"][D_, :n] < cfg.growth.delta_low) & (count[:n] < E))
    if cells.size == 0:
        return cells
    box = box_of(cfg)
    c = centroids(state["pos"], count, n, box)[:, cells]
    new = wrap_float32(c + growth_jitter(cfg.tissue.seed, cells, event, cfg.growth.jitter), box)
    slot = count[cells].astype(np.int64)
    state["pos"][:, slot, cells] = new.astype(state["pos"].dtype)
    state["etype"][slot, cells] = 0
    count[cells] += 1
    return cells


def divide_cells(state: dict, cfg: EpidermisConfig, parents: np.ndarray) -> dict:
    """Divide ``parents`` (in place; arrays replaced when the capacity doubles). Free daughters
    take the indices n_cells, n_cells + 1, ... in the order of ``parents``."""
    parents = np.asarray(parents, np.int64)
    if parents.size == 0:
        return state
    n = int(state["n_cells"])
    grow_capacity(state, n + parents.size)
    pos, etype, count, genes = state["pos"], state["etype"], state["count"], state["genes"]
    box = box_of(cfg)
    f = division_factors(cfg.tissue.seed, parents, int(state["event"]), cfg.growth.division_noise)
    for i, c in enumerate(parents):
        k = int(count[c])
        p = np.array(pos[:, :k, c], np.float64)
        if box:
            p[:2] = p[:2, :1] + minimum_image(p[:2] - p[:2, :1], box)
        a, b, new_types = split_cell(p, etype[:k, c], cfg.growth.division_axis,
                                     cfg.mechanics.c1_height)
        j = n + i
        old_pos, old_genes = pos[:, :k, c].copy(), genes[:, c].astype(np.float64)
        pos[:, :, j] = 0
        etype[:, j] = 0
        pos[:, :b.size, j] = old_pos[:, b]
        etype[:b.size, j] = new_types[b]
        count[j] = b.size
        pos[:, :, c] = 0
        etype[:, c] = 0
        pos[:, :a.size, c] = old_pos[:, a]
        etype[:a.size, c] = new_types[a]
        count[c] = a.size
        genes[:, c] = (f[0, i] * old_genes).astype(np.float32)
        genes[:, j] = (f[1, i] * old_genes).astype(np.float32)
    state["n_cells"] = np.int64(n + parents.size)
    return state


def check_motion(old: np.ndarray, new: np.ndarray, valid: np.ndarray, step: int) -> None:
    """Raise :class:`BlownUpError` naming the step, cell and element when ``new`` positions
    ([3, slots, cells]) are not finite or moved more than MAX_STEP_MOVE from ``old``."""
    d = np.where(valid, np.sqrt(((new - old) ** 2).sum(axis=0)), 0.0)
    bad = ~np.isfinite(d) | (d > MAX_STEP_MOVE)
    if bad.any():
        k, c = np.argwhere(bad)[0]
        what = "is not finite" if not np.isfinite(d[k, c]) else f"moved {d[k, c]:.3g} µm"
        raise BlownUpError(f"the tissue blew up at step {step}: element {k} of cell {c} {what} "
                           f"in one step (limit {MAX_STEP_MOVE:g} µm); lower run.dt or check "
                           "the mechanics parameters")


# ---- float64 references (tests; the CUDA engine's tests) -------------------------------
def live_elements(state: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Live elements in cell order: positions float64 [M, 3], cell [M], type [M] and their
    (slot, cell) coordinates [2, M] in the canonical arrays."""
    n = int(state["n_cells"])
    count = np.asarray(state["count"])
    valid = valid_mask(count, n, state["pos"].shape[1]).T            # [cells, slots]
    c, k = np.nonzero(valid)
    p = np.asarray(state["pos"], np.float64)[:, k, c].T
    return p, c.astype(np.int32), np.asarray(state["etype"])[k, c], np.stack([k, c])


def _pair_terms(state: dict, cfg: EpidermisConfig):
    p, cell, et, kc = live_elements(state)
    box = box_of(cfg)
    d = p[:, None, :] - p[None, :, :]
    d[..., 0] = minimum_image(d[..., 0], box)
    d[..., 1] = minimum_image(d[..., 1], box)
    r = np.sqrt((d * d).sum(axis=-1))
    same = cell[:, None] == cell[None, :]
    np.fill_diagonal(r, np.inf)
    return p, cell, et, kc, d, r, same


def reference_forces(state: dict, cfg: EpidermisConfig) -> tuple[np.ndarray, np.ndarray]:
    """Brute-force float64 forces [3, max_elements, capacity] and contact sums [4, max_elements,
    capacity] (count, N, D, B of the other cell, over elements of other cells within
    inter_cutoff): all element pairs, minimum image. O(M²) memory: small systems only."""
    m = cfg.mechanics
    p, cell, et, kc, d, r, same = _pair_terms(state, cfg)
    rs = np.maximum(r, R_MIN)
    intra = np.where(same & np.isfinite(r), morse_force_over_r(rs, m.intra), 0.0)
    other = ~same & (r < m.inter_cutoff)
    inter = np.where(other, inter_force_over_r(rs, m.inter, m.inter_cutoff), 0.0)
    f = ((intra + inter)[..., None] * d).sum(axis=1)
    f[:, 2] += membrane_force_z(p[:, 2], et, m.membrane, m.wall_stiffness)
    g = np.asarray(state["genes"], np.float64)[:, cell]                  # [6, M]
    w = other.astype(np.float64)
    contacts = np.stack([w.sum(axis=1), w @ g[N_], w @ g[D_], w @ g[B_]])
    shape = state["pos"].shape
    F = np.zeros(shape)
    S = np.zeros((4,) + shape[1:])
    F[:, kc[0], kc[1]] = f.T
    S[:, kc[0], kc[1]] = contacts
    return F, S


def total_energy(state: dict, cfg: EpidermisConfig) -> float:
    """The energy whose negative gradient is :func:`reference_forces` (intra Morse over all
    pairs of a cell, the cut repulsive inter potential, the membrane and the wall)."""
    m = cfg.mechanics
    p, cell, et, kc, d, r, same = _pair_terms(state, cfg)
    iu = np.triu_indices(r.shape[0], 1)
    r, same = r[iu], same[iu]
    e = np.where(same, morse_energy(r, m.intra), 0.0).sum()
    e += np.where(~same, inter_energy(r, m.inter, m.inter_cutoff), 0.0).sum()
    e += membrane_energy(p[:, 2], et, m.membrane, m.wall_stiffness).sum()
    return float(e)
