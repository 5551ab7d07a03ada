"""Example domains from outside ``app``, registered the way a third-party package is."""

from __future__ import annotations

from contextlib import contextmanager
from importlib import metadata
from typing import Iterator

from app.sims.common import registry

DECAY_ENTRY_POINT = metadata.EntryPoint(name="decay", value="tests.plugins.decay.manifest:DOMAIN",
                                        group=registry.ENTRY_POINT_GROUP)


@contextmanager
def installed(*entries: metadata.EntryPoint) -> Iterator[None]:
    """The registry as it reads with ``entries`` installed (as ``pip install`` of a package
    declaring them in ``[project.entry-points."biogpu.domains"]`` would add them)."""
    real = registry.entry_points
    registry.entry_points = lambda group: [e for e in entries if e.group == group]
    try:
        registry.DOMAINS.reload()
        yield
    finally:
        registry.entry_points = real
        registry.DOMAINS.reload()
