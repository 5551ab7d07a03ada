"""The CUDA engine's split step (``solver.split_dt``) without a GPU: ``CudaTissue`` itself, its
device arrays and launches served by stand-ins for pycuda (host memory; ``kernels/cardiac.cu``
as the engine fills it, compiled with g++ over :mod:`.host_cuda`'s stand-in for CUDA's
intrinsics, each launch's threads run in turn), against the NumPy engine on a small sheet:
the same probe times and V, activation times and end states, Godunov and Strang. The engine
stores the nodes in its own order (:mod:`app.sims.cardiac.node_order`) with 16-bit row offsets:
a sheet's and a tetrahedral mesh's order is not the file's, so what is compared has gone
through the engine's permutation and back."""

import shutil

import numpy as np
import pytest

from app.sims.cardiac import cuda as cuda_engine
from app.sims.cardiac.engine import CpuTissue, Problem
from app.sims.cardiac.node_order import NodeOrder

from .helpers import config
from .host_cuda import assert_same_run

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="no host C++ compiler")


def sheet(split: str, precision: str, lookup: bool = False) -> str:
    """A 7 × 3 sheet, Beeler–Reuter, stimulated at one end: the wave crosses it in the run."""
    return ("model: {file: beeler_reuter_model_1977}\n"
            "mesh: {kind: sheet, nx: 7, ny: 3, dx_mm: 0.1}\n"
            "protocol: {t_end: 6.0, stimuli: [{start: 0.5, duration: 2.0, amplitude: -100, "
            "region: {kind: rect, x1: 0.15}}]}\n"
            f"solver: {{method: rlfe, dt: 0.02, split_dt: 0.1, split: {split}, precision: {precision}, "
            f"lookup_tables: {str(lookup).lower()}}}\n"
            "output: {random_probes: 0, probe_cells: [0, 3, 20], dt_save: 0.2}\n")


def assert_permuted(engine: cuda_engine.CudaTissue) -> None:
    """The engine runs in an order other than the file's, with int16 offsets in its rows (and the
    weights in half precision in a float32 run, else in the run's precision)."""
    assert engine.order.row16 and not engine.order.is_identity
    weights = np.float16 if engine.real == np.float32 else engine.real
    assert engine.w.a.dtype == weights and engine.row_bytes_per_slot == 2 + np.dtype(weights).itemsize
    assert engine.nbr.a.dtype == np.int16


def cpu_run(problem: Problem) -> CpuTissue:
    cpu = CpuTissue(problem)
    while not cpu.finished:
        cpu.advance(1000)
    return cpu


@pytest.mark.parametrize("split,row16", [("godunov", True), ("strang", True), ("strang", False)])
def test_cuda_split_steps_match_the_numpy_engine_in_float64(host_pycuda, monkeypatch, split, row16):
    """row16 False: the fallback of a mesh whose offsets do not fit int16 (the file's order,
    int32 indices), forced on the sheet."""
    if not row16:
        monkeypatch.setattr(cuda_engine, "device_order", lambda neighbours: NodeOrder.identity(len(neighbours)))
    text = sheet(split, "float64")
    cuda = cuda_engine.CudaTissue(Problem.from_config(config(text)))
    assert cuda.split and len(cuda._rkc_plan[0.5 if split == "strang" else 1.0]) >= 2
    if row16:
        assert_permuted(cuda)
    else:
        assert cuda.nbr.a.dtype == np.int32 and cuda.order.is_identity and cuda.row_bytes_per_slot == 4 + 8
    while not cuda.finished:            # slices of steps and of simulated time: whole split steps
        cuda.advance(7)
        cuda.advance_time(0.35)
        assert cuda.t == pytest.approx(0.1 * cuda.steps_accepted) and cuda.steps_accepted in (*range(0, 61, 11), 60)
    cpu = cpu_run(Problem.from_config(config(text)))
    assert cuda.steps_accepted == cpu.steps_accepted == 60
    assert np.isfinite(cpu.activation()["activation_time"]).all()      # the wave crossed the sheet
    assert_same_run(cuda, cpu)    # the same arithmetic, a few roundings apart (measured: V 2e-14 mV, states 2e-14)


def test_cuda_split_steps_in_float32_round_each_stage(host_pycuda):
    """float32: the NumPy engine diffuses in float64 and rounds V once per super-step, the
    kernels round each RKC stage to float32 (the floor counts 4 B per stage value); with the
    tables (the fused model's tabulated gate updates, the NumPy engine's the model's own). V
    agrees to float32's rounding, a dozen ulp of 100 mV over the 60 split steps (measured:
    2.3e-5 mV, 3 ulp), the activation times to 1e-5 ms (measured: 2e-7 ms)."""
    text = sheet("strang", "float32", lookup=True)
    cuda = cuda_engine.CudaTissue(Problem.from_config(config(text)))
    while not cuda.finished:
        cuda.advance(1000)
    cpu = cpu_run(Problem.from_config(config(text)))
    (ct, cv), (nt, nv) = cuda.recordings(), cpu.recordings()
    np.testing.assert_allclose(ct, nt, rtol=0, atol=1e-9)
    np.testing.assert_allclose(cv, nv, rtol=0, atol=1e-4)
    got, ref = cuda.activation()["activation_time"], cpu.activation()["activation_time"]
    assert np.isfinite(ref).all()
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-5)


@pytest.mark.parametrize("precision, lookup", [("float64", False), ("float32", True)])
def test_the_cell_kernel_doing_the_last_stage_changes_no_bit(host_pycuda, monkeypatch, precision, lookup):
    """Strang: stage_cell_substeps (the first half super-step's last stage and the substeps in
    one kernel) gives the same states, recordings and maps as that stage launched alone."""
    text = sheet("strang", precision, lookup)
    runs = []
    for fuse in (True, False):
        monkeypatch.setattr(cuda_engine, "FUSE_STAGE", fuse)
        engine = cuda_engine.CudaTissue(Problem.from_config(config(text)))
        assert len(engine._rkc_plan[0.5]) >= 2
        launched = []
        for name in ("_stage_cells", "_cells"):
            kernel = getattr(engine, name)
            monkeypatch.setattr(kernel, "prepared_async_call",
                                lambda *a, k=kernel, n=name, seen=launched: (
                                    seen.append(n), type(k).prepared_async_call(k, *a)))
        while not engine.finished:
            engine.advance(1000)
        assert set(launched) == {"_stage_cells" if fuse else "_cells"}
        runs.append((engine.states(), engine.recordings()[1], engine.activation()["activation_time"]))
    for fused, alone in zip(*runs):
        np.testing.assert_array_equal(fused, alone)


def test_cuda_split_checkpoint_steering_and_readouts_as_the_numpy_engine(host_pycuda):
    """GRL1, Strang: a checkpoint after 20 split steps resumed in a new engine, new diffusion
    weights from step 30 on (the super-step's stages planned again), V kept every 0.5 ms: the
    same as the NumPy engine doing the same."""
    text = sheet("strang", "float64").replace("method: rlfe", "method: grl1")
    cuda = cuda_engine.CudaTissue(Problem.from_config(config(text)))
    cpu = CpuTissue(Problem.from_config(config(text)))
    cuda.advance(20)
    assert_permuted(cuda)
    resumed = cuda_engine.CudaTissue(Problem.from_config(config(text)))
    checkpoint = cuda.state()
    resumed.restore(checkpoint)
    cpu.advance(20)
    # the checkpoint holds each node in the file's order, as the NumPy engine's states; its
    # activation times too (the device observes a state at the next split step's start: the
    # nodes the 20th state activated are not in them yet)
    np.testing.assert_allclose(checkpoint["cuda_y"], cpu.states(), rtol=0, atol=1e-11)
    activated, ref = checkpoint["cuda_maps"][1], cpu.activation()["activation_time"]
    seen = np.isfinite(activated)
    assert seen.sum() >= 9 and (np.isfinite(ref) >= seen).all()
    np.testing.assert_allclose(activated[seen], ref[seen], rtol=0, atol=1e-11)
    grids = [engine.keep_voltage(0.5) for engine in (resumed, cpu)]
    for engine in (resumed, cpu):
        engine.advance(10)
        engine.set_tissue(4 * engine.p.mesh.inv_d2, None)
    assert len(resumed._rkc_plan[0.5]) > len(cuda._rkc_plan[0.5])
    for engine in (resumed, cpu):
        while not engine.finished:
            engine.advance(1000)
    np.testing.assert_allclose(resumed.states(), cpu.states(), rtol=0, atol=1e-11)
    np.testing.assert_allclose(resumed.recordings()[1], cpu.recordings()[1], rtol=0, atol=1e-11)
    kept, expected = grids[0].take(), grids[1].take()
    assert [t for t, _ in kept] == [t for t, _ in expected] and len(kept) == 8
    np.testing.assert_allclose(np.array([v for _, v in kept]), np.array([v for _, v in expected]), atol=1e-11)
    np.testing.assert_allclose(resumed.activation()["activation_time"], cpu.activation()["activation_time"],
                               rtol=0, atol=1e-11)


def slab_config(folder) -> str:
    """A 2 × 1 × 0.5 mm slab of tetrahedra every 0.25 mm (135 nodes, a mesh file with fibres)
    turned against its fibres (so every edge of a node carries a weight), Beeler–Reuter,
    stimulated in the corner x, y <= 0.5 mm; Strang at 0.1 ms."""
    from dataclasses import replace

    from app.sims.cardiac.mesh_io import write_opencarp
    from app.sims.cardiac.shapes import structured_slab
    raw = structured_slab(2.0, 1.0, 0.5, 0.25)
    cells = np.flatnonzero((raw.points[:, :2] <= 0.5 + 1e-9).all(axis=1)).tolist()
    c, s = np.cos(0.5), np.sin(0.5)
    turn = np.array([[c, -s, 0.0], [s * c, c * c, -s], [s * s, s * c, c]])
    path = write_opencarp(folder / "slab", replace(raw, points=raw.points @ turn.T))
    return ("model: {file: beeler_reuter_model_1977}\n"
            f"mesh: {{kind: file, path: {path}, conductivity: {{along: 0.17, across: 0.04, sheet: 0.04}}}}\n"
            "protocol: {t_end: 6.0, stimuli: [{start: 0.5, duration: 2.0, amplitude: -100, "
            f"region: {{kind: cells, cells: {cells}}}}}]}}\n"
            "solver: {method: rlfe, dt: 0.02, split_dt: 0.1, split: strang, precision: float64}\n"
            f"output: {{random_probes: 0, probe_cells: [0, 60, {len(raw.points) - 1}], dt_save: 0.2}}\n")


def test_cuda_split_steps_on_a_tetrahedral_file_mesh_match_the_numpy_engine(host_pycuda, tmp_path):
    """A mesh file's anisotropic P1 operator (rows of up to 14 slots, unused ones padded) in the
    engine's order: the same probes, end states and activation times as the NumPy engine in the
    file's order, to the float64 roundings of the sheet's case."""
    text = slab_config(tmp_path)
    cuda = cuda_engine.CudaTissue(Problem.from_config(config(text)))
    assert_permuted(cuda)
    assert cuda.p.mesh.width > 6 and (cuda.p.mesh.inv_d2 == 0).any()       # padded rows
    while not cuda.finished:
        cuda.advance(1000)
    cpu = cpu_run(Problem.from_config(config(text)))
    assert np.isfinite(cpu.activation()["activation_time"]).mean() > 0.5      # the wave crossed most of it
    assert_same_run(cuda, cpu)


def test_cuda_blow_up_names_the_file_cell(host_pycuda):
    """A stimulus far too strong at one cell of the sheet (1 mm apart, weakly coupled): the run
    stops naming that cell's index in the file, as the NumPy engine does, though the device
    holds it elsewhere."""
    from app.sims.cardiac.engine import RunStopped
    text = (sheet("godunov", "float64").replace("dx_mm: 0.1", "dx_mm: 1.0")
            .replace("amplitude: -100, region: {kind: rect, x1: 0.15}", "amplitude: -10000, region: {kind: cells, cells: [9]}"))
    stops = []
    for engine in (cuda_engine.CudaTissue(Problem.from_config(config(text))), CpuTissue(Problem.from_config(config(text)))):
        with pytest.raises(RunStopped) as stop:
            while not engine.finished:
                engine.advance(1000)
        stops.append(stop.value)
    assert stops[0].cell == stops[1].cell == 9 and stops[0].t == pytest.approx(stops[1].t, abs=1e-12)
    assert cuda_engine.CudaTissue(Problem.from_config(config(text))).order.position[9] != 9
