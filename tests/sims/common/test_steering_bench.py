"""``python -m app bench steering``: the change each case makes and the table it prints."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from app.sims.common.session import Session
from app.sims.common.simulation import PRESETS, load_run_config
from app.sims.common.steering_bench import _region, changes_for, table


def test_a_case_steers_its_named_key_between_two_values():
    domain, cfg = load_run_config(PRESETS / "ssa" / "00-decay-dimerization.yaml")
    session = Session(domain, cfg, "cpu-reference")
    change = changes_for(session, ("rates.decay",), cfg)
    base = float(cfg.network().rates[0])
    (k0, v0, r0), (k1, v1, r1) = change(None, 0), change(None, 1)
    assert (k0, k1, r0, r1) == ("rates.decay", "rates.decay", None, None)
    assert v0 == 1.5 * base and v1 == base
    for k in range(2):                                   # every value passes the session's checks
        session.steer(*change(None, k))


def test_a_case_without_its_key_steers_the_first_live_number_of_the_config():
    domain, cfg = load_run_config(PRESETS / "channel" / "lesson-model-a-small.yaml")
    session = Session(domain, cfg, "cpu-reference")
    key, value, _ = changes_for(session, ("no.such.key",), cfg)(None, 0)
    assert key.startswith("ga.") and session.steerables[key].live
    session.steer(key, value)


def test_a_region_gesture_paints_the_middle_of_the_tissue():
    culture = SimpleNamespace(width=10, height=6)
    assert _region(culture) == {"kind": "brush", "centre": [5.0, 3.0], "radius": 2.0}
    mesh = SimpleNamespace(mesh=SimpleNamespace(positions=np.array([[0.0, 0, 0], [1, 0, 0], [2, 0, 0]])))
    assert _region(mesh) == {"kind": "brush", "centre": [1.0, 0.0, 0.0], "radius": 0.4}


def test_the_table_marks_a_case_over_its_target():
    rows = [{"domain": "ssa", "backend": "cpu", "case": "rates.decay", "median_ms": 300.0, "max_ms": 400.0,
             "target_ms": 250.0},
            {"domain": "network", "backend": "cpu", "case": "scale.EE", "median_ms": 100.0, "max_ms": 140.0,
             "target_ms": 250.0},
            {"domain": "cardiac", "backend": "cpu", "error": "RuntimeError: boom"}]
    lines = table(rows).splitlines()
    assert lines[1].endswith("rates.decay [OVER]") and lines[2].endswith("scale.EE [ok]")
    assert "RuntimeError: boom" in lines[3]
