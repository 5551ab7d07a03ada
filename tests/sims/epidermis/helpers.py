"""Small tissues for the epidermis tests."""

from __future__ import annotations

import dataclasses

import numpy as np

from app.sims.epidermis import model
from app.sims.epidermis.config import EpidermisConfig


def config(**sections) -> EpidermisConfig:
    """The default config with sections replaced by keyword dicts, e.g. tissue={'cells': 4}."""
    cfg = EpidermisConfig()
    for name, values in sections.items():
        cfg = dataclasses.replace(cfg, **{name: dataclasses.replace(getattr(cfg, name), **values)})
    return cfg


def random_state(cfg: EpidermisConfig, rng: np.random.Generator, per_cell: int = 8,
                 spread: float = 2.5) -> dict:
    """Cells of ``per_cell`` elements scattered around the initial centres (overlapping
    neighbours, some elements below the membrane, random C1 types and genes): many pairs at
    every distance, inside and across the periodic edges."""
    t = cfg.tissue
    st = model.place_cells(cfg)
    ctr = model.centroids(st["pos"], st["count"], t.cells, model.box_of(cfg))
    p = ctr[:, None, :] + rng.normal(0.0, spread, (3, per_cell, t.cells))
    p[2] = np.abs(p[2] - ctr[2][None, :] + 2.0) - 0.3       # a few just below z = 0
    box = model.box_of(cfg)
    p[0], p[1] = model.wrap(p[0], box), model.wrap(p[1], box)
    st["pos"][:] = 0
    st["pos"][:, :per_cell, :t.cells] = p.astype(np.float32)
    st["count"][:t.cells] = per_cell
    st["etype"][:] = 0
    st["etype"][:per_cell, :t.cells] = (rng.random((per_cell, t.cells)) < 0.4).astype(np.int8)
    st["genes"][:, :t.cells] = rng.random((6, t.cells)).astype(np.float32)
    return st


def clone(state: dict) -> dict:
    return {k: np.array(v) for k, v in state.items()}


def term_scale(state, cfg) -> np.ndarray:
    """S_i = sum over j of |f_ij d_ij| (intra and inter terms) + |membrane_i|, [E, cap]."""
    m = cfg.mechanics
    p, cell, et, kc = model.live_elements(state)
    box = model.box_of(cfg)
    d = p[:, None, :] - p[None, :, :]
    d[..., 0] = model.minimum_image(d[..., 0], box)
    d[..., 1] = model.minimum_image(d[..., 1], box)
    r = np.sqrt((d * d).sum(axis=-1))
    np.fill_diagonal(r, np.inf)
    same = cell[:, None] == cell[None, :]
    rs = np.maximum(r, model.R_MIN)
    f = np.where(same & np.isfinite(r), np.abs(model.morse_force_over_r(rs, m.intra)), 0.0)
    f += np.where(~same & (r < m.inter_cutoff),
                  np.abs(model.inter_force_over_r(rs, m.inter, m.inter_cutoff)), 0.0)
    s = (f * np.sqrt((d * d).sum(axis=-1))).sum(axis=1)
    s += np.abs(model.membrane_force_z(p[:, 2], et, m.membrane, m.wall_stiffness))
    out = np.zeros(state["pos"].shape[1:])
    out[kc[0], kc[1]] = s
    return out, r, same
