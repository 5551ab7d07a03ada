"""Shared fixtures: the gpu marker skips where CUDA cannot run, and pushes a context where it can."""

from __future__ import annotations

import pytest

try:   # libSEDML before libSBML (test modules import libSBML at collection): see app.sims.ssa.sbml._libsbml
    import libsedml  # noqa: F401
except ImportError:
    pass

from app.compute.device import backend_context, cuda_status


def pytest_collection_modifyitems(config, items):
    status = cuda_status()
    if status.available:
        return
    skip = pytest.mark.skip(reason=f"CUDA not available: {status.reason}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def cuda_context():
    """The primary context of device 0, pushed for the test (gpu tests only)."""
    with backend_context("cuda"):
        yield
