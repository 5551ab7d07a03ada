"""A run that starts on the NumPy reference engine and is handed over to the compiled engine
(state() / restore() between slices) gives the results of a run on the compiled engine alone.
SSA and the network engines are bitwise twins (integer states, the same Philox draws, the
same arithmetic order), so the results must be equal, not close."""

from __future__ import annotations

import numpy as np
import pytest

from app.sims.common import session as session_module
from app.sims.common.session import Session
from app.sims.common.simulation import PRESETS, load_run_config
from app.sims.common.warmup import Preparation

TIMING = {"epoch_wall_seconds"}        # wall clocks, not results


class ReadyAfter:
    """A compile service whose engine is ready after ``n`` status checks (a slice each)."""

    def __init__(self, n: int):
        self.n, self.checks = n, 0

    def request(self, domain, cfg=None):
        return Preparation(domain, "preparing", 1)

    def status(self, domain):
        self.checks += 1
        return Preparation(domain, "ready" if self.checks > self.n else "preparing", 1)

    def mark_ready(self, domain, seconds):
        pass

    def hold(self, domain):
        pass

    def release(self, domain):
        pass


@pytest.mark.parametrize("domain_name,preset,overrides", [
    ("ssa", "birth-death.yaml", ["ensemble.realizations=64", "ensemble.samples=201"]),
    ("network", "00-development-10x10-fast.yaml", ["run.epochs=2"]),
])
def test_a_handed_over_run_equals_a_compiled_run(monkeypatch, domain_name, preset, overrides):
    domain, cfg = load_run_config(PRESETS / domain_name / preset, overrides=overrides)
    monkeypatch.setattr(session_module, "service", lambda: fake)
    fake = ReadyAfter(3)
    handed = Session(domain, cfg, "cpu")
    handed.run()
    engines = handed.summary["engines"]
    assert engines["started_on"] == "cpu-reference" and engines["finished_on"] == "cpu"
    assert 0 < engines["handed_over"]["progress"] < 1
    alone = Session(domain, cfg, "cpu", handover=False)
    alone.run()
    assert "engines" not in alone.summary
    assert handed.arrays.keys() == alone.arrays.keys()
    for key in handed.arrays.keys() - TIMING:
        assert np.array_equal(handed.arrays[key], alone.arrays[key]), key


def test_a_failed_preparation_leaves_the_run_on_the_reference_engine(monkeypatch):
    domain, cfg = load_run_config(PRESETS / "ssa" / "birth-death.yaml",
                                  overrides=["ensemble.realizations=16", "ensemble.samples=21"])

    class Failed(ReadyAfter):
        def status(self, domain):
            return Preparation(domain, "failed", message="no compiler")

    monkeypatch.setattr(session_module, "service", lambda: Failed(0))
    session = Session(domain, cfg, "cpu")
    session.run()
    assert session.summary["finished"]
    assert session.summary["engines"] == {"started_on": "cpu-reference", "finished_on": "cpu-reference"}


def test_a_run_that_ends_before_its_compiled_engine_is_ready_does_not_say_it_waits(monkeypatch):
    """Frames while the compile runs say so in their status; the last frame of a run that
    finished on the reference engine meanwhile waits for nothing and does not."""
    domain, cfg = load_run_config(PRESETS / "ssa" / "birth-death.yaml",
                                  overrides=["ensemble.realizations=16", "ensemble.samples=21"])
    monkeypatch.setattr(session_module, "service", lambda: ReadyAfter(10 ** 9))
    statuses = []
    session = Session(domain, cfg, "cpu", on_frame=lambda frame: statuses.append(frame.status))
    session.run()
    assert session.summary["engines"]["finished_on"] == "cpu-reference"
    assert len(statuses) > 1 and all("preparing" in s for s in statuses[:-1])
    assert "preparing" not in statuses[-1]
