import pytest

from app.compute import device


def test_cpu_is_always_listed():
    devices = device.list_devices()
    assert devices[-1].backend == "cpu"


def test_resolve_backend_explains_choice():
    backend, reason = device.resolve_backend("auto")
    assert backend in ("cpu", "cuda") and reason
    assert device.resolve_backend("cpu")[0] == "cpu"
    with pytest.raises(ValueError):
        device.resolve_backend("opencl")


def test_cuda_request_without_cuda_says_why(monkeypatch):
    monkeypatch.setattr(device, "cuda_status", lambda: device.CudaStatus(False, "no driver here"))
    with pytest.raises(RuntimeError, match="no driver here"):
        device.resolve_backend("cuda")
    assert device.resolve_backend("auto") == ("cpu", "compiled CPU engine: no driver here")


def test_cpu_reference_is_asked_for_by_name():
    assert device.resolve_backend("cpu-reference")[0] == "cpu-reference"
    assert set(device.BACKENDS) == {"auto", "cpu", "cpu-reference", "cuda"}


def test_cpu_context_is_a_no_op():
    with device.backend_context("cpu"):
        pass
