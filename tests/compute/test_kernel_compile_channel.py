"""kernels/channel.cu compiles with plain nvcc for sm_90 for every shipped model."""

import pytest

from app.compute.kernels import compile_with_every_compiler, compiler_available
from app.sims.channel.codegen import kernel_source
from app.sims.channel.model import ChannelSpec, compile_model
from app.sims.common.config import build, load_yaml
from app.sims.common.simulation import RESOURCES

pytestmark = pytest.mark.skipif(not compiler_available(), reason="no CUDA compiler (NVRTC or nvcc) here")

MODELS = sorted((RESOURCES / "models" / "channel").glob("*.yaml"))


@pytest.mark.parametrize("path", MODELS, ids=[p.stem for p in MODELS])
def test_channel_model_compiles(path):
    doc = load_yaml(path)
    model = compile_model(build(ChannelSpec, doc.data, doc), doc, ())
    assert compile_with_every_compiler(kernel_source(model), "channel.cu", fast_math=False)


def test_model_with_every_function_compiles():
    """pow, min, max, where, expm1, abs, log, sqrt and a helper rate (the export test's model)."""
    from tests.sims.channel.test_export import HELPERS
    model = compile_model(HELPERS)
    assert compile_with_every_compiler(kernel_source(model), "channel.cu", fast_math=False)
