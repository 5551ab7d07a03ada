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


OTHER_MODELS = ["beeler_reuter_model_1977", "hodgkin_huxley_squid_axon_model_1952_modified",
                "luo_rudy_1991", "mahajan_shiferaw_2008", "maleckar_model_2009", "noble_model_1962",
                "nygren_atrial_model_1998", "ohara_rudy_2011_endo", "ten_tusscher_model_2006_epi",
                "courtemanche_1998_ikach"]


@pytest.mark.parametrize("name", OTHER_MODELS)
def test_every_shipped_model_compiles(name):
    """Each shipped model's generated kernel (RLFE, float32, the GPU default; with the first
    parameter varying per cell, as a parameter region makes it) compiles with one compiler:
    the printed model is what differs between models, the template is covered above."""
    from app.compute import compilers
    from app.compute.kernels import _options
    from app.sims.cardiac.cuda import model_kernel_source
    from app.sims.cardiac.model import load_model
    model = load_model(name)
    src, defines = model_kernel_source(model, METHODS["rlfe"], "float", 1000, 6, 4, 2,
                                       varying=(0,) if model.parameters else ())
    compiler = compilers.available()[0]
    assert compiler.compile(src, "cardiac.cu", _options(defines, True), 90).data


@pytest.mark.parametrize("real,compute", [("float", "float"), ("double", "double"), ("double", "float")])
@pytest.mark.parametrize("name", ["ohara_rudy_2011_endo", "courtemanche_ramirez_nattel_1998"])
def test_lookup_table_variant_compiles(name, real, compute):
    """Voltage lookup tables (solver.lookup_tables) with the RLFE gate updates, in each
    precision (double states with a float model: mixed): the table branch and the direct one."""
    from app.compute import compilers
    from app.compute.kernels import _options
    from app.sims.cardiac.cuda import model_kernel_source
    from app.sims.cardiac.model import LookupSpec, load_model
    model = load_model(name).with_lookup(LookupSpec(), varying=(0,), rl_step=0.01)
    src, defines = model_kernel_source(model, METHODS["rlfe"], real, 1000, 6, 4, 2, varying=(0,), compute=compute)
    assert "__ldg(lut_r" in src and "c_lut" in src
    compiler = compilers.available()[0]
    assert compiler.compile(src, "cardiac.cu", _options(defines, True), 90).data
