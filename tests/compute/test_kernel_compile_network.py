"""kernels/network.cu compiles with plain nvcc for sm_90 for every chunk length it can get."""

import pytest

from app.compute.kernels import compile_with_every_compiler, compiler_available
from app.sims.network.cuda import kernel_source

pytestmark = pytest.mark.skipif(not compiler_available(), reason="no CUDA compiler (NVRTC or nvcc) here")


@pytest.mark.parametrize("chunk,lanes", [(1, 8), (9, 8), (16, 8), (9, 1), (9, 32)])
def test_network_kernel_compiles(chunk, lanes):
    assert compile_with_every_compiler(kernel_source(), "network.cu", {"NET_CHUNK": chunk, "NET_LANES": lanes})
