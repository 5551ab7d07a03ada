"""The compiled CPU engine against the float64 references and the NumPy engine.

Both engines round the state to float32 after every step. The compiled engine computes the
intracellular factors in float32 (16 SIMD lanes), everything else in float64 as the NumPy
engine. Derived tolerances:

- Forces, relative to S_i (the sum of the magnitudes of element i's terms): a float32 term
  carries ~10 roundings of u = 2^-24 (coordinates relative to the cell's element 0, the
  displacement, r², the root, the exponential within 2 ulp, the factor, the product) and the
  ~20-term float32 sum another ~20 u; a coordinate of up to ~15 µm rounded to float32 moves a
  displacement by ~2u·15 µm, ~1e-5 of the shortest intracellular distances of these states
  (0.15 µm). Allowed: 1e-5·S_i (measured: <= 5e-7); the float64 parts alone (one element a cell:
  no intracellular pairs): 1e-12·S_i, as before. The CUDA engine (float32 throughout) is held
  to 1e-4·S_i.
- States after ~200 steps: the per-step force error times dt (~1e-6 µm) does not grow in this
  overdamped dynamics; allowed 1e-4 µm (measured: <= 6e-6 µm; the CUDA engine: 1e-3 µm), genes
  1e-6 (measured: equal).
"""

import numpy as np
import pytest

from app.compute.cpu_threads import threads
from app.sims.epidermis import model
from app.sims.epidermis.compiled import CELLS_PER_THREAD, LIST_CAP, CompiledEngine, _build_list
from app.sims.epidermis.cpu import CpuEngine

from .helpers import clone, config, random_state, term_scale

BOUNDARIES = ("periodic", "none")
TOL_TERMS = 1e-5             # float32 intracellular factors (see above)
TOL_TERMS_FLOAT64 = 1e-12    # the float64 parts alone
KEYS = ("step", "event", "n_cells", "pos", "etype", "count", "genes")


OTHER_LENGTHS = {"intra": model.Morse(2.5, 1.0, 1.0, 1.7), "membrane": model.Morse(5.0, 0.4, 2.0, 1.0)}


def compare_forces(cfg, state, tol_terms):
    """The engine's forces within ``tol_terms``·S_i (plus the float32 rounding of its output)
    of model.reference_forces, contact sums equal, nothing on empty slots."""
    F, S = CompiledEngine(cfg, clone(state)).forces()
    Fr, Sr = model.reference_forces(state, cfg)
    scale, _, _ = term_scale(state, cfg)
    err = np.sqrt(((F - Fr.astype(np.float32)) ** 2).sum(axis=0))
    assert np.all(err <= tol_terms * scale + 2e-7 * np.sqrt((Fr ** 2).sum(axis=0))), \
        (err / (scale + 1e-30)).max()
    assert Sr[0].sum() > 20
    assert np.array_equal(S, Sr.astype(np.float32))
    _, _, _, kc = model.live_elements(state)
    dead = np.ones(F.shape[1:], bool)
    dead[kc[0], kc[1]] = False
    assert not F[:, dead].any() and not S[:, dead].any()


@pytest.mark.parametrize("mode,mechanics", [("movement", {}), ("genes", {}),
                                            ("genes", OTHER_LENGTHS)])
@pytest.mark.parametrize("boundary", BOUNDARIES)
def test_forces_match_the_float64_reference(boundary, mode, mechanics):
    """The defaults (xi2 = 2·xi1 everywhere: exp(-r/xi1) as a square) and other lengths."""
    cfg = config(tissue={"cells": 25, "boundary": boundary, "pitch": 7.0}, run={"mode": mode},
                 mechanics=mechanics)
    state = random_state(cfg, np.random.default_rng([7, len(boundary), len(mode)]), per_cell=12)
    compare_forces(cfg, state, TOL_TERMS)


@pytest.mark.parametrize("mechanics", [{}, OTHER_LENGTHS])
@pytest.mark.parametrize("boundary", BOUNDARIES)
def test_the_float64_forces_match_the_reference_to_rounding(boundary, mechanics):
    """One element a cell: intercellular, membrane and wall forces only (all float64)."""
    cfg = config(tissue={"cells": 64, "boundary": boundary, "pitch": 2.0}, run={"mode": "genes"},
                 mechanics=mechanics)
    state = random_state(cfg, np.random.default_rng([8, len(boundary)]), per_cell=1, spread=1.5)
    compare_forces(cfg, state, TOL_TERMS_FLOAT64)


@pytest.mark.parametrize("cells,pitch,boundary", [(25, 3.0, "periodic"), (25, 3.0, "none"),
                                                  (4, 5.0, "periodic")])
def test_the_verlet_list_holds_every_pair_within_reach(cells, pitch, boundary):
    """Against all pairs: dense random tissues (more than LIST_CAP partners: the second scan)
    and a 10 µm box (fewer than 3 bins a side: each bin once)."""
    cfg = config(tissue={"cells": cells, "boundary": boundary, "pitch": pitch})
    state = random_state(cfg, np.random.default_rng([5, cells, len(boundary)]), per_cell=12)
    x, cell, _, _ = model.live_elements(state)
    box = model.box_of(cfg) or 0.0
    reach = 4.0
    off, nbr, own = _build_list(np.ascontiguousarray(x.T), cell.astype(np.int64), box,
                                1.0 / box if box else 0.0, reach)
    d = x[:, None, :] - x[None, :, :]
    d[..., :2] = model.minimum_image(d[..., :2], box or None)
    want = ((d ** 2).sum(axis=-1) < reach ** 2) & (cell[:, None] != cell[None, :])
    got = np.zeros_like(want)
    got[own, nbr] = True
    assert np.array_equal(got, want) and nbr.size == want.sum()
    assert np.array_equal(own, np.repeat(np.arange(x.shape[0]), np.diff(off)))
    if cells > 4:
        assert np.diff(off).max() > LIST_CAP


@pytest.mark.parametrize("boundary,search", [("periodic", "cell_list"), ("none", "cell_list"),
                                             ("periodic", "centre_cutoff")])
def test_steps_follow_the_numpy_engine(boundary, search):
    """Genes mode from scattered cells (elements move several µm: the Verlet list is rebuilt
    on the way): the float32 states stay within 1e-4 µm of the NumPy engine's."""
    cfg = config(tissue={"cells": 16, "boundary": boundary, "pitch": 8.0},
                 run={"mode": "genes", "search": search})
    st = random_state(cfg, np.random.default_rng(11), per_cell=12, spread=1.8)
    a, b = CompiledEngine(cfg, clone(st)), CpuEngine(cfg, clone(st))
    for n in (1, 59, 140):
        a.advance(n)
        b.advance(n)
        sa, sb = a.state(), b.state()
        assert int(sa["step"]) == int(sb["step"])
        assert np.abs(sa["pos"] - sb["pos"]).max() < 1e-4, n
        assert np.abs(sa["genes"] - sb["genes"]).max() < 1e-6
    assert np.abs(sa["pos"] - st["pos"]).max() > 1.0          # the tissue did move


def test_full_model_with_growth_and_divisions_follows_the_numpy_engine():
    cfg = config(tissue={"cells": 9, "elements": 37}, growth={"interval": 20, "delta_low": 10.0},
                 run={"mode": "full", "relax_steps": 0})
    state = model.type_c1(model.place_cells(cfg), cfg.mechanics.c1_height)
    a, b = CompiledEngine(cfg, clone(state)), CpuEngine(cfg, clone(state))
    a.advance(100)
    b.advance(100)
    sa, sb = a.state(), b.state()
    assert int(sa["n_cells"]) == int(sb["n_cells"]) > 9 and int(sa["event"]) == 5
    for key in ("count", "etype"):
        assert np.array_equal(sa[key], sb[key]), key
    assert np.abs(sa["pos"] - sb["pos"]).max() < 1e-4
    ca, ga = a.cells()
    cb, gb = b.cells()
    assert np.abs(ca - cb).max() < 1e-4 and np.abs(ga - gb).max() < 1e-6


def test_checkpoints_move_between_the_engines_and_resume_bit_identically():
    cfg = config(tissue={"cells": 16}, growth={"interval": 50, "delta_low": 10.0},
                 run={"mode": "full", "relax_steps": 0})
    state = model.type_c1(model.place_cells(cfg), cfg.mechanics.c1_height)
    a = CompiledEngine(cfg, clone(state))
    a.advance(120)
    saved = a.state()
    b = CompiledEngine(cfg, clone(saved))
    a.advance(80)
    b.advance(80)
    sa, sb = a.state(), b.state()
    for key in KEYS:
        assert np.array_equal(sa[key], sb[key]), key
    ref = CpuEngine(cfg, clone(saved))           # the NumPy engine resumes the checkpoint
    ref.advance(80)
    sr = ref.state()
    assert np.array_equal(sr["count"], sa["count"]) and int(sr["event"]) == int(sa["event"])
    assert np.abs(sr["pos"] - sa["pos"]).max() < 1e-4


def test_the_result_does_not_depend_on_the_thread_count():
    cfg = config(tissue={"cells": 2 * CELLS_PER_THREAD}, run={"mode": "genes", "relax_steps": 0})
    state = model.type_c1(model.place_cells(cfg), cfg.mechanics.c1_height)
    out = []
    for n in (1, 2):
        with threads(n):
            eng = CompiledEngine(cfg, clone(state))
            eng.advance(40)
            out.append(eng.state())
    for key in KEYS:
        assert np.array_equal(out[0][key], out[1][key]), key


def test_a_blown_up_tissue_raises_the_numpy_engines_error():
    cfg = config(tissue={"cells": 4, "pitch": 8.0}, run={"mode": "movement"},
                 mechanics={"intra": model.Morse(5e3, 1.0, 1.0, 2.0)})
    st = random_state(cfg, np.random.default_rng(12), per_cell=8, spread=1.0)
    eng = CompiledEngine(cfg, st)
    with pytest.raises(model.BlownUpError, match=r"step 0: element \d+ of cell \d+ moved"):
        eng.advance(3)
    assert eng.step == 0


def test_a_state_with_nan_raises_naming_the_cell():
    cfg = config(tissue={"cells": 4}, run={"mode": "movement"})
    state = model.type_c1(model.place_cells(cfg), cfg.mechanics.c1_height)
    state["pos"][0, 1, 2] = np.nan
    eng = CompiledEngine(cfg, state)
    with pytest.raises(model.BlownUpError, match="cell 2"):
        eng.advance(3)
    assert eng.step == 0


def test_compile_time_is_reported():
    cfg = config(tissue={"cells": 4}, run={"mode": "movement"})
    eng = CompiledEngine(cfg, model.place_cells(cfg))
    assert eng.compile_seconds > 0.0
