"""Every kernel source, and every generated variant, compiles with plain nvcc for sm_90."""

import pytest

from app.compute.kernels import KERNEL_DIR, KernelCompileError, compile_cubin, nvcc_available
from app.sims.common.simulation import load_run_config, presets
from app.sims.ssa.codegen import kernel_source
from app.sims.ssa.config import ALGORITHMS

pytestmark = pytest.mark.skipif(not nvcc_available(), reason="nvcc not on PATH")


def ssa_variants():
    for path in presets("ssa"):
        for algorithm in ALGORITHMS:
            yield pytest.param(path, algorithm, id=f"{path.stem}-{algorithm}")


@pytest.mark.parametrize("path,algorithm", list(ssa_variants()))
def test_ssa_variants_compile(path, algorithm):
    _, cfg = load_run_config(path)
    net = cfg.network()
    source = kernel_source(net, cfg.histogram_indices(net), algorithm)
    assert compile_cubin(source, "ssa.cu", {"SSA_BINS": cfg.ensemble.histogram_bins})


# Each kernels/<domain>.cu is compiled, with every generated variant, by tests/compute/
# test_kernel_compile_<domain>.py (ssa here). A new kernel file must be added to this set
# together with its compile test.
COVERED = {"ssa.cu", "channel.cu", "cardiac.cu", "network.cu", "epidermis.cu"}


def test_every_kernel_file_is_covered():
    assert {p.name for p in KERNEL_DIR.glob("*.cu")} <= COVERED


def test_compile_error_carries_nvcc_log():
    with pytest.raises(KernelCompileError) as info:
        compile_cubin('extern "C" __global__ void k() { undeclared_name = 1; }', "broken.cu")
    assert "undeclared_name" in info.value.log
