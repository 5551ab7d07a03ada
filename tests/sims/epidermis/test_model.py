"""The epidermis mathematics: forces, searches, periodic images, relaxation, growth, division,
capacity, the gene network, the initial tissue and config errors."""

import numpy as np
import pytest

from app.sims.common.config import ConfigError
from app.sims.common.simulation import load_run_config
from app.sims.epidermis import model
from app.sims.epidermis.config import Morse
from app.sims.epidermis.cpu import CpuEngine

from .helpers import clone, config, random_state

BOUNDARIES = ("periodic", "none")


def fd_forces(state, cfg, h=1e-5):
    """Central finite differences of model.total_energy over every live coordinate."""
    st = clone(state)
    st["pos"] = st["pos"].astype(np.float64)
    n = int(st["n_cells"])
    F = np.zeros_like(st["pos"])
    for c in range(n):
        for k in range(int(st["count"][c])):
            for a in range(3):
                x0 = st["pos"][a, k, c]
                st["pos"][a, k, c] = x0 + h
                ep = model.total_energy(st, cfg)
                st["pos"][a, k, c] = x0 - h
                em = model.total_energy(st, cfg)
                st["pos"][a, k, c] = x0
                F[a, k, c] = -(ep - em) / (2 * h)
    return F


@pytest.mark.parametrize("boundary", BOUNDARIES)
def test_forces_are_minus_the_energy_gradient(boundary):
    cfg = config(tissue={"cells": 4, "boundary": boundary, "pitch": 8.0})
    st = random_state(cfg, np.random.default_rng(1), per_cell=7, spread=2.2)
    assert (st["pos"][2, :7, :4] < 0).any() and (st["etype"] == 1).any()
    F, _ = model.reference_forces(st, cfg)
    # the test must be able to see the inter and membrane terms: both are present
    _, _, _, _, d, r, same = model._pair_terms(st, cfg)
    assert ((~same) & (r < cfg.mechanics.inter_cutoff)).sum() >= 10
    fd = fd_forces(st, cfg)
    scale = np.abs(F).max()
    assert scale > 0.5
    np.testing.assert_allclose(F, fd, atol=2e-6 * scale, rtol=0)


@pytest.mark.parametrize("boundary", BOUNDARIES)
def test_cell_list_and_centre_cutoff_give_the_reference_forces(boundary):
    tissue = {"cells": 16, "boundary": boundary, "pitch": 8.0}
    cfg = config(tissue=tissue)
    # elements within 6 µm of their centroid: no pair within inter_cutoff is farther apart
    # than the centre cutoff (16 µm), the condition of the paper's Algorithm 2
    st = random_state(cfg, np.random.default_rng(2), per_cell=12, spread=1.8)
    F_ref, S_ref = model.reference_forces(st, cfg)
    assert S_ref[0].sum() > 40                   # many intercellular contacts
    out = {}
    for search in ("cell_list", "centre_cutoff"):
        eng = CpuEngine(config(tissue=tissue, run={"search": search}), st)
        out[search] = eng.forces()
        F, S = out[search]
        assert F.dtype == np.float32 and F.shape == st["pos"].shape and S.shape[0] == 4
        np.testing.assert_allclose(F, F_ref, atol=1e-5 * np.abs(F_ref).max(), rtol=0)
        np.testing.assert_allclose(S, S_ref, atol=1e-5, rtol=1e-6)
    np.testing.assert_allclose(out["cell_list"][0], out["centre_cutoff"][0], atol=1e-6, rtol=0)


@pytest.mark.parametrize("search", ("cell_list", "centre_cutoff"))
def test_shifting_by_a_whole_or_half_box_leaves_forces_unchanged(search):
    cfg = config(tissue={"cells": 16, "pitch": 8.0}, run={"search": search})
    L = cfg.box
    st = random_state(cfg, np.random.default_rng(3), per_cell=12, spread=1.8)
    F0, S0 = CpuEngine(cfg, st).forces()
    scale = np.abs(F0).max()
    for shift, wrap in ((L, False), (-L, False), (0.5 * L, True), (0.37 * L, True)):
        moved = clone(st)
        n = 16
        for a in (0, 1):
            x = st["pos"][a, :, :n].astype(np.float64) + shift
            moved["pos"][a, :, :n] = (model.wrap(x, L) if wrap else x).astype(np.float32)
        moved["pos"][:, 12:, :] = 0
        F, S = CpuEngine(cfg, moved).forces()
        np.testing.assert_allclose(F, F0, atol=1e-4 * scale, rtol=0)
        np.testing.assert_array_equal(S[0], S0[0])


def test_isolated_cell_relaxes_to_a_compact_body():
    """20 elements far above the membrane. The energy falls monotonically and the body settles
    (forces ~ 0). Nearest-neighbour spacing: with a short-range attraction (xi = 0.5, 1 µm) the
    body's spacing sits within 15 % of the pair minimum r*; with the defaults' long-range
    attraction (xi2 = 2 µm, 19 partners pulling) it is compressed below r*, to ~0.7 r*."""
    short = Morse(62.6, 0.5, 5.01, 1.0)                 # r* = 3.22 µm, well depth 0.1 as default
    for intra, lo, hi in ((short, 0.85, 1.15), (None, 0.6, 1.0)):
        mech = {"intra": intra, "inter": intra} if intra else {}
        cfg = config(tissue={"cells": 1, "boundary": "none"}, run={"mode": "movement"},
                     mechanics=mech)
        st = model.place_cells(cfg)
        st["pos"][2, :20, 0] += 30.0
        eng = CpuEngine(cfg, st)
        f0 = np.abs(eng.forces()[0]).max()
        energy = []
        for _ in range(60):
            energy.append(model.total_energy(eng.state(), cfg))
            eng.advance(20)
        energy = np.array(energy)
        assert np.diff(energy).max() <= 1e-6 * abs(energy[0])
        assert energy[-1] < energy[0] - 0.5
        assert np.abs(eng.forces()[0]).max() < 0.05 * f0            # settled
        p, _, _, _ = model.live_elements(eng.state())
        d = np.sqrt(((p[:, None] - p[None]) ** 2).sum(-1))
        np.fill_diagonal(d, np.inf)
        rstar = model.morse_minimum(cfg.mechanics.intra)
        assert abs(rstar - 2 * cfg.mechanics.intra.xi1 * np.log(2 * cfg.mechanics.intra.U0
                                                                 / cfg.mechanics.intra.V0)) < 0.01
        ratio = d.min(axis=1).mean() / rstar
        assert lo < ratio < hi, ratio
        radius = np.sqrt(((p - p.mean(0)) ** 2).sum(1)).max()
        assert radius < 1.6 * rstar                     # compact: 20 elements, not a cloud


def full_cells(cfg, rng, cells=4):
    """Cells of max_elements elements (about to divide), typed C1 near the membrane."""
    st = model.place_cells(cfg)
    st = model.type_c1(st, cfg.mechanics.c1_height)
    st["genes"][:, :cells] = rng.random((6, cells)).astype(np.float32) + 0.1
    return st


def test_division_conserves_elements_and_halves_the_genes():
    cfg = config(tissue={"cells": 4, "elements": 40, "max_elements": 40, "cell_radius": 5.0,
                         "pitch": 12.0}, growth={"division_noise": 0.0})
    st = full_cells(cfg, np.random.default_rng(4))
    before = clone(st)
    model.divide_cells(st, cfg, np.array([0, 2]))
    assert int(st["n_cells"]) == 6
    assert st["count"][:6].tolist() == [20, 40, 20, 40, 20, 20]
    for parent, free in ((0, 4), (2, 5)):
        old = before["pos"][:, :40, parent].T
        new = np.concatenate([st["pos"][:, :20, parent].T, st["pos"][:, :20, free].T])
        # the same 40 positions, unchanged, split 20/20
        np.testing.assert_array_equal(old[np.lexsort(old.T)], new[np.lexsort(new.T)])
        assert st["etype"][:20, parent].sum() >= 1 and st["etype"][:, free].sum() == 0
        assert (st["pos"][:, 20:, free] == 0).all() and (st["pos"][:, 20:, parent] == 0).all()
        np.testing.assert_array_equal(st["genes"][:, parent], before["genes"][:, parent] * np.float32(0.5))
        np.testing.assert_array_equal(st["genes"][:, free], before["genes"][:, parent] * np.float32(0.5))
    for c in (1, 3):
        for key in ("pos", "etype", "genes"):
            np.testing.assert_array_equal(st[key][..., c], before[key][..., c])
    # with noise: each daughter's share within 0.5 (1 ± noise), drawn per parent and event
    cfg = config(tissue={"cells": 4, "elements": 40, "max_elements": 40, "cell_radius": 5.0,
                         "pitch": 12.0}, growth={"division_noise": 0.2})
    st = full_cells(cfg, np.random.default_rng(4))
    st["event"] = np.int64(7)
    g0 = st["genes"][:, 1].astype(np.float64)
    model.divide_cells(st, cfg, np.array([1]))
    f = model.division_factors(cfg.tissue.seed, np.array([1]), 7, 0.2)
    share = np.array([st["genes"][:, 1], st["genes"][:, 4]]) / g0
    assert ((share > 0.4 - 1e-6) & (share < 0.6 + 1e-6)).all() and abs(share[0, 0] - share[1, 0]) > 1e-3
    np.testing.assert_allclose(share[:, 0], f[:, 0], rtol=1e-6)


def test_division_along_the_vertical_axis_splits_top_from_bottom():
    cfg = config(tissue={"cells": 1, "elements": 40, "max_elements": 40, "cell_radius": 5.0,
                         "boundary": "none"}, growth={"division_axis": "vertical"})
    st = full_cells(cfg, np.random.default_rng(5), cells=1)
    z = st["pos"][2, :40, 0].copy()
    model.divide_cells(st, cfg, np.array([0]))
    assert st["pos"][2, :20, 0].max() <= np.sort(z)[19] and st["pos"][2, :20, 1].min() >= np.sort(z)[20]
    assert st["etype"][:20, 0].sum() >= 1 and st["etype"][:, 1].sum() == 0


def test_growth_adds_one_element_only_to_low_delta_cells():
    cfg = config(tissue={"cells": 4})
    st = model.type_c1(model.place_cells(cfg), cfg.mechanics.c1_height)
    st["genes"][model.D_, :4] = [0.1, 0.9, 0.2, 0.6]
    before = clone(st)
    ctr = model.centroids(st["pos"], st["count"], 4, cfg.box)
    grown = model.grow(st, cfg, 3)
    assert grown.tolist() == [0, 2]
    assert st["count"][:4].tolist() == [21, 20, 21, 20]
    jit = model.growth_jitter(cfg.tissue.seed, np.array([0, 2]), 3, cfg.growth.jitter)
    for i, c in enumerate((0, 2)):
        assert st["etype"][20, c] == 0
        d = st["pos"][:, 20, c] - ctr[:, c]
        d[:2] = model.minimum_image(d[:2], cfg.box)
        np.testing.assert_allclose(d, jit[:, i], atol=1e-5)
        assert (np.abs(d) <= cfg.growth.jitter + 1e-5).all()
        np.testing.assert_array_equal(st["pos"][:, :20, c], before["pos"][:, :20, c])
    # the engine's growth events: after every interval-th step, D read at that moment
    cfg = config(tissue={"cells": 4}, growth={"interval": 5, "delta_low": 0.3})
    st["count"][:4] = 20
    st["pos"][:, 20:] = 0
    st["genes"][:, :4] = before["genes"][:, :4]
    st["genes"][model.D_, :4] = [0.1, 0.9, 0.2, 0.6]
    eng = CpuEngine(cfg, st)
    eng.advance(4)
    assert eng.element_counts().tolist() == [20] * 4
    eng.advance(1)
    _, g = eng.cells()
    assert (eng.element_counts() - 20).tolist() == (g[model.D_] < 0.3).astype(int).tolist()
    assert eng.state()["event"] == 1 and (eng.element_counts() == 21).sum() == 2


def test_capacity_doubles_without_losing_state():
    cfg = config(tissue={"cells": 50, "elements": 6, "max_elements": 6, "cell_radius": 2.0,
                         "pitch": 6.0}, growth={"division_noise": 0.1})
    st = model.type_c1(model.place_cells(cfg), cfg.mechanics.c1_height)
    st["genes"][:, :50] = np.random.default_rng(6).random((6, 50)).astype(np.float32)
    assert st["count"].shape[0] == model.capacity_for(50) == 128
    eng = CpuEngine(cfg, st)
    eng.divide(np.arange(50))
    ref = clone(eng.state())
    model.grow_capacity(ref, 512)                        # the same, pre-enlarged
    assert ref["count"].shape[0] == 128 * 4
    eng.s["count"][50:100] = 6                          # refill the daughters, divide 60 more
    ref["count"][50:100] = 6
    eng.divide(np.arange(60))
    model.divide_cells(ref, cfg, np.arange(60))
    st2 = eng.state()
    assert st2["count"].shape[0] == 256 and int(st2["n_cells"]) == 160
    for key in ("pos", "etype", "count", "genes"):
        np.testing.assert_array_equal(st2[key][..., :160], ref[key][..., :160])
    np.testing.assert_array_equal(eng.forces()[0][..., :160],
                                  CpuEngine(cfg, ref).forces()[0][..., :160])


# ---- the gene network -------------------------------------------------------------------
def independent_rhs(y, A, s, mN=0.0, mD=0.0, mB=0.0):
    """The paper's equations written out again (float64), not through model.gene_rhs."""
    N, D, B, O2, O1, M = y

    def f(p, x):
        return p.a + p.b / (1.0 + (p.c * x) ** p.h)
    return np.array([
        -s.k_a * N * mD + s.k_d * B - s.d_N * N + f(s.BN, B) * f(s.ON, O2),
        -s.k_a * D * mN + s.k_d * mB - s.d_D * D + f(s.ND, N),
        s.k_a * N * mD - s.k_d * B - s.d_B * B,
        -s.d_O2 * O2 + f(s.VO, O1) * f(s.GO, s.G),
        -s.d_O1 * O1 + f(s.OV, O2) * f(s.AV, A),
        -s.d_M * M + f(s.OM, O2)])


def rk4(y, A, s, t_end, h, **means):
    for _ in range(int(round(t_end / h))):
        k1 = independent_rhs(y, A, s, **means)
        k2 = independent_rhs(y + 0.5 * h * k1, A, s, **means)
        k3 = independent_rhs(y + 0.5 * h * k2, A, s, **means)
        k4 = independent_rhs(y + h * k3, A, s, **means)
        y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return y


def test_gene_network_basal_and_suprabasal_steady_states():
    cfg = config()
    s, dt = cfg.genes, cfg.run.dt
    y0 = np.array([0.5, 0.5, 0.0, 0.0, 0.0, 0.0])
    A = np.array([8.0, 0.0])                           # attached (C1 elements), detached
    means = {"mN": 0.3, "mD": 0.2, "mB": 0.05}
    g = np.repeat(y0[:, None], 2, axis=1)
    mv = np.array([[means["mN"]] * 2, [means["mD"]] * 2, [means["mB"]] * 2])
    for _ in range(int(300 / dt)):                     # 300 time units = 30 decay times
        g = model.gene_step(g, mv, A, s, dt)
    for col, a in enumerate(A):
        ref = rk4(y0, a, s, 300.0, 0.05, **means)
        np.testing.assert_allclose(g[:, col], ref, rtol=2e-3, atol=1e-5)
        assert np.abs(independent_rhs(ref, a, s, **means)).max() < 1e-6     # a steady state
    # one step is the midpoint RK2 of the paper's equations, means and A held
    y = np.array([0.4, 0.3, 0.1, 0.2, 0.05, 0.1])
    for a in A:
        k1 = independent_rhs(y, a, s, **means)
        mid = independent_rhs(y + 0.5 * dt * k1, a, s, **means)
        np.testing.assert_allclose(model.gene_step(y[:, None], mv[:, :1], np.array([a]), s, dt)[:, 0],
                                   y + dt * mid, rtol=1e-13, atol=1e-15)
    basal, supra = g[:, 0], g[:, 1]
    assert not model.suprabasal(basal[:, None])[0] and model.suprabasal(supra[:, None])[0]
    assert basal[model.O2_] > 5 * basal[model.O1_] and supra[model.O1_] > 5 * supra[model.O2_]
    assert basal[model.D_] < cfg.growth.delta_low < supra[model.D_]      # only basal cells grow
    assert basal[model.M_] < supra[model.M_]


# ---- the initial tissue and the config --------------------------------------------------
def test_initial_tissue_is_a_relaxed_attached_monolayer():
    cfg = config(tissue={"cells": 10}, run={"relax_steps": 200})
    raw = model.place_cells(cfg)
    assert raw["pos"].shape == (3, 40, 64) and raw["count"][:10].tolist() == [20] * 10
    assert (raw["count"][10:] == 0).all() and (raw["etype"] == 0).all()
    side, pitch, R = cfg.grid_side, cfg.tissue.pitch, cfg.tissue.cell_radius
    ctr = model.centroids(raw["pos"], raw["count"], 10, cfg.box)
    expect = np.array([(np.arange(10) % side + 0.5) * pitch, (np.arange(10) // side + 0.5) * pitch])
    assert np.abs(ctr[:2] - expect).max() < R and np.abs(ctr[2] - 1.05 * R).max() < R
    rstar = model.morse_minimum(cfg.mechanics.intra)
    for c in range(10):
        p = raw["pos"][:, :20, c].astype(np.float64)
        off = p - np.array([expect[0, c], expect[1, c], 1.05 * R])[:, None]
        off[:2] = model.minimum_image(off[:2], cfg.box)
        assert (np.sqrt((off ** 2).sum(0)) <= R + 1e-4).all()
        d = np.sqrt(sum(model.minimum_image(p[a][:, None] - p[a][None], cfg.box if a < 2 else None) ** 2
                        for a in range(3))) + np.eye(20) * 99
        assert d.min() >= 0.9 ** 3 * model.MIN_SEPARATION * rstar
    g = raw["genes"][:, :10]
    assert (np.abs(g[:2] / cfg.genes.initial - 1) <= cfg.genes.initial_noise + 1e-6).all()
    assert (g[2:] == 0).all() and np.unique(g[0]).size == 10
    again = model.place_cells(cfg)
    for key in raw:
        np.testing.assert_array_equal(raw[key], again[key])
    other = model.place_cells(config(tissue={"cells": 10, "seed": 1}, run={"relax_steps": 200}))
    assert not np.array_equal(other["pos"], raw["pos"])
    st = model.initial_state(cfg)
    assert int(st["step"]) == 0 and int(st["event"]) == 0
    c1 = st["etype"][:20, :10] == 1
    np.testing.assert_array_equal(c1, st["pos"][2, :20, :10] < cfg.mechanics.c1_height)
    assert (c1.sum(axis=0) >= 1).all()
    assert not np.array_equal(st["pos"], raw["pos"])           # relaxed
    assert (st["pos"][0, :20, :10] >= 0).all() and (st["pos"][0, :20, :10] < cfg.box).all()


def test_random_layout_places_cells_apart():
    cfg = config(tissue={"cells": 30, "layout": "random", "pitch": 9.7}, run={"relax_steps": 0})
    st = model.place_cells(cfg)
    ctr = model.centroids(st["pos"], st["count"], 30, cfg.box)
    d = np.sqrt(sum(model.minimum_image(ctr[a][:, None] - ctr[a][None], cfg.box) ** 2 for a in (0, 1)))
    np.fill_diagonal(d, np.inf)
    # centroids of 20 elements sit within ~R/2 of the placed centres
    assert d.min() > model.RANDOM_SPACING * cfg.tissue.cell_radius - 2.5
    assert np.array_equal(st["pos"], model.place_cells(cfg)["pos"])


def test_config_errors_name_the_key_and_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("domain: epidermis\ntissue:\n  cells: 4\n  pitch: 3.0\n")
    with pytest.raises(ConfigError, match=r"bad.yaml:4: tissue.pitch: the periodic box is 6 µm"):
        load_run_config(bad)
    bad.write_text("domain: epidermis\ntissue:\n  elements: 30\n  max_elements: 20\n")
    with pytest.raises(ConfigError, match=r"bad.yaml:3: tissue.elements: elements \(30\) exceeds "
                                          r"max_elements \(20\)"):
        load_run_config(bad)
    bad.write_text("domain: epidermis\nrun:\n  mode: fast\n")
    with pytest.raises(ConfigError, match=r"bad.yaml:3: run.mode: 'fast' is not one of"):
        load_run_config(bad)
    bad.write_text("domain: epidermis\ntissue: {cells: 9}\nrun:\n  search: centre_cutoff\n")
    with pytest.raises(ConfigError, match=r"2 centre_cutoff"):
        load_run_config(bad)
    bad.write_text("domain: epidermis\ntissue: {cells: 9, boundary: none}\nrun: {search: centre_cutoff}\n")
    load_run_config(bad)                                 # no box, no minimum image: fine
