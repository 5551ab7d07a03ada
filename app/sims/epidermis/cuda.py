"""The CUDA epidermis engine: every step on the device (``kernels/epidermis.cu``).

State lives on the device in the canonical layout of ``model`` (structure of arrays, cell index
contiguous: ``pos[3][E][cap]``, ``etype[E][cap]``, ``count[cap]``, ``genes[6][cap]``), float32.

One step (engine.py's order), all launches queued on one stream without host synchronisation:

- stage 1 at X: [centres and A (modes genes, full)] + a force evaluation, which writes the
  midpoint X½ = X + dt/2·F(X) and the per-element contact sums;
- stage 2 at X½: a force evaluation, which writes X + dt·F(X½), wrapped, and flags any element
  that moved more than ``model.MAX_STEP_MOVE``;
- modes genes, full: the gene network (midpoint RK2, means and A held), one thread per cell.

A force evaluation with the cell list is six launches (intracellular + membrane + hash and
histogram, scan, scatter, per-bin sort, pair list, intercellular + stage update). The
intercellular pairs come from a Verlet list, the CPU engines' rule (``model.SKIN``): built from
a grid of bins at least ``inter_cutoff + SKIN`` wide, kept while no element has moved ``SKIN/2``
since. The update of each evaluation tests the drift and sets a device word; the next
evaluation's hash, scan, scatter, sort and list build return at once when it is clear, so the
host never waits on the decision and a captured graph holds every launch. Each evaluation reads
the positions in sorted order from one of two buffers and its update writes the other (stage 1
reads buffer 0, stage 2 buffer 1). With the centre cutoff an evaluation is four launches
(centres, neighbour cells, intracellular, intercellular). Runs of ``GRAPH_STEPS`` steps are
replayed from a captured CUDA graph (``app.compute.graphs.RepeatedPlan``: one call instead of a
dozen launches a step from Python), the rest launched one by one; the kernels and their
arguments are the same either way. The grid is placed from a device bounding box read once per
``advance`` call and after every growth event (x and y periodic: the box divided evenly;
otherwise clamped, which keeps every pair within the cutoff in neighbouring bins however far
elements drift); each placement also requests a pair-list build.

Mode 'full': after every ``growth.interval``-th step the host reads the status words (a blow-up
stops the run before growth acts on it), the growth kernel runs, the host reads the element
counts, and the division kernel (one warp per parent) splits the cells that reached
``max_elements``; the grid is then placed again (one more bounding-box read). The capacity
doubles by reallocation when the new cells would not fit. Positions come back only for
``forces``, ``cells``, ``elements`` and ``state``.
"""

from __future__ import annotations

import math

import numpy as np

from app.compute.graphs import RepeatedPlan
from app.compute.kernels import load_module, read_kernel
from app.compute.launch import PackedLaunch
from app.sims.epidermis import config, model
from app.sims.epidermis.config import EpidermisConfig
from app.sims.epidermis.engine import EpidermisEngine

ROWS = 32                # element rows per block of the per-cell kernels (block 32 x ROWS):
                         # one element a thread for cells of up to 32 elements
BLOCK = 128              # 1-D kernels
SCAN_T, SCAN_I = 1024, 4
SCAN_B = SCAN_T * SCAN_I
MAXNB = 128              # neighbour cells per cell in the centre-cutoff search
DIV_BLOCK = 128          # epi_divide: four warps (four parents) per block
GRID_SLACK = 1.0 + 1e-4  # grid cells a little wider than the list radius (rounding at bin edges)
DRIFT_ROUNDING = 1e-3    # µm the drift test gives up for float32 rounding of the positions
GRAPH_STEPS = 32         # steps per captured graph
INT_MAX, INT_MIN = 2**31 - 1, -2**31

# PyCUDA argument formats of the kernels (checked against the .cu signatures by a CPU test)
FORMATS = {
    "epi_centres": "iiPPPPP",
    "epi_bbox": "iiPPP",
    "epi_scan": "iPPPPP",
    "epi_scatter": "ii" + "P" * 9,
    "epi_binsort": "i" + "P" * 7,
    "epi_intra": "iiPPPP" + "ffffff" + "iii" + "PPPP",
    "epi_verlet": "i" + "ffffff" + "iii" + "P" * 8,
    "epi_inter_cl": "iii" + "ffffff" + "iii" + "P" * 16,
    "epi_neighbours": "iiPPPP",
    "epi_inter_cc": "iii" + "P" * 10,
    "epi_genes": "iiPPPPP",
    "epi_jitter": "iPQQQdP",
    "epi_grow": "iiPPPPdQQQd",
    "epi_divide": "iPiiPPPPQQQdid",
    "epi_copy_rows32": "iiiPP",
    "epi_copy_rows8": "iiiPP",
}


def kernel_source() -> str:
    return read_kernel("epidermis.cu")


def kernel_defines(cfg: EpidermisConfig) -> dict[str, int]:
    """The -D defines of a config: max elements, boundary, mode (the gene network on or off;
    modes 'genes' and 'full' share their kernels, growth is driven from the host), search."""
    return {"EPI_E": cfg.tissue.max_elements,
            "EPI_PERIODIC": int(cfg.tissue.boundary == "periodic"),
            "EPI_GENES": int(cfg.run.mode != "movement"),
            "EPI_SEARCH": int(cfg.run.search == "centre_cutoff"),
            "EPI_MAXNB": MAXNB, "EPI_ROWS": ROWS, "EPI_LIST": config.DEVICE_LIST_CAP}


def float_params(cfg: EpidermisConfig) -> np.ndarray:
    """``c_f`` of the kernel (float32[24]); the order of its P_* macros."""
    m = cfg.mechanics
    box = model.box_of(cfg) or 0.0

    def morse(p):
        return [p.U0 / p.xi1, 1.0 / p.xi1, p.V0 / p.xi2, 1.0 / p.xi2]

    v = [*morse(m.intra), *morse(m.inter), *morse(m.membrane), m.inter_cutoff,
         m.wall_stiffness, box, 1.0 / box if box else 0.0, m.centre_cutoff ** 2, cfg.run.dt,
         model.MAX_STEP_MOVE ** 2, model.R_MIN, (m.inter_cutoff + model.SKIN) ** 2,
         (0.5 * model.SKIN - DRIFT_ROUNDING) ** 2]
    out = np.zeros(24, np.float32)
    out[:len(v)] = v
    return out


def gene_params(cfg: EpidermisConfig) -> np.ndarray:
    """``c_g`` of the kernel (float64[48]): rates, G, dt, L, one unused word, then from index 12
    the Hill factors (a, b, c, h) in the order of ``model.HILLS``."""
    g = cfg.genes
    v = [g.k_a, g.k_d, g.d_N, g.d_D, g.d_B, g.d_O2, g.d_O1, g.d_M, g.G, cfg.run.dt,
         model.box_of(cfg) or 0.0, 0.0]
    for name in model.HILLS:
        h = getattr(g, name)
        v += [h.a, h.b, h.c, h.h]
    out = np.zeros(48, np.float64)
    out[:len(v)] = v
    return out


def decode_bbox(words: np.ndarray) -> np.ndarray:
    """The order-preserving int32 codes of epi_bbox back to float32 (min x, y, z, max x, y, z)."""
    w = np.asarray(words, np.int32)
    bits = np.where(w >= 0, w, w ^ np.int32(0x7FFFFFFF)).astype(np.int32)
    return bits.view(np.float32).astype(np.float64)


def grid_layout(cfg: EpidermisConfig, lo: np.ndarray, hi: np.ndarray, max_bins: int) -> dict:
    """The uniform grid for elements inside [lo, hi] (x, y, z): bins at least the pair list's
    radius (``inter_cutoff + model.SKIN``) wide, at most ``max_bins`` in all. x and y periodic:
    L/n wide; otherwise clamped at the edges."""
    cut = (cfg.mechanics.inter_cutoff + model.SKIN) * GRID_SLACK
    box = model.box_of(cfg)
    scale = 1.0
    while True:
        w = cut * scale
        g = {}
        for a, name in enumerate("xyz"):
            if box and a < 2:
                n = max(1, int(math.floor(box / w)))
                g["o" + name], g["iw" + name], g["n" + name] = 0.0, n / box, n
            else:       # tight around the elements (+1 bin above for growth in z); elements
                        # that drift out during a slice fall into the edge bins (clamped)
                extent = max(0.0, float(hi[a] - lo[a]))
                n = max(1, int(math.ceil(extent / w)) + (1 if a == 2 else 0))
                g["o" + name], g["iw" + name], g["n" + name] = float(lo[a]), 1.0 / w, n
        total = g["nx"] * g["ny"] * g["nz"]
        if total <= max_bins:
            g["bins"] = total
            return g
        scale *= max(1.01, 1.01 * (total / max_bins) ** (1.0 / 3.0))


class CudaEngine(EpidermisEngine):
    """See the module docstring. Create, use and close it in the thread that holds the context
    (``app.compute.device.backend_context``)."""

    def __init__(self, cfg: EpidermisConfig, state: dict):
        import pycuda.driver as cuda
        import pycuda.gpuarray as ga

        self.cuda, self.ga = cuda, ga
        self.cfg = cfg
        self.E = cfg.tissue.max_elements
        self.with_genes = cfg.run.mode != "movement"
        self.centre_search = cfg.run.search == "centre_cutoff"
        self.module = load_module(kernel_source(), "epidermis.cu", kernel_defines(cfg))
        self.fn = {}
        for name, fmt in FORMATS.items():
            f = self.module.get_function(name)
            f.prepare(fmt)
            self.fn[name] = f
        self.stream = cuda.Stream()
        self.repeat = RepeatedPlan(self.stream, GRAPH_STEPS)
        self._f, self._g = float_params(cfg), gene_params(cfg)
        self.cap = 0
        self.buf: dict = {}
        self.grid_buf: dict = {}
        self.grid = None
        self.plan = None
        self.launches_per_step = 0
        self.max_neighbours = 0
        self.step = 0
        self.event = 0
        self.n_cells = 0
        self.restore(state)

    # ---- device memory ------------------------------------------------------------------
    def _constants(self) -> None:
        """Upload this engine's parameters unless the (shared, per-thread cached) module
        already holds them."""
        if getattr(self.module, "_epi_owner", None) is self:
            return
        for name, values in (("c_f", self._f), ("c_g", self._g)):
            ptr, _ = self.module.get_global(name)
            self.cuda.memcpy_htod(ptr, values)
        self.module._epi_owner = self

    def _alloc(self, cap: int) -> None:
        """Scratch buffers for ``cap`` cells (the state buffers are handled by the callers)."""
        ga, E = self.ga, self.E
        for key in ("xh", "fi", "fout", "contact", "cen", "A", "bin", "rank", "spos", "sidx",
                    "sref", "nl", "nn", "nbr", "nnb", "parents"):
            old = self.buf.pop(key, None)
            if old is not None:
                old.gpudata.free()
        b = self.buf
        b["xh"] = ga.empty(3 * E * cap, np.float32)
        b["fi"] = ga.empty(3 * E * cap, np.float32)
        b["fout"] = ga.zeros(3 * E * cap, np.float32)
        b["contact"] = ga.zeros(4 * E * cap, np.float32)
        b["cen"] = ga.zeros(3 * cap, np.float32)
        b["A"] = ga.zeros(cap, np.float64)
        b["parents"] = ga.zeros(cap, np.int32)
        if self.centre_search:
            b["nbr"] = ga.zeros(MAXNB * cap, np.int32)
            b["nnb"] = ga.zeros(cap, np.int32)
        else:
            b["bin"] = ga.empty(E * cap, np.int32)
            b["rank"] = ga.empty(E * cap, np.int32)
            b["spos"] = ga.zeros(2 * 4 * E * cap, np.float32)      # two sorted buffers
            b["sref"] = ga.zeros(4 * E * cap, np.float32)
            b["sidx"] = ga.zeros(E * cap, np.int32)
            b["nl"] = ga.zeros(config.DEVICE_LIST_CAP * E * cap, np.int32)
            b["nn"] = ga.zeros(E * cap, np.int32)
        if "status" not in b:
            b["status"] = self.ga.to_gpu(np.array([0, INT_MAX, INT_MAX, 0], np.int32))
            b["bbox"] = self.ga.to_gpu(np.array([INT_MAX] * 3 + [INT_MIN] * 3, np.int32))
            # rebuild words of the two evaluations of a step, then the count of list builds
            b["verlet"] = self.ga.to_gpu(np.array([1, 1, 0, 0], np.int32))
        self.cap = cap

    def _grid_buffers(self, bins: int) -> None:
        have = self.grid_buf.get("bins", 0)
        if bins <= have:
            return
        for key in ("hist", "start", "range", "bsum", "ticket"):
            old = self.grid_buf.pop(key, None)
            if old is not None:
                old.gpudata.free()
        size = max(bins, int(have * 1.5), SCAN_B)
        size = -(-size // SCAN_B) * SCAN_B
        ga = self.ga
        self.grid_buf.update(hist=ga.zeros(size, np.int32), start=ga.zeros(size, np.int32),
                             range=ga.zeros(2 * size, np.int32),
                             bsum=ga.zeros(size // SCAN_B + 1, np.int32),
                             ticket=ga.zeros(1, np.uint32), bins=size)

    def _grow_capacity(self, need: int) -> None:
        """Double the cell capacity until ``need`` cells fit; the state is copied on the device."""
        old_cap, new_cap = self.cap, self.cap
        while new_cap < need:
            new_cap *= 2
        if new_cap == old_cap:
            return
        E, ga, b = self.E, self.ga, self.buf
        self.stream.synchronize()
        for key, rows, dtype in (("pos", 3 * E, np.float32), ("etype", E, np.int8),
                                 ("count", 1, np.int32), ("genes", 6, np.float32)):
            new = ga.zeros(rows * new_cap, dtype)
            name = "epi_copy_rows8" if dtype == np.int8 else "epi_copy_rows32"
            self.fn[name].prepared_async_call(
                ((old_cap + BLOCK - 1) // BLOCK, rows), (BLOCK, 1, 1), self.stream,
                np.int32(rows), np.int32(old_cap), np.int32(new_cap), b[key].gpudata, new.gpudata)
            self.stream.synchronize()
            b[key].gpudata.free()
            b[key] = new
        self._alloc(new_cap)
        self.plan = None

    # ---- state --------------------------------------------------------------------------
    def restore(self, state: dict) -> None:
        E = self.E
        pos = np.asarray(state["pos"], np.float32)
        if pos.ndim != 3 or pos.shape[0] != 3 or pos.shape[1] != E:
            raise ValueError(f"the state has {pos.shape[1] if pos.ndim == 3 else '?'} element "
                             f"slots per cell; the config's max_elements is {E}")
        cap = pos.shape[2]
        if self.buf:
            self.stream.synchronize()
        for key in ("pos", "etype", "count", "genes"):
            old = self.buf.pop(key, None)
            if old is not None:
                old.gpudata.free()
        if cap != self.cap:
            self._alloc(cap)
        ga = self.ga
        self.buf["pos"] = ga.to_gpu(np.ascontiguousarray(pos).ravel())
        self.buf["etype"] = ga.to_gpu(np.ascontiguousarray(state["etype"], np.int8).ravel())
        self.buf["count"] = ga.to_gpu(np.ascontiguousarray(state["count"], np.int32).ravel())
        self.buf["genes"] = ga.to_gpu(np.ascontiguousarray(state["genes"], np.float32).ravel())
        if self.buf["count"].size != cap or self.buf["genes"].size != 6 * cap:
            raise ValueError("the state's arrays disagree on the capacity")
        self.step = int(state["step"])
        self.event = int(state["event"])
        self.n_cells = int(state["n_cells"])
        self.plan = None

    def state(self) -> dict:
        self.stream.synchronize()
        E, cap, b = self.E, self.cap, self.buf
        return {"step": np.int64(self.step), "event": np.int64(self.event),
                "n_cells": np.int64(self.n_cells),
                "pos": b["pos"].get().reshape(3, E, cap), "etype": b["etype"].get().reshape(E, cap),
                "count": b["count"].get(), "genes": b["genes"].get().reshape(6, cap)}

    @property
    def capacity(self) -> int:
        return self.cap

    # ---- the plan of launches -----------------------------------------------------------
    def _place_grid(self) -> None:
        """Bounding box of the live elements (one small read), then the grid."""
        b, n = self.buf, self.n_cells
        b["bbox"].set(np.array([INT_MAX] * 3 + [INT_MIN] * 3, np.int32))
        if n:
            self.fn["epi_bbox"].prepared_async_call(
                ((n + 31) // 32, (self.E + ROWS - 1) // ROWS), (32, ROWS, 1), self.stream,
                np.int32(n), np.int32(self.cap), b["pos"].gpudata, b["count"].gpudata,
                b["bbox"].gpudata)
        self.stream.synchronize()
        words = b["bbox"].get()
        if words[0] == INT_MAX:                      # no live element
            lo = hi = np.zeros(3)
        else:
            v = decode_bbox(words)
            lo, hi = v[:3], v[3:]
        max_bins = max(2 * self.E * self.cap, 1 << 16)
        self.grid = grid_layout(self.cfg, lo, hi, max_bins)
        self._grid_buffers(self.grid["bins"])

    def _launch(self, name: str, grid, block, args: list) -> PackedLaunch:
        return PackedLaunch(self.fn[name], FORMATS[name], grid, block, self.stream, args, name=name)

    def _evaluation(self, src, stage: int, out) -> list[PackedLaunch]:
        """The launches of one force evaluation at positions ``src``; stage 0 writes F to
        ``out``, 1 the midpoint to ``out``, 2 the new positions into pos."""
        b = self.buf
        n, cap, E = self.n_cells, self.cap, self.E
        i32 = np.int32
        soa = ((n + 31) // 32, (E + ROWS - 1) // ROWS)
        blk2 = (32, ROWS, 1)
        cells1 = ((n + BLOCK - 1) // BLOCK, 1)
        blk1 = (BLOCK, 1, 1)
        L = []
        A = b["A"].gpudata if (stage == 1 and self.with_genes) else 0
        if self.centre_search or A:
            L.append(self._launch("epi_centres", cells1, blk1,
                                  [i32(n), i32(cap), src.gpudata, b["etype"].gpudata,
                                   b["count"].gpudata, b["cen"].gpudata, A]))
        intra = [i32(n), i32(cap), src.gpudata, b["etype"].gpudata, b["count"].gpudata,
                 b["fi"].gpudata]
        tail = [b["fi"].gpudata, b["genes"].gpudata, b["pos"].gpudata, out.gpudata,
                b["contact"].gpudata, b["status"].gpudata]
        if self.centre_search:
            L.append(self._launch("epi_neighbours", ((n + 255) // 256, 1), (256, 1, 1),
                                  [i32(n), i32(cap), b["cen"].gpudata, b["nbr"].gpudata,
                                   b["nnb"].gpudata, b["status"].gpudata]))
            no_grid = [np.float32(0)] * 6 + [i32(1)] * 3 + [0, 0, 0, 0]
            L.append(self._launch("epi_intra", ((n + 31) // 32, 1), blk2, intra + no_grid))
            L.append(self._launch("epi_inter_cc", soa, blk2,
                                  [i32(stage), i32(n), i32(cap), src.gpudata, b["count"].gpudata,
                                   b["nbr"].gpudata, b["nnb"].gpudata, *tail]))
            return L
        g, gb = self.grid, self.grid_buf
        geo = [np.float32(g["ox"]), np.float32(g["oy"]), np.float32(g["oz"]),
               np.float32(g["iwx"]), np.float32(g["iwy"]), np.float32(g["iwz"]),
               i32(g["nx"]), i32(g["ny"]), i32(g["nz"])]
        bins = g["bins"]
        nblocks = (bins + SCAN_B - 1) // SCAN_B
        total = int(gb["bsum"].gpudata) + 4 * nblocks
        # stage 1 (and 0) reads sorted buffer 0 and rebuild word 0, stage 2 buffer and word 1;
        # stages 1 and 2 write the other buffer and word for the next evaluation
        side = 1 if stage == 2 else 0
        sorted_bytes = 16 * E * cap
        spos = int(b["spos"].gpudata) + side * sorted_bytes
        snext = int(b["spos"].gpudata) + (1 - side) * sorted_bytes
        word = int(b["verlet"].gpudata)
        rebuild = word + 4 * side
        rebuild_next = word + 4 * (1 - side) if stage else rebuild     # stage 0 sets none
        stride = i32(E * cap)
        elements = ((E * n + 127) // 128, 1)
        L.append(self._launch("epi_intra", ((n + 31) // 32, 1), blk2,
                              intra + geo + [gb["hist"].gpudata, b["bin"].gpudata,
                                             b["rank"].gpudata, rebuild]))
        L.append(self._launch("epi_scan", (nblocks, 1), (SCAN_T, 1, 1),
                              [i32(bins), gb["hist"].gpudata, gb["start"].gpudata,
                               gb["bsum"].gpudata, gb["ticket"].gpudata, rebuild]))
        L.append(self._launch("epi_scatter", soa, blk2,
                              [i32(n), i32(cap), src.gpudata, b["count"].gpudata, b["bin"].gpudata,
                               b["rank"].gpudata, gb["start"].gpudata, gb["bsum"].gpudata,
                               spos, b["sidx"].gpudata, rebuild]))
        L.append(self._launch("epi_binsort", ((bins + BLOCK - 1) // BLOCK, 1), blk1,
                              [i32(bins), gb["hist"].gpudata, gb["start"].gpudata,
                               gb["bsum"].gpudata, spos, b["sidx"].gpudata,
                               gb["range"].gpudata, rebuild]))
        L.append(self._launch("epi_verlet", elements, (128, 1, 1),
                              [stride, *geo, spos, b["sref"].gpudata, gb["range"].gpudata, total,
                               b["nl"].gpudata, b["nn"].gpudata, rebuild, word + 8]))
        L.append(self._launch("epi_inter_cl", elements, (128, 1, 1),
                              [i32(stage), i32(cap), stride, *geo, spos, snext,
                               b["sref"].gpudata, b["sidx"].gpudata, b["nl"].gpudata,
                               b["nn"].gpudata, gb["range"].gpudata, total, rebuild,
                               rebuild_next, *tail]))
        return L

    def _request_rebuild(self) -> None:
        """Both evaluations of the next step build the pair list (positions, cells or grid
        changed on the host's side)."""
        self.cuda.memcpy_htod(self.buf["verlet"].gpudata, np.array([1, 1], np.int32))

    def _prepare(self) -> None:
        """Constants, grid and the launches of a step for the current cells (one sync)."""
        self._constants()
        self.buf["status"].set(np.array([0, INT_MAX, INT_MAX, 0], np.int32))
        if not self.centre_search:
            self._place_grid()
            self._request_rebuild()
        b = self.buf
        step = self._evaluation(b["pos"], 1, b["xh"]) + self._evaluation(b["xh"], 2, b["pos"])
        if self.with_genes:
            n = self.n_cells
            step.append(self._launch("epi_genes", ((n + BLOCK - 1) // BLOCK, 1), (BLOCK, 1, 1),
                                     [np.int32(n), np.int32(self.cap), b["count"].gpudata,
                                      b["contact"].gpudata, b["A"].gpudata, b["genes"].gpudata,
                                      b["status"].gpudata]))
        self.plan = step
        self.launches_per_step = len(step)

    def _check_status(self, first_step: int) -> None:
        self.stream.synchronize()
        st = self.buf["status"].get()
        self.max_neighbours = max(self.max_neighbours, int(st[3]))
        if st[0] == 0:
            return
        self.buf["status"].set(np.array([0, INT_MAX, INT_MAX, 0], np.int32))
        if st[0] & 4:
            raise RuntimeError(f"a cell has more than {MAXNB} neighbour cells within centre_cutoff "
                               f"({st[3]}); lower mechanics.centre_cutoff or use the cell list")
        if st[0] & 1:
            k, c = divmod(int(st[1]), self.cap)
            raise model.BlownUpError(
                f"the tissue blew up between steps {first_step} and {self.step}: element {k} of "
                f"cell {c} moved more than {model.MAX_STEP_MOVE:g} µm in one step or is not "
                "finite; lower run.dt or check the mechanics parameters")
        raise model.BlownUpError(
            f"the gene network blew up between steps {first_step} and {self.step} in cell "
            f"{int(st[2])}; lower run.dt or check the gene parameters")

    # ---- stepping -----------------------------------------------------------------------
    def advance(self, nsteps: int) -> None:
        nsteps = int(nsteps)
        if nsteps <= 0:
            return
        cfg = self.cfg
        full, interval = cfg.run.mode == "full", cfg.growth.interval
        first = self.step
        self._prepare()
        done = 0
        while done < nsteps:
            chunk = nsteps - done
            if full:
                chunk = min(chunk, interval - self.step % interval)
            if self.n_cells:
                self.repeat.run(self.plan, chunk)
            self.step += chunk
            done += chunk
            if full and self.step % interval == 0:
                self._check_status(first)
                self._growth_event()
                if done < nsteps:
                    self._prepare()
        self._check_status(first)

    def _growth_event(self) -> None:
        self.event += 1
        self.grow(self.event)
        parents = np.flatnonzero(self.element_counts() >= self.E)
        self.divide(parents)

    def grow(self, event: int) -> None:
        """The growth phase of growth event ``event`` (model.grow), queued on the stream."""
        cfg, b, n = self.cfg, self.buf, self.n_cells
        if not n:
            return
        self._constants()
        self.fn["epi_grow"].prepared_async_call(
            ((n + BLOCK - 1) // BLOCK, 1), (BLOCK, 1, 1), self.stream,
            np.int32(n), np.int32(self.cap), b["pos"].gpudata, b["etype"].gpudata,
            b["count"].gpudata, b["genes"].gpudata, np.float64(cfg.growth.delta_low),
            np.uint64(cfg.tissue.seed), np.uint64(model.STREAM_GROWTH), np.uint64(event),
            np.float64(cfg.growth.jitter))
        self.plan = None

    def element_counts(self) -> np.ndarray:
        self.stream.synchronize()
        if self.n_cells == 0:
            return np.zeros(0, np.int32)
        out = np.empty(self.n_cells, np.int32)
        self.cuda.memcpy_dtoh(out, self.buf["count"].gpudata)
        return out

    def divide(self, parents: np.ndarray) -> None:
        parents = np.asarray(parents, np.int64).ravel()
        if parents.size == 0:
            return
        cfg = self.cfg
        n = self.n_cells
        if n + parents.size > self.cap:
            self._grow_capacity(n + parents.size)
        self._constants()
        b = self.buf
        self.stream.synchronize()
        self.cuda.memcpy_htod(b["parents"].gpudata, parents.astype(np.int32))
        warps = parents.size
        self.fn["epi_divide"].prepared_async_call(
            ((warps * 32 + DIV_BLOCK - 1) // DIV_BLOCK, 1), (DIV_BLOCK, 1, 1), self.stream,
            np.int32(warps), b["parents"].gpudata, np.int32(n), np.int32(self.cap),
            b["pos"].gpudata, b["etype"].gpudata, b["count"].gpudata, b["genes"].gpudata,
            np.uint64(cfg.tissue.seed), np.uint64(model.STREAM_DIVISION), np.uint64(self.event),
            np.float64(cfg.growth.division_noise), np.int32(cfg.growth.division_axis == "vertical"),
            np.float64(cfg.mechanics.c1_height))
        self.n_cells = n + parents.size
        self.plan = None

    # ---- copies ---------------------------------------------------------------------------
    def forces(self) -> tuple[np.ndarray, np.ndarray]:
        b = self.buf
        self._prepare()
        b["fout"].fill(0)
        b["contact"].fill(0)
        if self.n_cells:
            for launch in self._evaluation(b["pos"], 0, b["fout"]):
                launch()
        self._check_status(self.step)
        E, cap = self.E, self.cap
        return b["fout"].get().reshape(3, E, cap), b["contact"].get().reshape(4, E, cap)

    def cells(self) -> tuple[np.ndarray, np.ndarray]:
        b, n, cap = self.buf, self.n_cells, self.cap
        self._constants()
        if n:
            self.fn["epi_centres"].prepared_async_call(
                ((n + BLOCK - 1) // BLOCK, 1), (BLOCK, 1, 1), self.stream, np.int32(n),
                np.int32(cap), b["pos"].gpudata, b["etype"].gpudata, b["count"].gpudata,
                b["cen"].gpudata, 0)
        self.stream.synchronize()
        cen = b["cen"].get().reshape(3, cap)[:, :n].copy()
        genes = b["genes"].get().reshape(6, cap)[:, :n].copy()
        return cen, genes

    def elements(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        p, cell, et, _ = model.live_elements(self.state())
        return p.astype(np.float32), cell.astype(np.int32), np.asarray(et, np.int8)

    def jitter(self, cells: np.ndarray, event: int) -> np.ndarray:
        """The growth offsets (3, n) float64 the device draws for ``cells`` at ``event`` (tests)."""
        cells = np.asarray(cells, np.int32)
        out = self.ga.zeros(3 * max(cells.size, 1), np.float64)
        dev = self.ga.to_gpu(cells if cells.size else np.zeros(1, np.int32))
        self.fn["epi_jitter"].prepared_async_call(
            ((cells.size + BLOCK - 1) // BLOCK or 1, 1), (BLOCK, 1, 1), self.stream,
            np.int32(cells.size), dev.gpudata, np.uint64(self.cfg.tissue.seed),
            np.uint64(model.STREAM_GROWTH), np.uint64(event), np.float64(self.cfg.growth.jitter),
            out.gpudata)
        self.stream.synchronize()
        res = out.get()[:3 * cells.size].reshape(3, cells.size)
        out.gpudata.free()
        dev.gpudata.free()
        return res

    def pair_list(self) -> tuple[int, np.ndarray]:
        """(builds of the pair list so far, entries of each sorted element's list now; -1: more
        than ``config.DEVICE_LIST_CAP``, the element scans the bins)."""
        self.stream.synchronize()
        if self.centre_search or "verlet" not in self.buf:
            return 0, np.zeros(0, np.int32)
        nblocks = (self.grid["bins"] + SCAN_B - 1) // SCAN_B if self.grid else 0
        total = int(self.grid_buf["bsum"].get()[nblocks]) if self.grid else 0
        return int(self.buf["verlet"].get()[2]), self.buf["nn"].get()[:total]

    def summary(self) -> dict:
        g = self.grid or {}
        return {"launches_per_step": self.launches_per_step, "graph_replays": self.repeat.replays,
                "capacity": self.cap,
                "grid": [g.get("nx"), g.get("ny"), g.get("nz")] if g else None,
                "max_neighbour_cells": self.max_neighbours}

    def close(self) -> None:
        if not self.buf:
            return
        self.stream.synchronize()
        self.repeat.close()
        for d in (self.buf, self.grid_buf):
            for key, arr in list(d.items()):
                if hasattr(arr, "gpudata"):
                    arr.gpudata.free()
            d.clear()
        if getattr(self.module, "_epi_owner", None) is self:
            self.module._epi_owner = None
