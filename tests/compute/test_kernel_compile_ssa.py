"""The SSA kernel, in every generated variant, compiles for sm_90 with NVRTC and with nvcc
(each where it is installed; CI has both)."""

import pytest

from app.compute.kernels import compile_with_every_compiler, compiler_available
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

