"""Every kernel source, and every generated variant, compiles for sm_90 with NVRTC and with nvcc
(each where it is installed; CI has both)."""

from pathlib import Path

import pytest

from app.compute.kernels import KERNEL_DIR, compile_with_every_compiler, compiler_available
from app.sims.common.simulation import load_run_config, presets
from app.sims.ssa.codegen import kernel_source
from app.sims.ssa.config import ALGORITHMS

pytestmark = pytest.mark.skipif(not compiler_available(), reason="no CUDA compiler (NVRTC or nvcc) here")


def ssa_variants():
    for path in presets("ssa"):
        for algorithm in ALGORITHMS:
            yield pytest.param(path, algorithm, id=f"{path.stem}-{algorithm}")


@pytest.mark.parametrize("path,algorithm", list(ssa_variants()))
def test_ssa_variants_compile(path, algorithm):
    _, cfg = load_run_config(path)
    net = cfg.network()
    source = kernel_source(net, cfg.histogram_indices(net), algorithm)
    assert compile_with_every_compiler(source, "ssa.cu", {"SSA_BINS": cfg.ensemble.histogram_bins})


def test_every_kernel_file_has_a_compile_test():
    """kernels/<name>.cu is compiled, with every generated variant, in this module (ssa) or in
    tests/compute/test_kernel_compile_<name>.py."""
    here = Path(__file__).parent
    for source in KERNEL_DIR.glob("*.cu"):
        assert source.stem == "ssa" or (here / f"test_kernel_compile_{source.stem}.py").exists(), source
