"""The CPU (NumPy) epidermis engine: the reference the CUDA engine is tested against and the
fallback for small tissues (tens to a few hundred cells).

Computes in float64 and rounds positions and genes to float32 after every step, so its state
is exactly the canonical (float32) state and a checkpoint resumes bit-identically.

- Intracellular forces: all pairs of a cell, vectorised over cells in the padded
  ``[slots, slots, cells]`` layout, masked by the element counts.
- Intercellular forces and contact sums, ``run.search``:
  'cell_list': a uniform grid of cells at least ``inter_cutoff`` wide (x, y: the box divided
  evenly, periodic; z from 0 up to the highest element), built by sorting the element hashes
  (argsort, then start offsets by searchsorted and sizes by bincount); every element gathers
  from the 27 grid cells around its own (fewer when the box holds fewer than 3 grid cells).
  'centre_cutoff': the paper's Algorithm 2, every element pair of the cell pairs whose centres
  are closer than ``centre_cutoff`` (minimum image). Both visit the same element pairs within
  ``inter_cutoff``, so the forces agree to rounding.
"""

from __future__ import annotations

import numpy as np

from app.sims.epidermis import model
from app.sims.epidermis.config import EpidermisConfig
from app.sims.epidermis.engine import EpidermisEngine
from app.sims.epidermis.model import (B_, D_, N_, R_MIN, SKIN, box_of, inter_force_over_r,
                                      membrane_force_z, minimum_image, morse_force_over_r)

PAIR_CHUNK = 1 << 21        # element pairs per chunk of the centre-cutoff search


class CpuEngine(EpidermisEngine):
    def __init__(self, cfg: EpidermisConfig, state: dict):
        self.cfg = cfg
        self._version = 0            # bumped whenever the set of elements changes
        self._list = None
        self.restore(state)

    # ---- state --------------------------------------------------------------------------
    def restore(self, state: dict) -> None:
        E = self.cfg.tissue.max_elements
        if state["pos"].shape[1] != E:
            raise ValueError(f"the state has {state['pos'].shape[1]} element slots per cell; "
                             f"the config's max_elements is {E}")
        self.s = {"step": int(state["step"]), "event": int(state["event"]),
                  "n_cells": int(state["n_cells"]),
                  "pos": np.asarray(state["pos"], np.float32).astype(np.float64),
                  "etype": np.array(state["etype"], np.int8),
                  "count": np.array(state["count"], np.int32),
                  "genes": np.asarray(state["genes"], np.float32).astype(np.float64)}
        self._version += 1

    def state(self) -> dict:
        s = self.s
        return {"step": np.int64(s["step"]), "event": np.int64(s["event"]),
                "n_cells": np.int64(s["n_cells"]), "pos": s["pos"].astype(np.float32),
                "etype": s["etype"].copy(), "count": s["count"].copy(),
                "genes": s["genes"].astype(np.float32)}

    @property
    def step(self) -> int:
        return self.s["step"]

    @property
    def n_cells(self) -> int:
        return self.s["n_cells"]

    @property
    def capacity(self) -> int:
        return self.s["count"].shape[0]

    # ---- forces -------------------------------------------------------------------------
    def _intra(self, p: np.ndarray, valid: np.ndarray) -> np.ndarray:
        """All-pairs Morse inside each cell: p [3, S, C] -> forces [3, S, C]."""
        box = box_of(self.cfg)
        S = p.shape[1]
        if box:       # unwrap each cell about its element 0 (a cell spans far less than L/2)
            p = p.copy()
            p[:2] = p[:2, :1] + minimum_image(p[:2] - p[:2, :1], box)
        d = p[:, :, None, :] - p[:, None, :, :]                       # [3, S, S, C]
        r = np.sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2])
        mask = valid[:, None, :] & valid[None, :, :]
        mask[np.arange(S), np.arange(S)] = False
        f = np.where(mask, morse_force_over_r(np.maximum(r, R_MIN), self.cfg.mechanics.intra), 0.0)
        return np.einsum("ijc,aijc->aic", f, d)

    def _grid_pairs(self, x: np.ndarray, cut: float) -> tuple[np.ndarray, np.ndarray]:
        """Candidate pairs (i, j), i != j, from the 27 grid cells (at least ``cut`` wide)
        around each element."""
        box = box_of(self.cfg)
        idx, dims, periodic = [], [], []
        for a in range(2):
            if box:
                n = max(1, int(np.floor(box / cut)))
                i = np.floor(x[a] / (box / n)).astype(np.int64) % n
            else:
                i = np.floor((x[a] - x[a].min()) / cut).astype(np.int64)
                n = int(i.max()) + 1
            idx.append(i)
            dims.append(n)
            periodic.append(bool(box))
        iz = np.floor(np.maximum(x[2], 0.0) / cut).astype(np.int64)
        idx.append(iz)
        dims.append(int(iz.max()) + 1)
        periodic.append(False)
        nx, ny, nz = dims
        h = (idx[2] * ny + idx[1]) * nx + idx[0]
        order = np.argsort(h, kind="stable")
        size = np.bincount(h, minlength=nx * ny * nz)
        start = np.searchsorted(h[order], np.arange(nx * ny * nz))
        shifts = []
        for a in range(3):
            if periodic[a]:
                shifts.append(sorted({s % dims[a] for s in (-1, 0, 1)}))
            else:
                shifts.append([-1, 0, 1])
        occ = np.flatnonzero(size)                                     # occupied grid cells
        ox, oy, oz = occ % nx, (occ // nx) % ny, occ // (nx * ny)
        src, dst = [], []
        for sz in shifts[2]:
            jz = oz + sz
            vz = (jz >= 0) & (jz < nz)
            for sy in shifts[1]:
                jy = (oy + sy) % ny if periodic[1] else oy + sy
                vy = vz & (jy >= 0) & (jy < ny)
                for sx in shifts[0]:
                    jx = (ox + sx) % nx if periodic[0] else ox + sx
                    v = vy & (jx >= 0) & (jx < nx)
                    src.append(occ[v])
                    dst.append(((jz * ny + jy) * nx + jx)[v])
        A, B = np.concatenate(src), np.concatenate(dst)
        nA, nB = size[A], size[B]
        keep = nB > 0
        A, B, nA, nB = A[keep], B[keep], nA[keep], nB[keep]
        tot = nA * nB
        seg = np.repeat(np.arange(A.size), tot)
        t = np.arange(int(tot.sum())) - np.repeat(np.cumsum(tot) - tot, tot)
        nb = nB[seg]
        i = order[start[A][seg] + t // nb]
        j = order[start[B][seg] + t % nb]
        diff = i != j
        return i[diff], j[diff]

    def _pair_list(self, x: np.ndarray, cell: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Pairs (i < j) of elements of different cells that may be within ``inter_cutoff``:
        a Verlet list built from the grid with ``inter_cutoff + SKIN`` and reused while no
        element has moved more than SKIN/2 since (and the elements are the same), so it always
        holds every pair within the cutoff; the forces are exactly those of a fresh search."""
        box = box_of(self.cfg)
        lst = self._list
        if lst is not None and lst[0] == self._version and lst[1].shape == x.shape:
            d = x - lst[1]
            d[0] = minimum_image(d[0], box)
            d[1] = minimum_image(d[1], box)
            if (d * d).sum(axis=0).max() < (0.5 * SKIN) ** 2:
                return lst[2], lst[3]
        reach = self.cfg.mechanics.inter_cutoff + SKIN
        i, j = self._grid_pairs(x, reach)
        keep = (i < j) & (cell[i] != cell[j])
        i, j = i[keep], j[keep]
        d = x[:, i] - x[:, j]
        d[0] = minimum_image(d[0], box)
        d[1] = minimum_image(d[1], box)
        keep = (d * d).sum(axis=0) < reach * reach
        i, j = i[keep], j[keep]
        self._list = (self._version, x.copy(), i, j)
        return i, j

    def _inter_pairs(self, x, cell, i, j, genes, contacts: bool):
        """Forces (flat [3, M]) and contact sums ([4, M] or None) from the pairs (i < j) of
        elements of different cells, each pair acting on both of its elements."""
        m, box = self.cfg.mechanics, box_of(self.cfg)
        M = x.shape[1]
        d = x[:, i] - x[:, j]
        d[0] = minimum_image(d[0], box)
        d[1] = minimum_image(d[1], box)
        r = np.sqrt((d * d).sum(axis=0))
        near = r < m.inter_cutoff
        i, j, d, r = i[near], j[near], d[:, near], r[near]
        f = inter_force_over_r(np.maximum(r, R_MIN), m.inter, m.inter_cutoff)
        F = np.stack([np.bincount(i, weights=f * d[a], minlength=M) -
                      np.bincount(j, weights=f * d[a], minlength=M) for a in range(3)])
        S = None
        if contacts:
            ci, cj = cell[i], cell[j]
            S = np.stack([(np.bincount(i, minlength=M) + np.bincount(j, minlength=M)).astype(np.float64)] +
                         [np.bincount(i, weights=genes[g][cj], minlength=M) +
                          np.bincount(j, weights=genes[g][ci], minlength=M) for g in (N_, D_, B_)])
        return F, S

    def _centre_pairs(self, p, valid, genes, contacts: bool):
        """The centre-cutoff search on the padded layout: p [3, S, C] -> forces [3, S, C] and
        contact sums [4, S, C] (or None)."""
        m, box = self.cfg.mechanics, box_of(self.cfg)
        S, C = p.shape[1], p.shape[2]
        cnt = valid.sum(axis=0)
        ctr = model.centroids(p, cnt, C, box)
        dc = ctr[:, :, None] - ctr[:, None, :]
        dc[0] = minimum_image(dc[0], box)
        dc[1] = minimum_image(dc[1], box)
        near = (dc * dc).sum(axis=0) < m.centre_cutoff ** 2
        np.fill_diagonal(near, False)
        pa, pb = np.nonzero(near)
        F = np.zeros((3, S * C))
        Sums = np.zeros((4, S * C)) if contacts else None
        step = max(1, PAIR_CHUNK // (S * S))
        for lo in range(0, pa.size, step):
            a, b = pa[lo:lo + step], pb[lo:lo + step]
            d = p[:, :, None, a] - p[:, None, :, b]                     # [3, S, S, P]
            d[0] = minimum_image(d[0], box)
            d[1] = minimum_image(d[1], box)
            r = np.sqrt((d * d).sum(axis=0))
            w = valid[:, None, a] & valid[None, :, b] & (r < m.inter_cutoff)
            f = np.where(w, inter_force_over_r(np.maximum(r, R_MIN), m.inter, m.inter_cutoff), 0.0)
            target = (np.arange(S)[:, None] * C + a[None, :]).ravel()
            for k in range(3):
                F[k] += np.bincount(target, weights=np.einsum("ijp,ijp->ip", f, d[k]).ravel(),
                                    minlength=S * C)
            if contacts:
                n_near = w.astype(np.float64).sum(axis=1)              # [S, P]
                Sums[0] += np.bincount(target, weights=n_near.ravel(), minlength=S * C)
                for k, g in enumerate((N_, D_, B_)):
                    Sums[1 + k] += np.bincount(
                        target, weights=(n_near * genes[g][b][None, :]).ravel(), minlength=S * C)
        F = F.reshape(3, S, C)
        return F, (Sums.reshape(4, S, C) if contacts else None)

    def _forces(self, p: np.ndarray, etype: np.ndarray, valid: np.ndarray, genes: np.ndarray,
                contacts: bool) -> tuple[np.ndarray, np.ndarray | None]:
        """Total forces [3, S, C] at positions p [3, S, C] (S = slots in use, C = live cells)
        and the per-element contact sums [4, S, C] when ``contacts``."""
        m = self.cfg.mechanics
        F = self._intra(p, valid)
        if self.cfg.run.search == "centre_cutoff":
            Fi, Si = self._centre_pairs(p, valid, genes, contacts)
            F += Fi
        else:
            x = p[:, valid]                                            # [3, M], slot-major
            cell = np.broadcast_to(np.arange(p.shape[2]), valid.shape)[valid]
            i, j = self._pair_list(x, cell)
            Fi, Si_flat = self._inter_pairs(x, cell, i, j, genes, contacts)
            F[:, valid] += Fi
            Si = None
            if contacts:
                Si = np.zeros((4,) + valid.shape)
                Si[:, valid] = Si_flat
        F[2] += np.where(valid, membrane_force_z(p[2], etype, m.membrane, m.wall_stiffness), 0.0)
        return F, Si

    def _view(self):
        s = self.s
        C = s["n_cells"]
        S = int(s["count"][:C].max()) if C else 1
        valid = model.valid_mask(s["count"], C, S)
        return C, S, valid

    def forces(self) -> tuple[np.ndarray, np.ndarray]:
        s = self.s
        C, S, valid = self._view()
        F, Si = self._forces(s["pos"][:, :S, :C], s["etype"][:S, :C], valid, s["genes"][:, :C], True)
        E, cap = s["pos"].shape[1:]
        out_f = np.zeros((3, E, cap), np.float32)
        out_s = np.zeros((4, E, cap), np.float32)
        out_f[:, :S, :C] = F
        out_s[:, :S, :C] = Si
        return out_f, out_s

    # ---- the step -----------------------------------------------------------------------
    def _step(self) -> None:
        s, cfg = self.s, self.cfg
        dt, mode, box = cfg.run.dt, cfg.run.mode, box_of(cfg)
        C, S, valid = self._view()
        p = s["pos"][:, :S, :C]
        etype = s["etype"][:S, :C]
        genes = s["genes"][:, :C]
        with_genes = mode != "movement"
        if with_genes:
            A = model.adhesion(s["pos"], s["etype"], s["count"], C)
        F1, contacts = self._forces(p, etype, valid, genes, with_genes)
        half = p + 0.5 * dt * F1
        F2, _ = self._forces(half, etype, valid, genes, False)
        new = np.where(valid, p + dt * F2, 0.0)
        model.check_motion(p, new, valid, s["step"])
        if with_genes:
            means = model.contact_means(contacts, s["count"], C)
            g = model.gene_step(genes, means, A, cfg.genes, dt)
            if not np.isfinite(g).all():
                c = int(np.flatnonzero(~np.isfinite(g).all(axis=0))[0])
                raise model.BlownUpError(f"the gene network blew up at step {s['step']} in cell "
                                         f"{c}; lower run.dt or check the gene parameters")
            s["genes"][:, :C] = g.astype(np.float32)
        s["pos"][:, :S, :C] = model.wrap_float32(new, box)
        s["step"] += 1

    def advance(self, nsteps: int) -> None:
        cfg = self.cfg
        for _ in range(int(nsteps)):
            self._step()
            if cfg.run.mode == "full" and self.s["step"] % cfg.growth.interval == 0:
                self._growth_event()

    def _growth_event(self) -> None:
        s = self.s
        s["event"] += 1
        self._version += 1
        model.grow(s, self.cfg, s["event"])
        parents = np.flatnonzero(s["count"][:s["n_cells"]] >= self.cfg.tissue.max_elements)
        self.divide(parents)

    def element_counts(self) -> np.ndarray:
        return self.s["count"][:self.s["n_cells"]].copy()

    def divide(self, parents: np.ndarray) -> None:
        self._version += 1
        model.divide_cells(self.s, self.cfg, np.asarray(parents, np.int64))
        self.s["n_cells"] = int(self.s["n_cells"])

    # ---- copies for frames --------------------------------------------------------------
    def cells(self) -> tuple[np.ndarray, np.ndarray]:
        s = self.s
        C = s["n_cells"]
        ctr = model.centroids(s["pos"], s["count"], C, box_of(self.cfg))
        return ctr.astype(np.float32), s["genes"][:, :C].astype(np.float32)

    def elements(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        p, cell, et, _ = model.live_elements(self.s)
        return p.astype(np.float32), cell.astype(np.int32), et.astype(np.int8)

