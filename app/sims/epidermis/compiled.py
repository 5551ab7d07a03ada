"""The compiled multi-core CPU epidermis engine (numba): the NumPy engine's step, compiled,
each cell's elements handled by one thread.

Same state, step order and float32 rounding as :class:`~app.sims.epidermis.cpu.CpuEngine`
(``engine.py``'s contract), so checkpoints move between the two and with the CUDA engine. The
arithmetic is float64 but for the intracellular factors (float32, 16 SIMD lanes: most of the
step's work; within ~1e-6 of the terms' magnitudes, see the tests), with fused multiply-adds.
Growth events and divisions run on the host through the same ``model`` functions (and the
same Philox streams) as the NumPy engine; they are rare (every ``growth.interval`` steps).

Inside :meth:`CompiledEngine.run` the elements are packed in cell order (``model.live_elements``)
as float64 ``x[M, 3]`` with ``first[c]:first[c + 1]`` the elements of cell ``c``. One step is
two parallel passes over cells (``prange``): stage 1 computes the adhesion A, the forces and
the contact sums at X and X½ = X + ½dt·F(X); stage 2 the forces at X½, the new positions
(checked, wrapped, rounded to float32) and the gene network. A cell owns the forces of its own
elements (intracellular pairs from each side, each element's row over the cell's padded block
one vectorised loop; intercellular pairs from each side), so nothing is shared between threads
and the result does not depend on the number of threads. Loops meant to vectorise index with
unsigned integers: numba's wrap of negative indices otherwise keeps LLVM from vectorising.

Intercellular pairs come from a Verlet list (the NumPy engine's rule: built from a uniform grid
with ``inter_cutoff + SKIN``, kept while no element has moved SKIN/2 since), a full list per
element filled in parallel; both searches of the config visit the same pairs within the cutoff,
so this engine serves ``cell_list`` and ``centre_cutoff`` alike.
"""

from __future__ import annotations

import math
import time

import numba
import numpy as np
from numba import njit, prange

from app.compute.cpu_threads import threads
from app.compute.jit import CACHE
from app.compute.jit_math import exp_nonpositive, exp_nonpositive_f32
from app.sims.epidermis import model
from app.sims.epidermis.config import EpidermisConfig, Morse
from app.sims.epidermis.cpu import CpuEngine
from app.sims.epidermis.model import B_, D_, HILLS, MAX_STEP_MOVE, N_, R_MIN, SKIN

OK, MOVED, GENES_BLEW_UP = 0, 1, 2        # status of _advance
# Constants a compiled call passes are typed as literals, each value compiled apart; these
# are typed as plain int64.
STAGE1, STAGE2 = np.int64(1), np.int64(2)
CELLS_PER_THREAD = 32          # fewer cells than this per thread: fewer threads
SIMD_PAD = 16                  # a cell's intracellular rows are padded to a multiple of this
F32 = np.float32
LIST_CAP = 16                  # list entries per element kept from the one scan (more: scanned again)
MECH_SIZE = 15                 # intra (4), inter (4), membrane (4), wall, cutoff, squared


# ---- one cell's forces --------------------------------------------------------------------
@njit(inline="always", cache=CACHE, error_model="numpy")
def _morse_over_r(r, a1, xi1, a2, xi2, squared):
    """-V'(r)/r as model.morse_force_over_r (a1 = U0/xi1, a2 = V0/xi2), r > 0; with
    ``squared`` (a compile-time constant: xi2 = 2·xi1) exp(-r/xi1) is exp(-r/xi2)²."""
    e2 = exp_nonpositive(-r * (1.0 / xi2))       # (the reciprocals are hoisted out of loops)
    e1 = e2 * e2 if squared else exp_nonpositive(-r * (1.0 / xi1))
    return (a1 * e1 - a2 * e2) / r


@njit(inline="always", cache=CACHE, error_model="numpy")
def _min_image(d, box, inv_box):
    """d - L·rint(d/L); d itself without a box (box = inv_box = 0)."""
    return d - box * np.rint(d * inv_box)


@njit(inline="always", cache=CACHE, error_model="numpy")
def _intra(P, Q, p0, p1, n, a1, xi1, a2, xi2, squared):
    """Intracellular forces of one cell in float32: positions relative to its element 0 in
    ``P[:, p0:p1]`` (padded to a multiple of SIMD_PAD with element 0), forces into
    ``Q[:, p0:p1]``. For each element k its pull on every element j of the block, so the inner
    loop is one long vectorised row (16 float32 lanes) over the padded block and the sum on
    each j runs in the same order (k). Nothing is masked: k's term on itself is a finite
    factor times a zero displacement, and the padding columns' sums are never read."""
    Q[:, p0:p1] = 0.0
    u1, u2 = F32(a1), F32(a2)
    inv1, inv2 = F32(1.0 / xi1), F32(1.0 / xi2)
    r_min = F32(R_MIN)
    for k in range(n):
        xk, yk, zk = P[0, p0 + k], P[1, p0 + k], P[2, p0 + k]
        for q in range(p1 - p0):
            j = np.uint64(p0 + q)         # unsigned: no negative-index wrap, so LLVM vectorises
            dx, dy, dz = P[0, j] - xk, P[1, j] - yk, P[2, j] - zk
            r = max(math.sqrt(dx * dx + dy * dy + dz * dz), r_min)
            e2 = exp_nonpositive_f32(-r * inv2)
            e1 = e2 * e2 if squared else exp_nonpositive_f32(-r * inv1)
            f = (u1 * e1 - u2 * e2) / r
            Q[0, j] += f * dx
            Q[1, j] += f * dy
            Q[2, j] += f * dz


@njit(cache=CACHE, nogil=True, error_model="numpy", fastmath={"contract"})
def _cell_forces(c, x, P, W, F, S, etype, cell, first, pfirst, off, nbr, own, Wn, Dn, genes,
                 mech, box, inv_box, contacts, squared):
    """Forces on the elements of cell ``c`` at positions ``x`` [3, M] into ``F`` columns (and
    their contact sums into ``S`` when ``contacts``); returns the cell's summed contacts.

    Intracellular: the cell's positions relative to its element 0 (minimum image) into ``P``,
    its forces summed in ``W`` (both float32 [3, padded columns], :func:`_intra`).
    Intercellular: the cell's list entries ``off[first[c]]:off[first[c + 1]]``, factors and
    displacements into ``Wn``, ``Dn`` (Dn[3]: 1 within the cutoff; pairs beyond, NaN ones
    included, add nothing), then per element summed.
    """
    a, b = first[c], first[c + 1]
    n = b - a
    p0, p1 = pfirst[c], pfirst[c + 1]
    x0, y0, z0 = x[0, a], x[1, a], x[2, a]
    for k in range(n):                        # vectorised (unsigned indices: see _intra)
        i, j = np.uint64(a + k), np.uint64(p0 + k)
        P[0, j] = F32(_min_image(x[0, i] - x0, box, inv_box))
        P[1, j] = F32(_min_image(x[1, i] - y0, box, inv_box))
        P[2, j] = F32(x[2, i] - z0)
    P[:, p0 + n:p1] = 0.0                     # the padding: copies of element 0
    _intra(P, W, p0, p1, n, mech[0], mech[1], mech[2], mech[3], squared)
    for k in range(n):
        F[0, a + k], F[1, a + k], F[2, a + k] = W[0, p0 + k], W[1, p0 + k], W[2, p0 + k]
    b1, eta1, b2, eta2 = mech[4], mech[5], mech[6], mech[7]
    cutoff = mech[13]
    e0 = off[a]
    for q in range(off[b] - e0):            # the displacements, gathered (scalar loads)
        e = np.uint64(e0 + q)               # (unsigned indices: see _intra)
        i, j = np.uint64(own[e]), np.uint64(nbr[e])
        Dn[0, e] = _min_image(x[0, i] - x[0, j], box, inv_box)
        Dn[1, e] = _min_image(x[1, i] - x[1, j], box, inv_box)
        Dn[2, e] = x[2, i] - x[2, j]
    for q in range(off[b] - e0):            # the factors, on contiguous rows: vectorised
        e = np.uint64(e0 + q)
        dx, dy, dz = Dn[0, e], Dn[1, e], Dn[2, e]
        r = math.sqrt(dx * dx + dy * dy + dz * dz)
        f = _morse_over_r(max(r, R_MIN), b1, eta1, b2, eta2, squared)
        near = r < cutoff                   # False for NaN: such a pair adds nothing
        Wn[e] = f if (near and f > 0.0) else 0.0
        Dn[0, e] = dx if near else 0.0
        Dn[1, e] = dy if near else 0.0
        Dn[2, e] = dz if near else 0.0
        Dn[3, e] = 1.0 if near else 0.0
    m1, mu1, m2, mu2, wall = mech[8], mech[9], mech[10], mech[11], mech[12]
    for q in range(n):                     # membrane and wall: vectorised over the cell
        i = np.uint64(a + q)
        zi = x[2, i]
        zc = max(zi, 1e-6)
        e2 = exp_nonpositive(-zc / mu2)
        e1 = e2 * e2 if squared else exp_nonpositive(-zc / mu1)
        mz = (m1 * e1 - m2 * e2) if etype[i] == 1 else 0.0
        F[2, i] += mz + (-wall * zi if zi < 0.0 else 0.0)
    s0 = s1 = s2 = s3 = 0.0
    for i in range(a, b):
        fx = fy = fz = 0.0
        n0 = n1 = n2 = n3 = 0.0
        o0 = off[i]
        for q in range(off[i + 1] - o0):
            e = np.uint64(o0 + q)
            f = Wn[e]
            fx += f * Dn[0, e]
            fy += f * Dn[1, e]
            fz += f * Dn[2, e]
            if contacts and Dn[3, e] > 0.0:
                cj = cell[nbr[e]]
                n0 += 1.0
                n1 += genes[N_, cj]
                n2 += genes[D_, cj]
                n3 += genes[B_, cj]
        F[0, i] += fx
        F[1, i] += fy
        F[2, i] += fz
        if contacts:
            S[0, i], S[1, i], S[2, i], S[3, i] = n0, n1, n2, n3
            s0 += n0
            s1 += n1
            s2 += n2
            s3 += n3
    return s0, s1, s2, s3


@njit(inline="always", cache=CACHE, error_model="numpy")
def _forces_of_cell(c, x, P, W, F, S, etype, cell, first, pfirst, off, nbr, own, Wn, Dn, genes,
                    mech, box, inv_box, contacts):
    """:func:`_cell_forces`, compiled apart for xi2 = 2·xi1 in all three potentials (the
    defaults: one exponential per pair fewer) and for any other lengths."""
    if mech[14] > 0.0:
        return _cell_forces(c, x, P, W, F, S, etype, cell, first, pfirst, off, nbr, own, Wn, Dn,
                            genes, mech, box, inv_box, contacts, True)
    return _cell_forces(c, x, P, W, F, S, etype, cell, first, pfirst, off, nbr, own, Wn, Dn,
                        genes, mech, box, inv_box, contacts, False)


@njit(inline="always", cache=CACHE, error_model="numpy")
def _moved2(x, xref, i, box, inv_box):
    dx = _min_image(x[0, i] - xref[0, i], box, inv_box)
    dy = _min_image(x[1, i] - xref[1, i], box, inv_box)
    dz = x[2, i] - xref[2, i]
    return dx * dx + dy * dy + dz * dz


# ---- the gene network (model.gene_rhs, model.gene_step) ------------------------------------
@njit(inline="always", cache=CACHE, error_model="numpy")
def _hill(v, hills, k):
    return hills[k, 0] + hills[k, 1] / (1.0 + (hills[k, 2] * v) ** hills[k, 3])


@njit(inline="always", cache=CACHE, error_model="numpy")
def _gene_rhs(N, D, B, O2, O1, M, mN, mD, mB, A, rates, hills):
    """model.gene_rhs for one cell (the same expressions, evaluated in the same order)."""
    G, k_a, k_d, d_N, d_D, d_B, d_O2, d_O1, d_M = (rates[0], rates[1], rates[2], rates[3],
                                                   rates[4], rates[5], rates[6], rates[7], rates[8])
    return (-k_a * N * mD + k_d * B - d_N * N + _hill(B, hills, 0) * _hill(O2, hills, 1),
            -k_a * D * mN + k_d * mB - d_D * D + _hill(N, hills, 2),
            k_a * N * mD - k_d * B - d_B * B,
            -d_O2 * O2 + _hill(O1, hills, 3) * _hill(G, hills, 4),
            -d_O1 * O1 + _hill(O2, hills, 5) * _hill(A, hills, 6),
            -d_M * M + _hill(O2, hills, 7))


@njit(inline="always", cache=CACHE, error_model="numpy")
def _gene_step(genes, gn, c, mN, mD, mB, A, rates, hills, dt):
    """model.gene_step for cell ``c`` into ``gn`` (float32 values); False where not finite."""
    N, D, B, O2, O1, M = genes[0, c], genes[1, c], genes[2, c], genes[3, c], genes[4, c], genes[5, c]
    k = _gene_rhs(N, D, B, O2, O1, M, mN, mD, mB, A, rates, hills)
    h = 0.5 * dt
    k = _gene_rhs(N + h * k[0], D + h * k[1], B + h * k[2], O2 + h * k[3], O1 + h * k[4],
                  M + h * k[5], mN, mD, mB, A, rates, hills)
    ok = True
    for q in range(6):
        v = genes[q, c] + dt * k[q]
        ok = ok and math.isfinite(v)
        gn[q, c] = np.float64(np.float32(v))
    return ok


@njit(inline="always", cache=CACHE, error_model="numpy")
def _store(v, box):
    """A coordinate in its stored form (model.wrap_float32): wrapped into [0, L), float32."""
    if box > 0.0:
        v = v - box * math.floor(v / box)
        if v >= box:
            v -= box
        w = np.float32(v)
        if w >= np.float32(box):
            w = np.float32(0.0)
        return np.float64(w)
    return np.float64(np.float32(v))


# ---- the two passes of a step ---------------------------------------------------------------
@njit(cache=CACHE, nogil=True, error_model="numpy")
def _cell_stage1(c, x, xh, P, W, F, S, moves, csum, A, cdisp, xref, etype, cell, first, pfirst,
                 off, nbr, own, Wn, Dn, genes, mech, box, inv_box, dt, with_genes):
    """Cell ``c``: A, forces and contact sums at X, X½ = X + ½dt·F, the largest squared move
    of X½ from the list's reference positions (each element's in ``moves[1]`` first: the
    element loop vectorises, the maximum is taken after)."""
    a, b = first[c], first[c + 1]
    if with_genes:
        s = 0.0
        for i in range(a, b):
            if etype[i] == 1:
                s += abs(x[2, i])
        A[c] = s
    s0, s1, s2, s3 = _forces_of_cell(c, x, P, W, F, S, etype, cell, first, pfirst, off, nbr,
                                     own, Wn, Dn, genes, mech, box, inv_box, with_genes)
    csum[c, 0], csum[c, 1], csum[c, 2], csum[c, 3] = s0, s1, s2, s3
    for q in range(b - a):                     # vectorised (unsigned indices: see _intra)
        i = np.uint64(a + q)
        xh[0, i] = x[0, i] + 0.5 * dt * F[0, i]
        xh[1, i] = x[1, i] + 0.5 * dt * F[1, i]
        xh[2, i] = x[2, i] + 0.5 * dt * F[2, i]
        moves[1, i] = _moved2(xh, xref, i, box, inv_box)
    worst = 0.0
    for i in range(a, b):
        worst = max(worst, moves[1, i])
    cdisp[c] = worst


@njit(cache=CACHE, nogil=True, error_model="numpy")
def _cell_stage2(c, x, xh, xn, P, W, F, S, moves, csum, A, cdisp, bad, xref, etype, cell, first,
                 pfirst, off, nbr, own, Wn, Dn, genes, gn, mech, rates, hills, box, inv_box, dt,
                 with_genes):
    """Cell ``c``: forces at X½, its new positions into ``xn`` (stored form) and genes into
    ``gn``, a blow-up flag (MOVED, GENES_BLEW_UP) and the largest squared move of the new X
    from the list's reference positions (per element in ``moves`` first: each step's move,
    the squared move since the list)."""
    a, b = first[c], first[c + 1]
    _forces_of_cell(c, xh, P, W, F, S, etype, cell, first, pfirst, off, nbr, own, Wn, Dn, genes,
                    mech, box, inv_box, np.bool_(False))
    for q in range(b - a):                     # vectorised (unsigned indices: see _intra)
        i = np.uint64(a + q)
        v0, v1, v2 = x[0, i] + dt * F[0, i], x[1, i] + dt * F[1, i], x[2, i] + dt * F[2, i]
        d0, d1, d2 = v0 - x[0, i], v1 - x[1, i], v2 - x[2, i]
        moves[0, i] = math.sqrt(d0 * d0 + d1 * d1 + d2 * d2)
        xn[0, i], xn[1, i], xn[2, i] = _store(v0, box), _store(v1, box), np.float64(np.float32(v2))
        moves[1, i] = _moved2(xn, xref, i, box, inv_box)
    flag = OK
    worst = 0.0
    for i in range(a, b):
        if not moves[0, i] <= MAX_STEP_MOVE:   # NaN included
            flag = MOVED
        worst = max(worst, moves[1, i])
    cdisp[c] = worst
    if with_genes and flag == OK:
        n = csum[c, 0]
        if n > 0:
            mN, mD, mB = csum[c, 1] / n, csum[c, 2] / n, csum[c, 3] / n
        else:
            mN = mD = mB = 0.0
        if not _gene_step(genes, gn, c, mN, mD, mB, A[c], rates, hills, dt):
            flag = GENES_BLEW_UP
    bad[c] = flag


@njit(parallel=True, nogil=True, cache=CACHE, error_model="numpy")
def _pass(stage, x, xh, xn, P, W, F, S, moves, csum, A, cdisp, bad, xref, etype, cell, first,
          pfirst, off, nbr, own, Wn, Dn, genes, gn, mech, rates, hills, box, inv_box, dt,
          with_genes):
    """Stage 1 or 2 of a step, cells spread over the threads."""
    for q in prange(first.shape[0] - 1):
        c = np.int64(q)            # the prange index may be unsigned: one specialization below
        if stage == STAGE1:
            _cell_stage1(c, x, xh, P, W, F, S, moves, csum, A, cdisp, xref, etype, cell, first,
                         pfirst, off, nbr, own, Wn, Dn, genes, mech, box, inv_box, dt,
                         with_genes)
        else:
            _cell_stage2(c, x, xh, xn, P, W, F, S, moves, csum, A, cdisp, bad, xref, etype, cell,
                         first, pfirst, off, nbr, own, Wn, Dn, genes, gn, mech, rates, hills,
                         box, inv_box, dt, with_genes)


# ---- the Verlet list ----------------------------------------------------------------------
@njit(cache=CACHE, nogil=True, error_model="numpy")
def _grid(x, box, reach):
    """Grid coordinates [3, M] and dims of bins at least ``reach`` wide (periodic x, y: the
    box divided evenly; z from 0), widened where the bins would far outnumber the elements."""
    M = x.shape[1]
    lo, hi = np.zeros(3), np.zeros(3)
    for k in range(3):
        lo[k], hi[k] = np.inf, -np.inf
        for i in range(M):
            v = max(x[k, i], 0.0) if k == 2 else x[k, i]
            if math.isfinite(v):
                lo[k] = min(lo[k], v)
                hi[k] = max(hi[k], v)
        if lo[k] > hi[k]:                     # no finite coordinate
            lo[k], hi[k] = 0.0, 0.0
    lo[2] = 0.0
    dims, w = np.ones(3, np.int64), np.empty(3)
    width = reach
    while True:
        for k in range(3):
            if k < 2 and box > 0.0:
                dims[k] = max(1, math.floor(box / width))
                w[k] = box / dims[k]
            else:
                dims[k] = math.floor((hi[k] - lo[k]) / width) + 1 if M else 1
                w[k] = width
        if dims[0] * dims[1] * dims[2] <= 4 * M + 4096:
            break
        width *= 2.0
    idx = np.empty((3, M), np.int64)
    for k in range(3):
        for i in range(M):
            v = max(x[k, i], 0.0) if k == 2 else x[k, i]
            if not math.isfinite(v):          # a blown-up element: any bin (no pairs anyway)
                idx[k, i] = 0
            elif k < 2 and box > 0.0:
                idx[k, i] = math.floor(v / w[k]) % dims[k]
            else:
                idx[k, i] = max(0, min(math.floor((v - lo[k]) / w[k]), dims[k] - 1))
    return idx, dims


@njit(inline="always", cache=CACHE, error_model="numpy")
def _shifts(n, periodic):
    """Neighbour bin offsets along one axis: -1..1, or fewer on a periodic axis of < 3 bins."""
    if not periodic or n >= 3:
        return -1, 2
    return 0, n


@njit(inline="always", cache=CACHE, error_model="numpy")
def _bin_along(j, n, periodic):
    """Bin ``j`` on an axis of ``n`` bins: wrapped where periodic, else -1 outside."""
    if periodic:
        return j % n
    return j if 0 <= j < n else -1


@njit(inline="always", cache=CACHE, error_model="numpy")
def _row_ranges(jx, n, periodic):
    """The x-neighbour bins of bin ``jx`` in a row of ``n`` as at most two runs of consecutive
    bins [lo1, hi1), [lo2, hi2) (each bin once)."""
    if periodic and n < 3:
        return 0, n, 0, 0
    if periodic and jx == 0:
        return 0, 2, n - 1, n
    if periodic and jx == n - 1:
        return n - 2, n, 0, 1
    return max(jx - 1, 0), min(jx + 2, n), 0, 0


@njit(inline="always", cache=CACHE, error_model="numpy")
def _scan_run(ci, xi, yi, zi, xs, cs, order, s0, s1, box, inv_box, r2max, out, base, cap, n):
    """Candidates ``s0:s1`` (bin-sorted) of an element: those of other cells within reach
    written to ``out[base + n]`` while n < cap; returns n, counting all of them."""
    for p in range(s0, s1):
        if cs[p] == ci:
            continue
        dx = _min_image(xi - xs[0, p], box, inv_box)
        dy = _min_image(yi - xs[1, p], box, inv_box)
        dz = zi - xs[2, p]
        if dx * dx + dy * dy + dz * dz < r2max:
            if n < cap:
                out[base + n] = order[p]
            n += 1
    return n


@njit(cache=CACHE, nogil=True, error_model="numpy")
def _scan_element(i, x, cell, idx, dims, xs, cs, order, start, box, inv_box, reach, out, base,
                  cap):
    """The elements of other cells within ``reach`` of element ``i``, from the 27 bins around
    its own (fewer on a periodic axis of < 3 bins; the x-neighbours of a bin are consecutive
    in the bin-sorted arrays ``xs``, ``cs``): their number, the first ``cap`` of them written
    to ``out[base:]``."""
    nx, ny, nz = dims[0], dims[1], dims[2]
    periodic = box > 0.0
    ylo, yhi = _shifts(ny, periodic)
    lo1, hi1, lo2, hi2 = _row_ranges(idx[0, i], nx, periodic)
    ci, xi, yi, zi = cell[i], x[0, i], x[1, i], x[2, i]
    r2max = reach * reach
    n = 0
    for sz in range(-1, 2):
        jz = idx[2, i] + sz
        if jz < 0 or jz >= nz:
            continue
        for sy in range(ylo, yhi):
            jy = _bin_along(idx[1, i] + sy, ny, periodic)
            if jy < 0:
                continue
            row = (jz * ny + jy) * nx
            n = _scan_run(ci, xi, yi, zi, xs, cs, order, start[row + lo1], start[row + hi1],
                          box, inv_box, r2max, out, base, cap, n)
            if hi2 > lo2:
                n = _scan_run(ci, xi, yi, zi, xs, cs, order, start[row + lo2], start[row + hi2],
                              box, inv_box, r2max, out, base, cap, n)
    return n


@njit(parallel=True, nogil=True, cache=CACHE, error_model="numpy")
def _scan_bins(x, cell, idx, dims, xs, cs, order, start, box, inv_box, reach, out, cap, count):
    """:func:`_scan_element` for every element (in bin order: neighbours share bins), the
    counts into ``count``."""
    for q in prange(x.shape[1]):
        i = order[np.int64(q)]
        count[i] = _scan_element(i, x, cell, idx, dims, xs, cs, order, start, box, inv_box, reach,
                                 out, i * cap, cap)


@njit(parallel=True, nogil=True, cache=CACHE, error_model="numpy")
def _gather_list(x, cell, idx, dims, xs, cs, order, start, box, inv_box, reach, out, cap, off,
                 nbr, own):
    """The CSR list from the capped scan (elements with more than ``cap`` scanned again)."""
    for q in prange(x.shape[1]):
        i = np.int64(q)
        n = off[i + 1] - off[i]
        if n > cap:
            _scan_element(i, x, cell, idx, dims, xs, cs, order, start, box, inv_box, reach, nbr,
                          off[i], n)
        else:
            for k in range(n):
                nbr[off[i] + k] = out[i * cap + k]
        for k in range(n):
            own[off[i] + k] = i


@njit(cache=CACHE, nogil=True, error_model="numpy")
def _build_list(x, cell, box, inv_box, reach):
    """The Verlet list at ``x`` in CSR form: (off [M + 1], nbr, own), the entries of element i
    at ``off[i]:off[i + 1]`` (its neighbour, itself)."""
    M = x.shape[1]
    idx, dims = _grid(x, box, reach)
    nb = dims[0] * dims[1] * dims[2]
    start = np.zeros(nb + 1, np.int64)
    h = np.empty(M, np.int64)
    for i in range(M):
        h[i] = (idx[2, i] * dims[1] + idx[1, i]) * dims[0] + idx[0, i]
        start[h[i] + 1] += 1
    for k in range(nb):
        start[k + 1] += start[k]
    fill = start[:-1].copy()
    order = np.empty(M, np.int64)
    for i in range(M):
        order[fill[h[i]]] = i
        fill[h[i]] += 1
    xs, cs = np.empty((3, M)), np.empty(M, np.int64)
    for q in range(M):
        i = order[q]
        xs[0, q], xs[1, q], xs[2, q], cs[q] = x[0, i], x[1, i], x[2, i], cell[i]
    count = np.empty(M, np.int64)
    out = np.empty(M * LIST_CAP, np.int32)
    _scan_bins(x, cell, idx, dims, xs, cs, order, start, box, inv_box, reach, out, LIST_CAP,
               count)
    off = np.zeros(M + 1, np.int64)
    for i in range(M):
        off[i + 1] = off[i] + count[i]
    nbr, own = np.empty(off[M], np.int32), np.empty(off[M], np.int32)
    _gather_list(x, cell, idx, dims, xs, cs, order, start, box, inv_box, reach, out, LIST_CAP,
                 off, nbr, own)
    return off, nbr, own


# ---- the step loop --------------------------------------------------------------------------
@njit(cache=CACHE, nogil=True, error_model="numpy")
def _advance(nsteps, x, genes, etype, cell, first, pfirst, off, nbr, own, xref, listed, mech,
             rates, hills, box, dt, reach, with_genes):
    """Up to ``nsteps`` steps in place on ``x`` [3, M] and ``genes`` [6, C], the Verlet list
    (off, nbr, own; reference positions ``xref``; ``listed[0]``: it is valid) rebuilt where
    needed. Returns (steps done, status, the failing cell, the list); on MOVED / GENES_BLEW_UP
    the state is that before the failing step."""
    M, C = x.shape[1], first.shape[0] - 1
    inv_box = 1.0 / box if box > 0.0 else 0.0
    xh, F = np.empty((3, M)), np.empty((3, M))
    P, W = np.empty((3, pfirst[C]), np.float32), np.empty((3, pfirst[C]), np.float32)
    S, moves = np.zeros((4, M)), np.empty((2, M))
    csum, A = np.zeros((C, 4)), np.zeros(C)
    cdisp, bad = np.zeros(C), np.zeros(C, np.int64)
    Wn, Dn = np.empty(nbr.shape[0]), np.empty((4, nbr.shape[0]))
    # the state now (xa, ga) and the next (xb, gb), swapped after each step (no copies)
    xa, xb, ga, gb = x, np.empty((3, M)), genes, genes.copy()
    x_swapped = g_swapped = False
    limit = (0.5 * SKIN) ** 2
    moved = 0.0
    for i in range(M if listed[0] else 0):
        moved = max(moved, _moved2(x, xref, i, box, inv_box))
    status, where, done = OK, -1, nsteps
    for step in range(nsteps):
        if not listed[0] or not moved < limit:
            off, nbr, own = _build_list(xa, cell, box, inv_box, reach)
            xref[:] = xa
            listed[0] = 1
            Wn, Dn = np.empty(nbr.shape[0]), np.empty((4, nbr.shape[0]))
        _pass(STAGE1, xa, xh, xb, P, W, F, S, moves, csum, A, cdisp, bad, xref, etype, cell,
              first, pfirst, off, nbr, own, Wn, Dn, ga, gb, mech, rates, hills, box, inv_box, dt,
              with_genes)
        if not cdisp.max() < limit:
            off, nbr, own = _build_list(xh, cell, box, inv_box, reach)
            xref[:] = xh
            Wn, Dn = np.empty(nbr.shape[0]), np.empty((4, nbr.shape[0]))
        _pass(STAGE2, xa, xh, xb, P, W, F, S, moves, csum, A, cdisp, bad, xref, etype, cell,
              first, pfirst, off, nbr, own, Wn, Dn, ga, gb, mech, rates, hills, box, inv_box, dt,
              with_genes)
        for c in range(C):
            if bad[c] != OK and status == OK:
                status, where, done = bad[c], c, step
        if status != OK:
            break
        xa, xb = xb, xa
        x_swapped = not x_swapped
        if with_genes:
            ga, gb = gb, ga
            g_swapped = not g_swapped
        moved = cdisp.max() if C else 0.0
    if x_swapped:
        x[:] = xa
    if g_swapped:
        genes[:] = ga
    return done, status, where, off, nbr, own


# ---- the engine ---------------------------------------------------------------------------
def _morse_row(m: Morse) -> list[float]:
    return [m.U0 / m.xi1, m.xi1, m.V0 / m.xi2, m.xi2]


def mechanics_vector(cfg: EpidermisConfig) -> np.ndarray:
    """The mechanics the compiled functions read (MECH_SIZE numbers)."""
    m = cfg.mechanics
    squared = all(p.xi2 == 2.0 * p.xi1 for p in (m.intra, m.inter, m.membrane))
    return np.array(_morse_row(m.intra) + _morse_row(m.inter) + _morse_row(m.membrane)
                    + [m.wall_stiffness, m.inter_cutoff, float(squared)], np.float64)


def gene_vectors(cfg: EpidermisConfig) -> tuple[np.ndarray, np.ndarray]:
    """(rates [G, k_a, k_d, d_N, d_D, d_B, d_O2, d_O1, d_M], hills [8, 4] in HILLS order)."""
    s = cfg.genes
    rates = np.array([s.G, s.k_a, s.k_d, s.d_N, s.d_D, s.d_B, s.d_O2, s.d_O1, s.d_M], np.float64)
    hills = np.array([[h.a, h.b, h.c, h.h] for h in (getattr(s, name) for name in HILLS)],
                     np.float64)
    return rates, hills


def padded_offsets(count: np.ndarray) -> np.ndarray:
    """Column offsets of each cell's padded block (its element count rounded up to 8)."""
    out = np.zeros(count.shape[0] + 1, np.int64)
    np.cumsum(-(-np.asarray(count, np.int64) // SIMD_PAD) * SIMD_PAD, out=out[1:])
    return out


def _empty_list(M: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return np.zeros(M + 1, np.int64), np.zeros(0, np.int32), np.zeros(0, np.int32)


def warm_up() -> float:
    """Compile (or load from the on-disk cache) every function; returns the seconds it took."""
    start = time.perf_counter()
    cfg = EpidermisConfig()
    x = np.array([[0.0, 1.0, 3.0, 4.0], [0.0] * 4, [1.0] * 4])
    etype = np.array([1, 0, 1, 0], np.int8)
    cell = np.array([0, 0, 1, 1], np.int64)
    first = np.array([0, 2, 4], np.int64)
    pfirst = padded_offsets(np.diff(first))
    genes = np.full((6, 2), 0.5)
    rates, hills = gene_vectors(cfg)
    mech = mechanics_vector(cfg)
    for box in (0.0, 20.0):
        _advance(2, x.copy(), genes.copy(), etype, cell, first, pfirst, *_empty_list(4),
                 np.zeros((3, 4)), np.zeros(1, np.int64), mech, rates, hills, box, 0.1, 4.0, True)
    return time.perf_counter() - start


_first_use: list[float] = []       # this process's first warm_up (the relaxation's engine)


class CompiledEngine(CpuEngine):
    """:class:`CpuEngine` with the step compiled and spread over all cores.

    ``compile_seconds``: the first use in this process (compile, or load from numba's on-disk
    cache), also when an earlier engine (the initial relaxation's) paid it.
    """

    def __init__(self, cfg: EpidermisConfig, state: dict):
        seconds = warm_up()
        if not _first_use:
            _first_use.append(seconds)
        self.compile_seconds = _first_use[0]
        self._packed: dict | None = None
        super().__init__(cfg, state)
        self._mech = mechanics_vector(cfg)
        self._rates, self._hills = gene_vectors(cfg)
        self._box = float(model.box_of(cfg) or 0.0)
        self._reach = cfg.mechanics.inter_cutoff + SKIN

    # ---- packed working arrays ------------------------------------------------------------
    def _pack(self) -> dict:
        """The packed arrays of the current element set (rebuilt when it changed)."""
        p = self._packed
        if p is not None and p["version"] == self._version:
            return p
        x, cell, etype, kc = model.live_elements(self.s)
        C = self.s["n_cells"]
        count = self.s["count"][:C]
        first = np.zeros(C + 1, np.int64)
        np.cumsum(count, out=first[1:])
        M = x.shape[0]
        self._packed = p = {
            "version": self._version, "x": np.ascontiguousarray(x.T),
            "cell": cell.astype(np.int64), "etype": np.ascontiguousarray(etype, np.int8),
            "first": first, "pfirst": padded_offsets(count), "kc": kc,
            "genes": np.ascontiguousarray(self.s["genes"][:, :C]),
            "list": _empty_list(M), "xref": np.zeros((3, M)), "listed": np.zeros(1, np.int64)}
        return p

    def _unpack(self, p: dict) -> None:
        kc = p["kc"]
        self.s["pos"][:, kc[0], kc[1]] = p["x"]
        self.s["genes"][:, :p["genes"].shape[1]] = p["genes"]

    # ---- the step -------------------------------------------------------------------------
    def _compiled_steps(self, nsteps: int) -> None:
        p = self._pack()
        # at least CELLS_PER_THREAD cells a thread: a small tissue's step is shorter than the
        # threads' start and barrier (and a busy machine's descheduled thread stalls each pass)
        n = max(1, min(numba.get_num_threads(), self.s["n_cells"] // CELLS_PER_THREAD))
        with threads(n):
            steps, status, cell, *p["list"] = _advance(
                nsteps, p["x"], p["genes"], p["etype"], p["cell"], p["first"], p["pfirst"],
                *p["list"], p["xref"], p["listed"], self._mech, self._rates, self._hills,
                self._box, self.cfg.run.dt, self._reach, self.cfg.run.mode != "movement")
        self.s["step"] += steps
        self._unpack(p)
        if status != OK:
            self._raise_blow_up(status, cell)

    def _raise_blow_up(self, status: int, cell: int) -> None:
        """The NumPy engine's error for the failing step (it redoes the step from this state),
        else one naming the step and the first failing cell."""
        try:
            CpuEngine(self.cfg, self.state()).advance(1)
        except model.BlownUpError:
            raise
        except (ValueError, FloatingPointError):      # its grid cannot bin NaN positions
            pass
        what = "an element moved too far or is not finite" if status == MOVED else \
            "the gene network is not finite"
        raise model.BlownUpError(f"the tissue blew up at step {self.s['step']} in cell {cell}: "
                                 f"{what}; lower run.dt or check the parameters")

    def advance(self, nsteps: int) -> None:
        cfg = self.cfg
        left = int(nsteps)
        interval = cfg.growth.interval
        while left > 0:
            k = left
            if cfg.run.mode == "full":
                k = min(k, interval - self.s["step"] % interval)
            self._compiled_steps(k)
            left -= k
            if cfg.run.mode == "full" and self.s["step"] % interval == 0:
                self._growth_event()

    def forces(self) -> tuple[np.ndarray, np.ndarray]:
        """Stage-1 forces and contact sums now (a fresh list; the functions the step compiled)."""
        p = self._pack()
        x, box = p["x"], self._box
        M, C = x.shape[1], p["first"].shape[0] - 1
        inv_box = 1.0 / box if box > 0.0 else 0.0
        off, nbr, own = _build_list(x, p["cell"], box, inv_box, self._reach)
        F, S = np.zeros((3, M)), np.zeros((4, M))
        L, Mp = nbr.shape[0], p["pfirst"][C]
        P, W = np.empty((3, Mp), np.float32), np.empty((3, Mp), np.float32)
        _pass(STAGE1, x, np.empty((3, M)), np.empty((3, M)), P, W, F, S, np.empty((2, M)),
              np.zeros((C, 4)), np.zeros(C), np.zeros(C), np.zeros(C, np.int64), x.copy(),
              p["etype"], p["cell"], p["first"], p["pfirst"], off, nbr, own, np.empty(L),
              np.empty((4, L)), p["genes"], p["genes"].copy(), self._mech, self._rates,
              self._hills, box, inv_box, 0.0, np.bool_(True))
        kc = p["kc"]
        E, cap = self.s["pos"].shape[1:]
        out_f = np.zeros((3, E, cap), np.float32)
        out_s = np.zeros((4, E, cap), np.float32)
        out_f[:, kc[0], kc[1]] = F
        out_s[:, kc[0], kc[1]] = S
        return out_f, out_s
