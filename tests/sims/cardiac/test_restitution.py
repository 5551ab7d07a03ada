"""Restitution protocols: the stimuli they make, and the two APD definitions on the issue's
CRN S2 beat (330 ms coupling: apd90_ms 177 ms, S1-referenced 215.5 ms)."""

import numpy as np
import pytest

from app.sims.cardiac.restitution import pulses
from app.sims.common.config import ConfigError

from .helpers import config, run

S1S2 = """mesh: {kind: single}
restitution: {kind: s1s2, s1_count: 1, s2_intervals: [330], start: 1, amplitude: -20, duration: 2}
solver: {method: bs32, dt: 0.01, at: 1.0e-4, rt: 1.0e-5, dt_max: 5.0, precision: float64}
output: {random_probes: 0, probe_cells: [0], dt_save: 0}
"""


def test_protocols_make_the_stimuli_and_run_length():
    cfg = config(S1S2.replace("s1_count: 1, s2_intervals: [330]", "s1_count: 3, s2_intervals: [400, 300]"))
    names = [(s.name, s.start, s.count, s.period) for s in cfg.protocol.stimuli]
    assert names == [("S1 400", 1.0, 3, 1000.0), ("S2 400", 2401.0, 1, 400.0),
                     ("S1 300", 3401.0, 3, 1000.0), ("S2 300", 5701.0, 1, 300.0)]
    assert cfg.protocol.t_end == 6701.0
    dyn = pulses("dynamic", 1000, 1, [], [500, 800], 3)
    assert [(p.start, p.role) for p in dyn] == [(50, "beat"), (850, "beat"), (1650, "last"),
                                                (2450, "beat"), (2950, "beat"), (3450, "last")]
    with pytest.raises(ConfigError, match="s2_intervals"):
        config(S1S2.replace("[330]", "[]"))


def test_s2_beat_apd_by_both_definitions_matches_the_issue():
    arrays, summary = run(S1S2, "cpu")
    (row,) = summary["restitution"]["rows"]
    assert row["interval_ms"] == 330.0
    assert row["apd90_per_beat_ms"] == pytest.approx(177.0, rel=0.01)
    assert row["apd90_s1_ms"] == pytest.approx(215.5, rel=0.01)
    # DI: S2's upstroke minus the S1 beat's repolarisation (S1 own = S1-referenced for S1)
    assert row["di_s1_ms"] == pytest.approx(row["di_per_beat_ms"])
    assert 0 < row["di_s1_ms"] < 330.0 - 250.0
    np.testing.assert_array_equal(arrays["restitution_apd90_s1_ms"], [row["apd90_s1_ms"]])
    assert "per_beat" in summary["restitution"]["definitions"]
