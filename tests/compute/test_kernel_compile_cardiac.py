"""kernels/cardiac.cu compiles with plain nvcc for sm_90 for every method and both precisions."""

import pytest

from app.compute.kernels import compile_with_every_compiler, compiler_available
from app.sims.cardiac.config import load_config
from app.sims.cardiac.cuda import kernel_source
from app.sims.cardiac.engine import Problem
from app.sims.cardiac.solvers import METHODS
from app.sims.common.config import parse_yaml

pytestmark = pytest.mark.skipif(not compiler_available(), reason="no CUDA compiler (NVRTC or nvcc) here")


@pytest.mark.parametrize("precision", ["float64"])     # every precision: test_model_method_precision_grid_compiles
@pytest.mark.parametrize("method", list(METHODS))
def test_cardiac_variant_compiles(method, precision):
    """The preset's model (CRN) on a sheet, every method, with NVRTC and nvcc."""
    cfg = load_config(parse_yaml(f"domain: cardiac\nmesh: {{kind: sheet, nx: 10, ny: 10}}\n"
                                 f"solver: {{method: {method}, precision: {precision}}}\n"))
    src, defines = kernel_source(Problem.from_config(cfg))
    assert "/*@" not in src
    assert compile_with_every_compiler(src, "cardiac.cu", defines)


@pytest.mark.parametrize("method", ["rlfe", "midpoint", "bs32"])
def test_single_cell_state_recording_compiles(method):
    """A single cell records its every state: fixed steps in the first stage (RECORD_STATES),
    adaptive ones in the control kernel, inside ``steps_one_block`` (FUSED_STEPS)."""
    cfg = load_config(parse_yaml("domain: cardiac\nmesh: {kind: single}\n"
                                 f"solver: {{method: {method}, dt: 0.01, precision: float64}}\n"))
    problem = Problem.from_config(cfg)
    src, defines = kernel_source(problem)
    assert defines.get("RECORD_STATES", 0) == (0 if METHODS[method].adaptive else 1)
    assert defines["NPROBE"] == problem.model.n_states
    assert defines.get("FUSED_STEPS", 0) == (1 if METHODS[method].adaptive else 0)
    assert compile_with_every_compiler(src, "cardiac.cu", defines)


def test_rosenbrock_single_cell_compiles():
    """solver.method rodas4 (a single cell's whole step in one thread of ``steps_one_block``:
    kernels/common/rosenbrock.cuh, the model's field and full Jacobian) with NVRTC and nvcc, on
    the smallest shipped model (the template is what this checks; the corpus models' compile
    times are on the cellml-corpus page)."""
    cfg = load_config(parse_yaml("domain: cardiac\nmodel: {file: beeler_reuter_model_1977}\nmesh: {kind: single}\n"
                                 "solver: {method: rodas4}\n"))
    src, defines = kernel_source(Problem.from_config(cfg))
    assert defines["FUSED_STEPS"] == 1 and "#define ROSENBROCK 1" in src and "model_field_and_jacobian" in src
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


PRECISIONS = [("float", "float"), ("double", "double"), ("double", "float")]   # states, model (mixed)


METHOD_SHIFT = (0, 6, 3)   # per precision: rkf45 in double falls on small models (compile time)


def model_grid():
    """Every shipped model in every precision, and every method in every precision (for each
    precision the 11 models take the 7 methods in turn), alternately with voltage lookup tables
    and as a single cell (NCELLS = 1: no diffusion): 33 variants, not the 231 of the product."""
    from app.sims.cardiac.model import shipped_models
    names = sorted(shipped_models())
    methods = list(METHODS)
    return [(name, methods[(m + METHOD_SHIFT[p]) % len(methods)], PRECISIONS[p], (m + p) % 2 == 0,
             (m + p) % 3 == 0) for p in range(len(PRECISIONS)) for m, name in enumerate(names)]


def test_model_grid_covers_every_pair():
    grid = model_grid()
    assert {(g[0], g[2]) for g in grid} == {(n, p) for n in {g[0] for g in grid} for p in PRECISIONS}
    assert {(g[1], g[2]) for g in grid} == {(m, p) for m in METHODS for p in PRECISIONS}


@pytest.mark.parametrize("name,method,precision,lookup,single", model_grid(),
                         ids=lambda v: v if isinstance(v, str) else "-".join(v) if isinstance(v, tuple) else str(v))
def test_model_method_precision_grid_compiles(name, method, precision, lookup, single):
    """The stage kernels (every load before the model), the adaptive control kernel or the
    fixed-step record kernel, for a model, method and precision (one compiler)."""
    from app.compute import compilers
    from app.compute.kernels import _options
    from app.sims.cardiac.cuda import model_kernel_source
    from app.sims.cardiac.model import LookupSpec, load_model
    model = load_model(name)
    varying = (0,) if model.parameters else ()
    tab = METHODS[method]
    if tab.grl:     # as Problem.from_config builds it
        model = model.with_jacobian()
    if lookup:      # as engine.fused_model builds it: RLFE and GRL1 tabulate the gate updates too
        model = model.with_lookup(LookupSpec(), varying=varying, rl_step=0.01 if tab.stages == 1 and tab.rl else None)
    real, compute = precision
    src, defines = model_kernel_source(model, tab, real, 1 if single else 1000, 6, 4, 2, varying=varying,
                                       compute=compute)
    image = compilers.available()[0].compile(src, "cardiac.cu", _options(defines, True), 90).data
    kernels = {k for k in ("control", "record", *(f"stage{i}" for i in range(6))) if f".text.{k}\0".encode() in image}
    assert kernels == {*(f"stage{i}" for i in range(tab.stages)), "control" if tab.adaptive else "record"}


@pytest.mark.parametrize("real", ["float", "double"])
def test_grl1_kernel_of_a_model_with_blocks_compiles(real, tmp_path):
    """GRL1 on Nygren (two chains) and on a cell whose V is in a fast group: the printed
    model_block_update calls small_solve.cuh's template per block size, after the stage kernel's
    per-state loop (and sets the next step's V where V is in a block)."""
    from app.compute import compilers
    from app.compute.kernels import _options
    from app.sims.cardiac.cuda import model_kernel_source
    from app.sims.cardiac.model import load_model
    from tests.sims.cardiac.synthetic import write_markov_model
    nygren = load_model("nygren_atrial_model_1998").with_jacobian()
    tubule = load_model(str(write_markov_model(tmp_path, tubule=(10.0, 40.0)))).with_jacobian()
    assert len(nygren.blocks) == 2 and tubule.blocks[-1].states == (0, 1)
    compiler = compilers.available()[0]
    for model in (nygren, tubule):
        src, defines = model_kernel_source(model, METHODS["grl1"], real, 1000, 6, 4, 2)
        assert "small_solve<2>(m, x);" in src
        assert compiler.compile(src, "cardiac.cu", _options(defines, True), 90).data


@pytest.mark.parametrize("method,lookup,precision", [("rlfe", True, "float32"), ("rlfe", False, "float64"),
                                                     ("grl1", True, "float64"), ("grl1", False, "float32"),
                                                     ("fe", False, "float32"), ("rlfe", True, "mixed")])
def test_split_step_kernels_compile(method, lookup, precision):
    """solver.split_dt (SPLIT): the cell-substep kernel (the model in a loop of substeps, with
    and without lookup tables, GRL1's Jacobian, a float model on double states) and the RKC1
    stage kernel, with NVRTC and nvcc, and no stage kernel (the model once); without splitting
    the split kernels are not compiled."""
    text = (f"domain: cardiac\nmesh: {{kind: sheet, nx: 10, ny: 10}}\nsolver: {{method: {method}, dt: 0.02, "
            f"precision: {precision}, lookup_tables: {str(lookup).lower()}, split_dt: 0.1}}\n")
    problem = Problem.from_config(load_config(parse_yaml(text)))
    src, defines = kernel_source(problem)
    assert defines["SPLIT"] == 1
    images = compile_with_every_compiler(src, "cardiac.cu", defines)
    assert images and all(b".text.cell_substeps\0" in im and b".text.rkc_stage\0" in im
                          and b".text.stage0\0" not in im for im in images.values())
    unsplit = Problem.from_config(load_config(parse_yaml(text.replace(", split_dt: 0.1", ""))))
    assert "SPLIT" not in kernel_source(unsplit)[1]


@pytest.mark.parametrize("split_dt", [0.0, 0.1])
@pytest.mark.parametrize("row16", [True, False])
def test_operator_row_formats_compile(split_dt, row16):
    """The operator rows as the CUDA engine stores them (app/sims/cardiac/node_order.py): int16
    offsets in its node order (ROW16, a sheet's) and the fallback's int32 indices, the weights in
    half precision (W16, a float32 run's), in the unsplit stage kernels and the split step's, float32 RLFE with tables as the mesh bench
    runs, with NVRTC and nvcc; and the readouts' gather ``to_file_order``. (Every method's
    variant above, on a sheet, compiles with ROW16: the fused one-block steps too.)"""
    from app.sims.cardiac.node_order import NodeOrder, device_order
    splitting = f", split_dt: {split_dt:g}" if split_dt else ""
    text = ("domain: cardiac\nmodel: {file: beeler_reuter_model_1977}\nmesh: {kind: sheet, nx: 20, ny: 10}\n"
            f"solver: {{method: rlfe, dt: 0.02, precision: float32, lookup_tables: true{splitting}}}\n")
    problem = Problem.from_config(load_config(parse_yaml(text)))
    order = device_order(problem.mesh.neighbours) if row16 else NodeOrder.identity(problem.n_cells)
    assert order.row16 == row16
    src, defines = kernel_source(problem, order)
    assert defines.get("ROW16", 0) == int(row16) and defines.get("W16") == 1    # a float32 run: half weights
    images = compile_with_every_compiler(src, "cardiac.cu", defines)
    kernels = ("cell_substeps", "rkc_stage") if split_dt else ("stage0",)
    assert images and all(f".text.{k}\0".encode() in im for im in images.values()
                          for k in (*kernels, "to_file_order"))
