"""The single-cell restitution presets do what their descriptions say (CPU engine, as shipped).

Both run whole: the CRN S1-S2 protocol (6 coupling intervals x 9 beats) and the O'Hara-Rudy
dynamic protocol (5 periods x 10 beats), so both are `slow`.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from app.sims.cardiac.simulation import CardiacSimulation
from app.sims.common.simulation import PRESETS, find_preset, load_run_config


def run(name: str):
    _, cfg = load_run_config(find_preset(name))
    sim = CardiacSimulation.from_config(cfg, "cpu")
    while not sim.finished:
        sim.advance()
    arrays, summary = sim.results()
    sim.close()
    return cfg, arrays, summary


@pytest.mark.slow
def test_crn_s1s2_restitution_curve_with_both_definitions():
    """20-restitution-crn-s1s2: one row per coupling interval, 600 down to 310 ms, each with
    APD90 and DI by both definitions, the S1-referenced one shown; every S2 captures (even at
    310 ms, a 13-ms DI: peak -6 mV, APD90 200 ms), and APD90 shortens with the DI."""
    cfg, arrays, summary = run("cardiac/20-restitution-crn-s1s2")
    res = summary["restitution"]
    assert res["apd_shown"] == "s1"
    rows = res["rows"]
    assert [r["interval_ms"] for r in rows] == [600.0, 450.0, 400.0, 350.0, 330.0, 310.0]
    for key in ("apd90_per_beat_ms", "di_per_beat_ms", "apd90_s1_ms", "di_s1_ms"):
        assert np.isfinite(arrays[f"restitution_{key}"]).all() and arrays[f"restitution_{key}"].size == 6
    assert (arrays["restitution_apd90_s1_ms"] > 150.0).all()       # every S2 gave an action potential
    di, apd = arrays["restitution_di_s1_ms"], arrays["restitution_apd90_s1_ms"]
    assert (np.diff(di) < 0).all() and (np.diff(apd) < 0).all()    # shorter DI, shorter APD


@pytest.mark.slow
def test_ord_dynamic_restitution_last_beat_of_each_period():
    """21-restitution-ord-dynamic: ten beats at each period, 1000 down to 400 ms; the last beat
    of each is measured, both definitions written, the per-beat one shown; the steady APD90
    shortens with the period."""
    cfg, arrays, summary = run("cardiac/21-restitution-ord-dynamic")
    res = summary["restitution"]
    assert res["apd_shown"] == "per_beat"
    rows = res["rows"]
    assert [r["interval_ms"] for r in rows] == [1000.0, 800.0, 600.0, 500.0, 400.0]
    assert all(r["protocol"] == "dynamic" and r["peak_mV"] > 0 for r in rows)
    apd = arrays["restitution_apd90_per_beat_ms"]
    assert np.isfinite(arrays["restitution_apd90_s1_ms"]).all()
    assert (np.diff(apd) < 0).all() and (apd < np.array([1000, 800, 600, 500, 400])).all()


def test_noble_preset_beats_on_its_own_about_every_564_ms():
    """12-noble-1962-single-cell: no stimulus, "the model beats on its own, about every 564
    ms"; its second beat's upstroke is where the CVODE reference puts it (769.3 ms)."""
    cfg, arrays, _ = run("cardiac/12-noble-1962-single-cell")
    assert not cfg.protocol.stimuli
    t, v = arrays["probe_t"], arrays["probe_V"][:, 0]
    up = t[1:][(v[:-1] < 0.0) & (v[1:] >= 0.0)]
    assert up.size == 3                                            # 1.5 s: three spontaneous beats
    np.testing.assert_allclose(np.diff(up), 564.0, atol=5.0)
    assert up[2] + 400.0 > cfg.protocol.t_end > up[1] + 400.0      # the second: the last followed by 400 ms
    ref = json.loads((PRESETS.parent / "reference" / "cardiac" / "noble_model_1962.json").read_text())
    assert up[1] == pytest.approx(ref["last"]["t_upstroke_ms"], abs=5.0)
