"""Epidermis exports: frames recorded during a run (NPZ), the history (CSV), the current
frame as a point cloud (PLY or VTK), and a movie of the 3D view (MP4 through imageio's
ffmpeg plugin). Every file is written atomically (a temporary file, then a rename)."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from app.gui import mesh_export
from app.gui.movie import MovieRecorder, movie_support  # noqa: F401  (the epidermis panel's import)
from app.sims.common.output import save_csv, save_npz

log = logging.getLogger(__name__)

HISTORY_KEYS = ("step", "t", "cells", "layers", "basal_fraction", "suprabasal_fraction", "elements")
GENE_NAMES = ("N", "D", "B", "O2", "O1", "M")          # the order of model.GENES
BINARY_ABOVE = 200_000       # elements: point clouds above this are written in binary encodings
RECORD_LIMIT_BYTES = 1 << 30


def frame_arrays(frame) -> dict[str, np.ndarray]:
    """The current frame under the keys ``python -m app run`` writes to results.npz, plus
    the colours, centres, states and the whole history (``history_<key>``)."""
    out = {"positions": frame.positions, "element_cell": frame.element_cell,
           "element_type": frame.element_type, "element_colour": frame.element_colour,
           "cell_state": frame.genes, "cell_centres": frame.centres, "cell_suprabasal": frame.suprabasal,
           "gene_names": np.array(GENE_NAMES), "step": frame.step, "t": frame.t, "box": frame.box,
           "layers": frame.layers}
    for key, values in (frame.history or {}).items():
        out[f"history_{key}"] = np.asarray(values)
    return {k: np.asarray(v) for k, v in out.items() if v is not None}


def write_history_csv(path: str | Path, frame) -> Path:
    h = frame.history or {}
    keys = [k for k in HISTORY_KEYS if k in h] + [k for k in h if k not in HISTORY_KEYS]
    if not keys:
        raise RuntimeError("no history yet")
    return save_csv(path, keys, [np.asarray(h[k], float) for k in keys])


def write_point_cloud(path: str | Path, frame, binary: bool | None = None) -> Path:
    """The frame's elements with their cell, type and colour code (and their cell's state:
    suprabasal 0/1) as PLY or VTK by the suffix; binary encodings above BINARY_ABOVE elements."""
    if frame is None or frame.positions is None:
        raise RuntimeError("nothing to export yet: run the simulation first")
    cell = np.asarray(frame.element_cell, np.int32)
    values = {"cell": cell, "type": np.asarray(frame.element_type, np.int32),
              "colour": np.asarray(frame.element_colour, np.int32)}
    if frame.suprabasal is not None and len(frame.suprabasal):
        values["suprabasal"] = np.asarray(frame.suprabasal, np.int32)[np.clip(cell, 0, len(frame.suprabasal) - 1)]
    if binary is None:
        binary = len(frame.positions) > BINARY_ABOVE
    title = f"BioGPU Studio epidermis, step {frame.step}, t = {frame.t:g}"
    writer = mesh_export.write_vtk if Path(path).suffix.lower() == ".vtk" else mesh_export.write_ply
    return writer(path, frame.positions, values, None, title, binary=binary)


class FrameRecorder:
    """Frames kept while a run records (positions, ids, types, colours, genes per frame),
    saved as one NPZ of concatenated arrays with offsets; stops at ``limit_bytes``."""

    def __init__(self, limit_bytes: int = RECORD_LIMIT_BYTES):
        self.limit_bytes = limit_bytes
        self.frames: list = []
        self.nbytes = 0
        self.full = False

    def __len__(self) -> int:
        return len(self.frames)

    def add(self, frame) -> bool:
        """Keep ``frame`` (frames are immutable: no copy); False once the limit is reached."""
        if frame.positions is None or (self.frames and self.frames[-1].step == frame.step):
            return False
        genes = frame.genes.nbytes if frame.genes is not None else 0
        size = frame.positions.nbytes + 6 * len(frame.positions) + genes
        if self.nbytes + size > self.limit_bytes:
            if not self.full:
                log.warning("epidermis: frame recording stopped at %d frames (%.0f MB)", len(self.frames),
                            self.nbytes / 1e6)
            self.full = True
            return False
        self.frames.append(frame)
        self.nbytes += size
        return True

    def clear(self) -> None:
        self.frames, self.nbytes, self.full = [], 0, False

    def arrays(self) -> dict[str, np.ndarray]:
        """``frames_*`` arrays: frame k's elements are rows ``frames_element_offsets[k]:[k+1]``
        of the element arrays, its cells rows ``frames_cell_offsets[k]:[k+1]``."""
        fs = self.frames
        if not fs:
            return {}

        def offsets(sizes):
            return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)

        def cat(name, dtype, shape=()):
            parts = [np.asarray(getattr(f, name)) if getattr(f, name) is not None else np.zeros((0, *shape), dtype)
                     for f in fs]
            return np.concatenate(parts).astype(dtype, copy=False)

        return {"frames_step": np.array([f.step for f in fs], np.int64),
                "frames_t": np.array([f.t for f in fs], float),
                "frames_cells": np.array([f.cells for f in fs], np.int64),
                "frames_layers": np.array([f.layers for f in fs], np.int64),
                "frames_element_offsets": offsets([len(f.positions) for f in fs]),
                "frames_cell_offsets": offsets([len(f.genes) if f.genes is not None else 0 for f in fs]),
                "frames_positions": cat("positions", np.float32, (3,)),
                "frames_element_cell": cat("element_cell", np.int32),
                "frames_element_type": cat("element_type", np.int8),
                "frames_element_colour": cat("element_colour", np.int8),
                "frames_genes": cat("genes", np.float32, (6,)),
                "frames_suprabasal": cat("suprabasal", bool)}


def write_frames_npz(path: str | Path, recorder: FrameRecorder, frame) -> Path:
    """The recorded frames (or, with none, the current frame as the only one), the current
    frame under the headless keys and the history."""
    if frame is None:
        raise RuntimeError("nothing to export yet: run the simulation first")
    arrays = frame_arrays(frame)
    if len(recorder):
        arrays.update(recorder.arrays())
    else:
        single = FrameRecorder(limit_bytes=1 << 62)
        single.add(frame)
        arrays.update(single.arrays())
    return save_npz(path, arrays)
