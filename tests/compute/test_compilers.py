"""NVRTC and nvcc (no GPU needed): images, errors with the compiler's log, the choice."""

import pytest

from app.compute import compilers
from app.compute.kernels import KernelCompileError, compile_image, read_kernel

SMALL = r'''
#include "philox.cuh"
extern "C" __global__ void fill(unsigned int* out, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = philox_draw(SEED, (unsigned long long)i, 0ull).x;
}
'''

AVAILABLE = compilers.available()
pytestmark = pytest.mark.skipif(not AVAILABLE, reason="no CUDA compiler (NVRTC or nvcc) here")


@pytest.fixture(params=[c.name for c in AVAILABLE])
def compiler(request):
    return compilers.find(request.param)


def test_cubin_for_a_known_architecture(compiler, tmp_path, monkeypatch):
    monkeypatch.setenv("BIOGPU_CACHE_DIR", str(tmp_path))
    image = compile_image(SMALL, "small.cu", {"SEED": 7}, 90, compiler=compiler)
    assert image.kind == "cubin" and image.arch == 90
    assert image.data[:4] == b"\x7fELF"


def test_ptx_for_a_device_newer_than_the_compiler(compiler, tmp_path, monkeypatch):
    monkeypatch.setenv("BIOGPU_CACHE_DIR", str(tmp_path))
    newest = max(compiler.supported_archs())
    image = compile_image(SMALL, "small.cu", {"SEED": 7}, newest + 1, compiler=compiler)
    assert image.kind == "ptx" and image.arch == newest
    assert b".entry fill" in image.data
    with pytest.raises(KernelCompileError, match="cannot build for sm_10"):
        compile_image(SMALL, "small.cu", {"SEED": 7}, 10, compiler=compiler)


def test_compile_error_carries_the_log_and_the_file_name(compiler, tmp_path, monkeypatch):
    monkeypatch.setenv("BIOGPU_CACHE_DIR", str(tmp_path))
    with pytest.raises(KernelCompileError) as err:
        compile_image(SMALL.replace("out[i]", "undeclared_name[i]"), "broken.cu", {"SEED": 7},
                      90, compiler=compiler)
    assert "undeclared_name" in err.value.log and "broken.cu" in str(err.value)


def test_every_shipped_kernel_header_works_without_the_c_library(compiler, tmp_path, monkeypatch):
    """NVRTC has no <stdint.h>: kernels include portable.cuh, which both compilers accept."""
    monkeypatch.setenv("BIOGPU_CACHE_DIR", str(tmp_path))
    source = '#include "portable.cuh"\n#include "reduce.cuh"\n' + SMALL
    assert compile_image(source, "headers.cu", {"SEED": 1}, 90, compiler=compiler).data
    assert "portable.cuh" in read_kernel("ssa.cu")


def test_choice_follows_the_setting(monkeypatch):
    monkeypatch.setenv("BIOGPU_COMPILER", "fortran")
    chosen, reason = compilers.choose()
    assert chosen is None and "BIOGPU_COMPILER must be one of" in reason
    for c in AVAILABLE:
        monkeypatch.setenv("BIOGPU_COMPILER", c.name)
        chosen, reason = compilers.choose()
        assert chosen.name == c.name and "asked for" in reason
    monkeypatch.delenv("BIOGPU_COMPILER")
    assert compilers.choose()[0].name == AVAILABLE[0].name      # NVRTC first where present


def test_a_missing_compiler_asked_for_is_named(monkeypatch):
    monkeypatch.setattr(compilers, "find", lambda name: None)
    monkeypatch.setenv("BIOGPU_COMPILER", "nvrtc")
    chosen, reason = compilers.choose()
    assert chosen is None and "nvidia-cuda-nvrtc" in reason
