"""The CUDA epidermis engine against the float64 references and the CPU engine (GPU machine).

Tolerances. Positions are float32 in both engines, so the inputs of a force evaluation are
identical; the CUDA engine then computes each pair term in float32 with fast-math exp, sqrt
and division (a few ulp each, up to ~2 + 1.2·r/xi ulp for the exponentials), i.e. to a
relative ~2e-6 of the term, and sums up to ~60 terms per element. The error of an element's
force is therefore bounded by ~1e-5 of the sum of the magnitudes of its terms (S_i below, in
float64), not of the net force, which cancels; the tests allow 1e-4·S_i (float32 precision
with a tenfold margin). Contact counts are integers and must agree exactly, except for pairs
within 1e-4 µm of the cutoff. Discrete events (growth, division) are compared bit for bit
where both engines do the same float64 arithmetic on the same float32 state (growth
positions, division slots, types and gene shares).
"""

import numpy as np
import pytest

from app.sims.epidermis import config as epidermis_config
from app.sims.epidermis import model
from app.sims.epidermis.cpu import CpuEngine
from app.sims.epidermis.cuda import CudaEngine

from .helpers import clone, config, random_state, term_scale

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_context")]

BOUNDARIES = ("periodic", "none")
SEARCHES = ("cell_list", "centre_cutoff")
TOL_TERMS = 1e-4


def engine(cfg, state):
    return CudaEngine(cfg, clone(state))


def tight(state: dict) -> dict:
    """The state with its capacity cut to its cells (the next division must reallocate)."""
    n = int(state["n_cells"])
    out = clone(state)
    for key in ("pos", "etype", "count", "genes"):
        out[key] = np.ascontiguousarray(out[key][..., :n])
    return out


# ---- forces ---------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["movement", "genes"])
@pytest.mark.parametrize("search", SEARCHES)
@pytest.mark.parametrize("boundary", BOUNDARIES)
def test_forces_match_the_float64_reference(boundary, search, mode):
    cfg = config(tissue={"cells": 25, "boundary": boundary, "pitch": 7.0},
                 run={"search": search, "mode": mode})
    rng = np.random.default_rng([7, len(boundary), len(search), len(mode)])
    state = random_state(cfg, rng, per_cell=12)
    eng = engine(cfg, state)
    F, S = eng.forces()
    eng.close()
    Fr, Sr = model.reference_forces(state, cfg)
    scale, r, same = term_scale(state, cfg)
    err = np.sqrt(((F - Fr) ** 2).sum(axis=0))
    worst = float((err / (scale + 1e-30)).max())
    print(f"max |dF|/S_i = {worst:.2e}, |dF|/|F| = {np.linalg.norm(F - Fr) / np.linalg.norm(Fr):.2e}")
    assert np.all(err <= TOL_TERMS * scale + 1e-6), worst
    assert np.isfinite(F).all()
    # contact sums: exact counts (but for pairs at the cutoff), N, D, B to float32 rounding
    p, cell, _, kc = model.live_elements(state)
    edge = (~same & (np.abs(r - cfg.mechanics.inter_cutoff) < 1e-4)).any(axis=1)
    mask = np.zeros(state["pos"].shape[1:], bool)
    mask[kc[0], kc[1]] = ~edge
    assert Sr[0].sum() > 50                                    # plenty of contacts
    assert np.array_equal(S[0][mask], Sr[0][mask])
    assert np.allclose(S[1:], Sr[1:], rtol=1e-5, atol=1e-5)
    dead = np.ones(mask.shape, bool)
    dead[kc[0], kc[1]] = False
    assert not F[:, dead].any() and not S[:, dead].any()


@pytest.mark.parametrize("boundary", BOUNDARIES)
def test_cell_list_and_centre_cutoff_agree_on_cuda(boundary):
    cfg_a = config(tissue={"cells": 25, "boundary": boundary, "pitch": 8.0},
                   run={"search": "cell_list", "mode": "genes"})
    cfg_b = config(tissue={"cells": 25, "boundary": boundary, "pitch": 8.0},
                   run={"search": "centre_cutoff", "mode": "genes"})
    rng = np.random.default_rng(11)
    state = random_state(cfg_a, rng, per_cell=10)
    a, b = engine(cfg_a, state), engine(cfg_b, state)
    Fa, Sa = a.forces()
    Fb, Sb = b.forces()
    scale, _, _ = term_scale(state, cfg_a)
    assert np.all(np.sqrt(((Fa - Fb) ** 2).sum(axis=0)) <= 1e-5 * scale + 1e-6)
    assert np.array_equal(Sa[0], Sb[0])
    a.close(), b.close()
    # and a relaxing tissue stepped with either search stays together
    state = model.type_c1(model.place_cells(cfg_a), cfg_a.mechanics.c1_height)
    a, b = engine(cfg_a, state), engine(cfg_b, state)
    a.advance(200)
    b.advance(200)
    sa, sb = a.state(), b.state()
    assert np.abs(sa["pos"] - sb["pos"]).max() < 1e-3
    assert np.abs(sa["genes"] - sb["genes"]).max() < 1e-4
    a.close(), b.close()


def test_forces_of_a_relaxed_tissue_match_the_cpu_engine():
    cfg = config(tissue={"cells": 36, "pitch": 7.0}, run={"mode": "genes", "relax_steps": 300})
    state = model.initial_state(cfg, engine=CudaEngine)
    eng = engine(cfg, state)
    F, S = eng.forces()
    eng.close()
    Fc, Sc = CpuEngine(cfg, clone(state)).forces()
    scale, _, _ = term_scale(state, cfg)
    assert np.all(np.sqrt(((F - Fc) ** 2).sum(axis=0)) <= TOL_TERMS * scale + 1e-6)
    assert Sc[0].sum() > 100
    assert np.abs(S[0] - Sc[0]).sum() <= 2          # at most a pair at the cutoff


# ---- the pair list ----------------------------------------------------------------------------
@pytest.mark.parametrize("boundary", BOUNDARIES)
def test_a_kept_pair_list_steps_as_a_fresh_one(boundary):
    """The pair list kept while no element drifts SKIN/2, rebuilt by the device when one does,
    gives the trajectory of a list built afresh for every evaluation (each ``advance`` builds
    it), to the rounding of a different summation order. The tissue, relaxing from its
    placement, drifts far enough to force rebuilds, yet most evaluations keep the list."""
    cfg = config(tissue={"cells": 25, "pitch": 7.0, "boundary": boundary},
                 run={"mode": "genes", "relax_steps": 0})
    state = model.type_c1(model.place_cells(cfg), cfg.mechanics.c1_height)
    kept, fresh = engine(cfg, state), engine(cfg, state)
    steps = 200
    kept.advance(steps)
    for _ in range(steps):
        fresh.advance(1)
    builds, entries = kept.pair_list()
    assert fresh.pair_list()[0] == 2 * steps
    print(f"builds {builds} in {2 * steps} evaluations, mean entries {entries.mean():.2f}")
    assert 2 < builds < steps // 2
    assert entries.min() >= 0 and entries.mean() > 0.5
    a, b = kept.state(), fresh.state()
    assert np.abs(a["pos"] - b["pos"]).max() < 1e-3
    assert np.abs(a["genes"] - b["genes"]).max() < 1e-4
    kept.close(), fresh.close()


def test_crowded_elements_scan_the_bins(monkeypatch):
    """An element with more list entries than the device holds scans its bins at every
    evaluation instead: with one entry per element, forces and steps are those of the full
    lists (the same pairs, in the same order)."""
    cfg = config(tissue={"cells": 25, "pitch": 7.0}, run={"mode": "genes"})
    state = random_state(cfg, np.random.default_rng(5), per_cell=12)
    full = engine(cfg, state)
    F, S = full.forces()
    full.advance(30)
    monkeypatch.setattr(epidermis_config, "DEVICE_LIST_CAP", 1)
    crowded = engine(cfg, state)
    Fc, Sc = crowded.forces()
    assert (crowded.pair_list()[1] < 0).mean() > 0.2
    crowded.advance(30)
    assert np.array_equal(F, Fc) and np.array_equal(S, Sc)
    assert np.array_equal(full.state()["pos"], crowded.state()["pos"])
    full.close(), crowded.close()


# ---- growth, division, capacity -------------------------------------------------------------
def test_growth_jitter_is_bit_identical_to_numpy_philox():
    cfg = config(tissue={"cells": 4})
    eng = engine(cfg, model.place_cells(cfg))
    cells = np.array([0, 1, 2, 3, 77, 123456, 2**31 - 1])
    for event in (1, 2, 65, 2**33 + 5):
        assert np.array_equal(eng.jitter(cells, event),
                              model.growth_jitter(cfg.tissue.seed, cells, event, cfg.growth.jitter))
    eng.close()


@pytest.mark.parametrize("boundary", BOUNDARIES)
def test_growth_on_cuda_is_model_grow(boundary):
    cfg = config(tissue={"cells": 30, "boundary": boundary}, run={"mode": "full"})
    rng = np.random.default_rng(3)
    state = random_state(cfg, rng, per_cell=20)
    state["count"][5] = cfg.tissue.max_elements - 1      # one slot left
    state["pos"][:, 19:39, 5] = state["pos"][:, :20, 5]
    state["count"][6] = cfg.tissue.max_elements           # full: must not grow
    state["pos"][:, 20:40, 6] = state["pos"][:, :20, 6]
    state["genes"][1, :30] = np.where(np.arange(30) % 3 == 0, 0.9, 0.1)   # D high -> no growth
    eng = engine(cfg, state)
    eng.grow(17)
    got = eng.state()
    eng.close()
    ref = clone(state)
    grown = model.grow(ref, cfg, 17)
    assert grown.size > 10
    for key in ("pos", "etype", "count", "genes"):
        assert np.array_equal(got[key], ref[key]), key


@pytest.mark.parametrize("axis", ["long", "vertical"])
@pytest.mark.parametrize("boundary", BOUNDARIES)
def test_division_on_cuda_is_split_cell(boundary, axis):
    cfg = config(tissue={"cells": 12, "elements": 40, "boundary": boundary},
                 growth={"division_axis": axis}, run={"mode": "full"})
    state = model.type_c1(model.place_cells(cfg), cfg.mechanics.c1_height)
    if boundary == "periodic":         # move the tissue so that cells straddle the edges
        box = model.box_of(cfg)
        n = cfg.tissue.cells
        for a in range(2):
            state["pos"][a, :, :n] = model.wrap(state["pos"][a, :, :n] + 0.45 * box, box)
    state["genes"][:, :12] = np.random.default_rng(5).random((6, 12)).astype(np.float32)
    state["event"] = np.int64(3)
    parents = np.array([0, 3, 4, 7, 11])
    eng = engine(cfg, state)
    eng.divide(parents)
    got = eng.state()
    eng.close()
    ref = clone(state)
    model.divide_cells(ref, cfg, parents)
    assert int(got["n_cells"]) == int(ref["n_cells"]) == 17
    for key in ("pos", "etype", "count", "genes"):
        assert np.array_equal(got[key], ref[key]), key


def test_capacity_doubling_keeps_the_state():
    cfg = config(tissue={"cells": 20, "elements": 40}, run={"mode": "full"})
    state = tight(model.type_c1(model.place_cells(cfg), cfg.mechanics.c1_height))
    assert state["count"].shape == (20,)
    eng = engine(cfg, state)
    parents = np.arange(0, 20, 2)
    eng.divide(parents)                       # 30 cells: 20 -> 40
    eng.divide(np.arange(20, 30))             # 40 cells: fits
    eng.divide(np.array([1, 3, 5]))           # 43 cells: 40 -> 80
    got = eng.state()
    ref = clone(state)
    for p in (parents, np.arange(20, 30), np.array([1, 3, 5])):
        model.divide_cells(ref, cfg, p)
    assert eng.capacity == 80 and got["pos"].shape[2] == ref["pos"].shape[2] == 80
    for key in ("pos", "etype", "count", "genes", "n_cells"):
        assert np.array_equal(got[key], ref[key]), key
    eng.advance(20)                               # the new buffers step
    assert np.isfinite(eng.state()["pos"]).all()
    eng.close()


# ---- runs --------------------------------------------------------------------------------------
def test_full_model_run_keeps_every_element_and_stays_finite():
    cfg = config(tissue={"cells": 36, "elements": 36}, growth={"interval": 100, "delta_low": 10.0},
                 run={"mode": "full", "relax_steps": 100})
    state = model.initial_state(cfg, engine=CudaEngine)
    eng = engine(cfg, state)
    E = cfg.tissue.max_elements
    total = int(eng.element_counts().sum())
    for _ in range(8):                        # every cell grows by one at every event
        n_before = eng.n_cells
        eng.advance(cfg.growth.interval)
        counts = eng.element_counts()
        assert counts.sum() == total + n_before
        total = int(counts.sum())
    st = eng.state()
    eng.close()
    n = int(st["n_cells"])
    assert n > 36 and int(st["event"]) == 8
    valid = model.valid_mask(st["count"], n, E)
    assert np.isfinite(st["pos"]).all() and np.isfinite(st["genes"]).all()
    assert not st["pos"][:, :, :n][:, ~valid].any() and not st["etype"][:, :n][~valid].any()
    assert not st["pos"][:, :, n:].any() and not st["count"][n:].any()
    x = st["pos"][0, :, :n][valid]
    assert ((x >= 0) & (x < cfg.box)).all()
    assert st["count"][:n].max() < E and st["count"][:n].min() >= E // 2


def test_full_model_with_divisions_follows_the_cpu_engine():
    cfg = config(tissue={"cells": 9, "elements": 37}, growth={"interval": 20, "delta_low": 10.0},
                 run={"mode": "full", "relax_steps": 0})
    state = model.type_c1(model.place_cells(cfg), cfg.mechanics.c1_height)
    g, c = engine(cfg, state), CpuEngine(cfg, clone(state))
    g.advance(100)
    c.advance(100)
    a, b = g.state(), c.state()
    assert int(a["n_cells"]) == int(b["n_cells"]) > 9
    assert np.array_equal(a["count"], b["count"])
    ca, _ = g.cells()
    cb, _ = c.cells()
    assert np.abs(ca - cb).max() < 0.5           # a near-tie in a split could move one element
    g.close()


def test_checkpoint_round_trip_is_bit_identical():
    cfg = config(tissue={"cells": 16}, growth={"interval": 50, "delta_low": 10.0},
                 run={"mode": "full", "relax_steps": 0})
    state = model.type_c1(model.place_cells(cfg), cfg.mechanics.c1_height)
    a = engine(cfg, state)
    a.advance(120)
    saved = a.state()
    b = engine(cfg, saved)
    a.advance(130)
    b.advance(130)
    sa, sb = a.state(), b.state()
    for key in ("step", "event", "n_cells", "pos", "etype", "count", "genes"):
        assert np.array_equal(sa[key], sb[key]), key
    a.restore(saved)                        # and back to the checkpoint in place
    a.advance(130)
    sa = a.state()
    for key in ("pos", "genes", "count"):
        assert np.array_equal(sa[key], sb[key]), key
    a.close(), b.close()


def test_cpu_engine_resumes_a_cuda_checkpoint():
    cfg = config(tissue={"cells": 16}, run={"mode": "genes", "relax_steps": 0})
    state = model.type_c1(model.place_cells(cfg), cfg.mechanics.c1_height)
    g = engine(cfg, state)
    g.advance(200)
    saved = g.state()
    c = CpuEngine(cfg, clone(saved))
    g.advance(50)
    c.advance(50)
    a, b = g.state(), c.state()
    assert int(a["step"]) == int(b["step"]) == 250
    assert np.abs(a["pos"] - b["pos"]).max() < 1e-3
    assert np.abs(a["genes"] - b["genes"]).max() < 1e-4
    pa, cella, ta = g.elements()
    pb, cellb, tb = c.elements()
    assert np.array_equal(cella, cellb) and np.array_equal(ta, tb)
    g.close()


def test_a_blown_up_tissue_raises():
    cfg = config(tissue={"cells": 4}, run={"mode": "movement"})
    state = model.type_c1(model.place_cells(cfg), cfg.mechanics.c1_height)
    state["pos"][0, 1, 2] = np.nan
    eng = engine(cfg, state)
    with pytest.raises(model.BlownUpError, match="cell 2"):
        eng.advance(1)
    eng.close()


@pytest.mark.parametrize("search", SEARCHES)
def test_graph_replays_equal_launches_one_by_one(monkeypatch, search):
    """The same steps replayed from captured graphs and launched one by one: bit-identical
    states (the graph's launches are the plan's, arguments included), across growth events."""
    from app.sims.epidermis import cuda as epidermis_cuda

    cfg = config(tissue={"cells": 30, "elements": 38}, growth={"interval": 70, "delta_low": 10.0},
                 run={"mode": "full", "relax_steps": 0, "search": search})
    state = model.type_c1(model.place_cells(cfg), cfg.mechanics.c1_height)
    runs = []
    for per_graph in (epidermis_cuda.GRAPH_STEPS, 10**9):
        monkeypatch.setattr(epidermis_cuda, "GRAPH_STEPS", per_graph)
        eng = engine(cfg, state)
        for steps in (45, 100, 3):                  # parts that end between growth events
            eng.advance(steps)
        runs.append((eng.state(), eng.summary()["graph_replays"]))
        eng.close()
    (graph, replays), (plain, none) = runs
    assert replays > 0 and none == 0
    assert int(graph["n_cells"]) > 30
    for key in ("step", "event", "n_cells", "pos", "etype", "count", "genes"):
        assert np.array_equal(graph[key], plain[key]), key
