"""Helpers of the steering tests: a run steered through its Session while it runs, and its
replay from the ``config.yaml`` text it would write."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from app.sims.common.config import dump_yaml
from app.sims.common.session import Session
from app.sims.common.simulation import Domain, load_run_config

TIMING = {"epoch_wall_seconds", "wall_seconds", "history_wall_seconds"}     # wall clocks, not results


def run_steered(domain: Domain, cfg: Any, backend: str,
                plan: Sequence[tuple[int, str, Any, dict | None]], **kwargs: Any) -> Session:
    """Run ``cfg``, steering ``(frame number, key, value, region)`` from the frame callback
    (as the GUI does from its thread: the change waits for the next step boundary)."""
    session = Session(domain, cfg, backend, handover=False, **kwargs)
    frames = [0]

    def on_frame(frame) -> None:
        for n, key, value, region in plan:
            if n == frames[0]:
                session.steer(key, value, region)
        frames[0] += 1

    session.on_frame = on_frame
    session.run()
    assert len(session.events) == len(plan), session.events
    return session


def replay(session: Session, backend: str | None = None) -> Session:
    """The run of the steered session's config.yaml text (through YAML, as a run folder has it)."""
    domain, cfg = load_run_config(dump_yaml(session.steered_config()), text=True)
    again = Session(domain, cfg, backend or session.backend, handover=False)
    again.run()
    return again


def assert_same_arrays(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> None:
    """Every result array bit for bit (wall clocks aside; NaN where NaN)."""
    assert a.keys() == b.keys()
    for key in a.keys() - TIMING:
        x, y = np.asarray(a[key]), np.asarray(b[key])
        assert np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), key


def assert_continue_alike(sim: Any, resumed: Any) -> None:
    """A simulation and its restored checkpoint, both run to the end, give the same results."""
    for s in (sim, resumed):
        while not s.finished:
            s.advance()
    assert_same_arrays(sim.results()[0], resumed.results()[0])
