"""The CPU engine: one step against the float64 references, pair-list reuse, modes, blow-ups."""

import numpy as np
import pytest

from app.sims.epidermis import model
from app.sims.epidermis.cpu import CpuEngine

from .helpers import clone, config, random_state


def manual_step(st, cfg):
    """engine.py's order of operations with reference_forces (float64)."""
    dt, n, box = cfg.run.dt, int(st["n_cells"]), model.box_of(cfg)
    valid = model.valid_mask(st["count"], n, st["pos"].shape[1])
    pos = np.asarray(st["pos"], np.float64)
    A = model.adhesion(pos, st["etype"], st["count"], n)
    F1, S1 = model.reference_forces(st, cfg)
    half = clone(st)
    half["pos"] = pos + 0.5 * dt * F1
    F2, _ = model.reference_forces(half, cfg)
    new = np.where(valid, (pos + dt * F2)[:, :, :n], 0.0)
    new[0], new[1] = model.wrap(new[0], box), model.wrap(new[1], box)
    means = model.contact_means(S1, st["count"], n)
    genes = model.gene_step(np.asarray(st["genes"], np.float64)[:, :n], means, A, cfg.genes, dt)
    return new, genes


@pytest.mark.parametrize("boundary,search", [("periodic", "cell_list"), ("none", "cell_list"),
                                             ("periodic", "centre_cutoff")])
def test_one_step_follows_the_contract(boundary, search):
    cfg = config(tissue={"cells": 16, "boundary": boundary, "pitch": 8.0},
                 run={"mode": "genes", "search": search})
    st = random_state(cfg, np.random.default_rng(11), per_cell=12, spread=1.8)
    new, genes = manual_step(st, cfg)
    eng = CpuEngine(cfg, st)
    eng.advance(1)
    out = eng.state()
    assert int(out["step"]) == 1 and out["pos"].dtype == np.float32
    d = out["pos"][:, :, :16] - new
    if boundary == "periodic":
        d[:2] = model.minimum_image(d[:2], cfg.box)
    assert np.abs(d).max() < 1e-5
    np.testing.assert_allclose(out["genes"][:, :16], genes, rtol=1e-6, atol=1e-7)
    assert not np.array_equal(out["genes"][:, :16], st["genes"][:, :16])
    # x and y wrapped into [0, L)
    if boundary == "periodic":
        x = out["pos"][:2, :12, :16]
        assert (x >= 0).all() and (x < cfg.box).all()


@pytest.mark.parametrize("boundary", ("periodic", "none"))
def test_movement_mode_leaves_the_genes_and_the_pair_list_stays_exact(boundary):
    """Scattered cells contract into bodies (elements move several µm), so the reused pair
    list must be rebuilt on the way; the forces stay those of a fresh all-pairs search."""
    cfg = config(tissue={"cells": 16, "pitch": 8.0, "boundary": boundary}, run={"mode": "movement"})
    st = random_state(cfg, np.random.default_rng(13), per_cell=12, spread=1.8)
    eng = CpuEngine(cfg, st)
    for _ in range(8):
        eng.advance(25)
        out = eng.state()
        F, S = eng.forces()
        F_ref, S_ref = model.reference_forces(out, cfg)
        np.testing.assert_allclose(F, F_ref, atol=1e-6 * max(1.0, np.abs(F_ref).max()), rtol=0)
        np.testing.assert_allclose(S, S_ref, atol=1e-6)
        assert S_ref[0].sum() > 0                    # the cells touch
    np.testing.assert_array_equal(out["genes"], st["genes"])
    moved = out["pos"][:, :12, :16] - st["pos"][:, :12, :16]
    moved[:2] = model.minimum_image(moved[:2], model.box_of(cfg))
    assert np.sqrt((moved ** 2).sum(0)).max() > 2.0


def test_the_step_is_split_anywhere():
    cfg = config(tissue={"cells": 4, "elements": 6, "max_elements": 8, "cell_radius": 2.5,
                         "pitch": 6.0}, genes={"initial": 0.2}, growth={"interval": 7},
                 run={"relax_steps": 10})
    st = model.initial_state(cfg)
    a, b = CpuEngine(cfg, st), CpuEngine(cfg, st)
    a.advance(45)
    for n in (1, 13, 6, 25):
        b.advance(n)
    sa, sb = a.state(), b.state()
    assert int(sa["n_cells"]) > 4                    # divisions happened on the way
    for key in sa:
        np.testing.assert_array_equal(sa[key], sb[key])


def test_a_blown_up_state_names_the_step_and_cell():
    cfg = config(tissue={"cells": 4, "pitch": 8.0}, run={"mode": "movement"},
                 mechanics={"intra": model.Morse(5e3, 1.0, 1.0, 2.0)})
    st = random_state(cfg, np.random.default_rng(12), per_cell=8, spread=1.0)
    eng = CpuEngine(cfg, st)
    with pytest.raises(model.BlownUpError, match=r"step 0: element \d+ of cell \d+ moved"):
        eng.advance(3)
