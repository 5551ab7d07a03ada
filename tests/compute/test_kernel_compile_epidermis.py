"""kernels/epidermis.cu compiles with plain nvcc for sm_90 for every variant the engine builds
(boundary x mode x search at the default 40 slots, the slot limits 4 and 64, and the preset
configs), and the PyCUDA argument formats in cuda.py match the kernels' C signatures.

Modes 'genes' and 'full' share one variant (EPI_GENES=1: contact sums and the gene network).
"""

import itertools
import re

import pytest

from app.compute.kernels import compile_with_every_compiler, compiler_available
from app.sims.epidermis.config import BOUNDARIES, MODES, SEARCHES, EpidermisConfig
from app.sims.epidermis.cuda import FORMATS, kernel_defines, kernel_source

assert set(MODES) == {"movement", "genes", "full"}     # VARIANTS covers them with movement, full

needs_compiler = pytest.mark.skipif(not compiler_available(), reason="no CUDA compiler (NVRTC or nvcc) here")


def variant(boundary="periodic", mode="full", search="cell_list", max_elements=40):
    import dataclasses

    cfg = EpidermisConfig()
    cfg = dataclasses.replace(
        cfg, tissue=dataclasses.replace(cfg.tissue, boundary=boundary, max_elements=max_elements,
                                        elements=min(cfg.tissue.elements, max_elements)),
        run=dataclasses.replace(cfg.run, mode=mode, search=search))
    return kernel_defines(cfg)


VARIANTS = [pytest.param(variant(b, m, s), id=f"{b}-{m}-{s}")
            for b, m, s in itertools.product(BOUNDARIES, ("movement", "full"), SEARCHES)]
VARIANTS += [pytest.param(variant(max_elements=4, boundary="none"), id="E4-none"),
             pytest.param(variant(max_elements=64, search="centre_cutoff"), id="E64-centre")]


@needs_compiler
@pytest.mark.parametrize("defines", VARIANTS)
def test_epidermis_kernel_compiles(defines):
    assert compile_with_every_compiler(kernel_source(), "epidermis.cu", defines)


@needs_compiler
def test_preset_variants_compile():
    from app.sims.common.simulation import load_run_config, presets

    seen = {tuple(sorted(p.values[0].items())) for p in VARIANTS}
    for path in presets("epidermis"):
        _, cfg = load_run_config(path)
        defines = tuple(sorted(kernel_defines(cfg).items()))
        if defines not in seen:
            seen.add(defines)
            assert compile_with_every_compiler(kernel_source(), "epidermis.cu", dict(defines)), path


def _signatures(source: str) -> dict[str, str]:
    """extern "C" kernels -> PyCUDA format from their C parameter types."""
    out = {}
    pattern = r'extern "C" __global__ void(?: __launch_bounds__\([^)]*\))?\s+(\w+)\s*\(([^)]*)\)'
    for name, params in re.findall(pattern, source):
        fmt = ""
        for p in params.split(","):
            typ = " ".join(p.replace("__restrict__", "").split()).rsplit(" ", 1)[0]
            typ = typ.replace("const ", "").strip()
            if "*" in typ:
                fmt += "P"
            else:
                fmt += {"int": "i", "float": "f", "double": "d", "unsigned long long": "Q"}[typ]
        out[name] = fmt
    return out


def test_argument_formats_match_the_kernels():
    sig = _signatures(kernel_source())
    assert set(sig) == set(FORMATS)
    for name, fmt in FORMATS.items():
        assert sig[name] == fmt, name
