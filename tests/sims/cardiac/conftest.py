"""Fixtures of the cardiac tests."""

import pytest

from .host_cuda import install_host_pycuda


@pytest.fixture
def host_pycuda(monkeypatch, tmp_path):
    """The CUDA engine on host stand-ins for pycuda and the GPU (:mod:`.host_cuda`)."""
    install_host_pycuda(monkeypatch, tmp_path)
