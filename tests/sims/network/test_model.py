"""The culture model: overlap areas, growth law, layout, Tsodyks-Markram, LIF integration."""

from math import pi

import numpy as np
import pytest

from app.sims.network.model import (LAYOUT_DIR, NEVER, build_culture, connectivity, detect_bursts,
                                    grow_radii, outgrowth, overlap_area, read_index_list,
                                    reference_layout, tm_deliver)

from .helpers import config, engine


def lens_reference(r, R, d):
    """The textbook lens area (two circular segments, Heron term)."""
    if d >= r + R:
        return 0.0
    if d <= abs(R - r):
        return pi * min(r, R) ** 2
    t1 = r * r * np.arccos((d * d + r * r - R * R) / (2 * d * r))
    t2 = R * R * np.arccos((d * d + R * R - r * r) / (2 * d * R))
    t3 = 0.5 * np.sqrt((-d + r + R) * (d + r - R) * (d - r + R) * (d + r + R))
    return t1 + t2 - t3


def test_overlap_area_matches_the_lens_formula_on_random_pairs():
    rng = np.random.default_rng(1)
    ri, rj = rng.uniform(0.05, 5, 5000), rng.uniform(0.05, 5, 5000)
    d = rng.uniform(0.01, 10, 5000)
    got = overlap_area(ri, rj, d)
    want = np.array([lens_reference(a, b, c) for a, b, c in zip(ri, rj, d)])
    assert np.allclose(got, want, rtol=1e-9, atol=1e-12)
    assert (got == 0).any() and (got > 0).any()


def test_overlap_area_containment_tangency_and_symmetry():
    # external tangency: no overlap; internal tangency and containment: the small disc
    assert overlap_area(1.0, 2.0, 3.0) == 0.0
    assert overlap_area(1.0, 3.0, 2.0) == pytest.approx(pi)
    assert overlap_area(0.5, 3.0, 1.0) == pytest.approx(pi * 0.25)
    assert overlap_area(3.0, 0.5, 1.0) == pytest.approx(pi * 0.25)
    # just inside external tangency: a thin lens, continuous at 0
    assert 0 < overlap_area(1.0, 2.0, 3.0 - 1e-6) < 1e-6
    # continuity at internal tangency
    assert overlap_area(1.0, 3.0, 2.0 + 1e-9) == pytest.approx(pi, rel=1e-6)
    rng = np.random.default_rng(2)
    a, b, d = rng.uniform(0.1, 3, (3, 200))
    assert np.array_equal(overlap_area(a, b, d), overlap_area(b, a, d))
    # the paper's example: two r = 1 circles one unit apart share 1.228 unit^2
    assert overlap_area(1.0, 1.0, 1.0) == pytest.approx(1.2284, abs=1e-4)


def test_overlap_area_against_monte_carlo():
    rng = np.random.default_rng(3)
    r, R, d = 1.3, 0.9, 1.5
    pts = rng.uniform([-r, -r], [r, r], (400000, 2))
    inside = (pts ** 2).sum(1) < r * r
    inside &= ((pts - [d, 0]) ** 2).sum(1) < R * R
    mc = inside.mean() * (2 * r) ** 2
    se = np.sqrt(inside.mean() * (1 - inside.mean()) / pts.shape[0]) * (2 * r) ** 2
    assert abs(overlap_area(r, R, d) - mc) < 4 * se


def test_outgrowth_law():
    g = config().growth
    assert outgrowth(np.array([g.target_rate]), g)[0] == pytest.approx(0.0, abs=1e-12)
    assert outgrowth(np.array([0.0]), g)[0] == pytest.approx(1 - 2 / (1 + np.exp(6.0)))
    assert outgrowth(np.array([100.0]), g)[0] < -0.99
    # silent cells grow 0.00995 per 100-s epoch and first touch at distance 1 after 11 epochs
    r = np.full(2, g.start_radius)
    for epoch in range(1, 12):
        r = grow_radii(r, np.zeros(2), g, 100.0)
        assert (r.sum() > 1.0) == (epoch >= 11)


def test_silent_culture_grows_until_circles_overlap():
    cfg = config(culture={"width": 3, "height": 3, "starter_fraction": 0.0, "layout": "random"})
    eng = engine(cfg)
    assert eng.n_synapses == 0
    for epoch in range(1, 12):
        eng.grow(100.0)
        assert (eng.n_synapses > 0) == (epoch >= 11), epoch
    conn = eng.connectivity()
    d = np.hypot(*(np.array(divmod(conn.pre, 3)) - np.array(divmod(conn.post, 3))))
    assert np.allclose(d, 1.0)      # only nearest neighbours touch first
    assert eng.n_synapses == 2 * 12  # 12 grid edges of a 3x3 grid, both directions


def test_connectivity_weights_sign_and_order():
    inh = np.zeros(25, bool)
    inh[12] = True
    rad = np.random.default_rng(4).uniform(0.3, 1.6, 25)
    conn = connectivity(5, 5, rad, inh, 1e-8)
    x, y = np.arange(25) % 5, np.arange(25) // 5
    for pre, post, w in zip(conn.pre, conn.post, conn.W):
        d = np.hypot(x[pre] - x[post], y[pre] - y[post])
        area = overlap_area(rad[pre], rad[post], d)
        assert area > 0 and w == pytest.approx(area * 1e-8 * (-1 if pre == 12 else 1))
    # every overlapping pair is present, in (post, pre) order
    dense = [(j, i) for i in range(25) for j in range(25)
             if i != j and overlap_area(rad[i], rad[j], np.hypot(x[i] - x[j], y[i] - y[j])) > 0]
    assert list(zip(conn.pre, conn.post)) == sorted(dense, key=lambda p: (p[1], p[0]))


def test_reference_layout_reproduces_braingrid_lists():
    inh, act = reference_layout(100, 100)
    assert np.array_equal(np.flatnonzero(inh), np.sort(read_index_list(LAYOUT_DIR / "inhNList_0.98_10000.xml")))
    assert np.array_equal(np.flatnonzero(act), np.sort(read_index_list(LAYOUT_DIR / "activeNList_0.10_10000.xml")))
    assert inh.sum() == 200 and act.sum() == 1000 and not (inh & act).any()


def test_random_layout_fractions_and_starter_constants():
    cfg = config(culture={"width": 40, "height": 25, "layout": "random", "seed": 5})
    c = build_culture(cfg)
    assert c.inhibitory.sum() == 20 and c.starter.sum() == 100
    assert not (c.inhibitory & c.starter).any()
    n = cfg.neuron
    assert ((c.vthresh[c.starter] >= n.starter_Vthresh_min) & (c.vthresh[c.starter] <= n.starter_Vthresh_max)).all()
    assert (c.vthresh[~c.starter] == n.Vthresh).all()
    assert set(c.trefract[c.inhibitory]) == {20} and set(c.trefract[~c.inhibitory]) == {30}
    assert np.array_equal(build_culture(cfg).vthresh, c.vthresh)


def test_tm_recursion_closed_form():
    U, D, F, T = 0.5, 1.1, 0.05, 0.02
    u, r = tm_deliver(0.3, 0.7, (NEVER * -1) * 1e-4, U, D, F)
    assert (u, r) == (U, 1.0)       # first delivery: u = U, r = 1
    us, rs = [u], [r]
    for _ in range(40):
        u, r = tm_deliver(u, r, T, U, D, F)
        us.append(u)
        rs.append(r)
    # steady state of the recursion (Tsodyks & Markram 1997, Markram et al. 1998)
    ef, ed = np.exp(-T / F), np.exp(-T / D)
    u_inf = U / (1 - (1 - U) * ef)
    r_inf = (1 - ed) / (1 - (1 - u_inf) * ed)
    assert us[-1] == pytest.approx(u_inf, rel=1e-9) and rs[-1] == pytest.approx(r_inf, rel=1e-9)


def test_detect_bursts():
    counts = np.array([0, 5, 6, 0, 0, 9, 0, 7, 7, 7])
    assert list(detect_bursts(counts, 5)) == [1, 5, 7]
    assert detect_bursts(np.zeros(4), 1).size == 0
