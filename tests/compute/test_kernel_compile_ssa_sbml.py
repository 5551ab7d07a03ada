"""The SSA kernel generated for imported SBML models (general laws, events, assignment rules)
compiles for sm_90 with NVRTC and nvcc (each where present)."""

from pathlib import Path

import pytest

from app.compute.kernels import compile_with_every_compiler, compiler_available
from app.sims.ssa.codegen import kernel_source
from app.sims.ssa.dsmts import suite_dir

pytest.importorskip("libsbml")
pytestmark = pytest.mark.skipif(not compiler_available(), reason="no CUDA compiler (NVRTC or nvcc) here")

MODELS = [Path(__file__).parents[1] / "sims" / "ssa" / "data" / "hill-events.xml"]
DSMTS = suite_dir() / "00019" / "00019-sbml-l3v2.xml"


@pytest.mark.parametrize("path", MODELS + ([DSMTS] if DSMTS.exists() else []), ids=lambda p: p.stem)
@pytest.mark.parametrize("algorithm", ["direct", "logdirect"])
def test_sbml_variants_compile(path, algorithm):
    from app.sims.ssa.sbml import read_sbml

    net = read_sbml(path).require_network()
    assert compile_with_every_compiler(kernel_source(net, [0, 1], algorithm), "ssa.cu", {"SSA_BINS": 64})


def test_guarded_law_compiles():
    """A constant-rate drain (a law that does not vanish when X runs out) gets its guard."""
    from app.sims.ssa.sbml import read_sbml_string
    from tests.sims.ssa.test_sbml import CONSTANT_DRAIN, sbml

    net = read_sbml_string(sbml(reactions=CONSTANT_DRAIN, parameters='<parameter id="k" value="40" '
                                                                      'constant="true"/>')).require_network()
    source = kernel_source(net, [0], "direct")
    assert "(x[0] >= 1 ? 1.f : 0.f)" in source
    assert compile_with_every_compiler(source, "ssa.cu", {"SSA_BINS": 64})
