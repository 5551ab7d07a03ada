"""kernels/cardiac.cu compiles with plain nvcc for sm_90 for every method and both precisions."""

import pytest

from app.compute.kernels import compile_with_every_compiler, compiler_available
from app.sims.cardiac.config import load_config
from app.sims.cardiac.cuda import kernel_source
from app.sims.cardiac.engine import Problem
from app.sims.cardiac.solvers import METHODS
from app.sims.common.config import parse_yaml

pytestmark = pytest.mark.skipif(not compiler_available(), reason="no CUDA compiler (NVRTC or nvcc) here")


@pytest.mark.parametrize("precision", ["float32", "float64"])
@pytest.mark.parametrize("method", list(METHODS))
def test_cardiac_variant_compiles(method, precision):
    cfg = load_config(parse_yaml(f"domain: cardiac\nmesh: {{kind: sheet, nx: 10, ny: 10}}\n"
                                 f"solver: {{method: {method}, precision: {precision}}}\n"))
    src, defines = kernel_source(Problem.from_config(cfg))
    assert "/*@" not in src
    assert compile_with_every_compiler(src, "cardiac.cu", defines)
