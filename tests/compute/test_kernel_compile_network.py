"""kernels/network.cu compiles with plain nvcc for sm_90 for every chunk length it can get."""

import pytest

from app.compute.kernels import compile_cubin, nvcc_available
from app.sims.network.cuda import kernel_source

pytestmark = pytest.mark.skipif(not nvcc_available(), reason="nvcc not on PATH")


@pytest.mark.parametrize("chunk,lanes", [(1, 8), (9, 8), (16, 8), (9, 1), (9, 32)])
def test_network_kernel_compiles(chunk, lanes):
    assert compile_cubin(kernel_source(), "network.cu", {"NET_CHUNK": chunk, "NET_LANES": lanes})
