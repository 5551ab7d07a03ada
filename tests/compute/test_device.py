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


def test_auto_takes_the_cpu_for_a_run_the_domain_runs_faster_there(monkeypatch):
    """With a GPU, 'auto' still runs a cardiac single cell on the CPU (one GPU thread is
    hundreds of times slower than CVODE) and says why; a sheet, or 'cuda' asked for by name,
    goes to the GPU."""
    from app.sims.cardiac.config import load_config
    from app.sims.common.config import parse_yaml
    from app.sims.common.registry import DOMAINS

    gpu = device.Device("cuda", 0, "a test GPU")
    monkeypatch.setattr(device, "cuda_status", lambda: device.CudaStatus(True, "", (gpu,)))
    cardiac = DOMAINS["cardiac"]
    single = load_config(parse_yaml("domain: cardiac\nmesh: {kind: single}\n"))
    sheet = load_config(parse_yaml("domain: cardiac\nmesh: {kind: sheet, nx: 20, ny: 20}\n"))
    backend, reason = device.resolve_backend("auto", cardiac.cpu_preference(single))
    assert backend == "cpu" and "single cell" in reason
    assert device.resolve_backend("cuda", cardiac.cpu_preference(single))[0] == "cuda"
    assert cardiac.cpu_preference(sheet) is None
    assert device.resolve_backend("auto", cardiac.cpu_preference(sheet))[0] == "cuda"
    assert DOMAINS["ssa"].cpu_preference(object()) is None
