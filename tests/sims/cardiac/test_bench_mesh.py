"""The 10^6-node mesh benchmark's pieces: its memory floor and a quick run on the CPU."""

import json

import numpy as np
import pytest

from app.sims.cardiac import bench_mesh


def test_the_floor_counts_states_operator_row_and_bookkeeping():
    """CRN (21 float32 states read and written), 14 neighbours (int16 offset or int32 index, and
    weight), one V read, 32 B of activation bookkeeping."""
    assert bench_mesh.floor_bytes(21, 14, 6) == 2 * 21 * 4 + 14 * 6 + 4 + 32 == 288
    assert bench_mesh.floor_bytes(21, 14, 8) == 2 * 21 * 4 + 14 * 8 + 4 + 32 == 316


def test_the_floor_counts_the_row_as_the_cuda_engine_stores_it():
    """The bench shell's rows fit int16 offsets and its weights half precision (4 B a slot);
    rows whose offsets don't fit take int32 indices (6 B), and a float64 run keeps float64 weights."""
    from app.sims.cardiac.bench import row_slot_bytes
    from app.sims.cardiac.fem import UNIT_TISSUE, operator_arrays
    from app.sims.cardiac.mesh import Mesh
    from app.sims.cardiac.shapes import ventricle_shell
    raw = ventricle_shell(20_000)
    nbr, w = operator_arrays(raw, UNIT_TISSUE)
    assert row_slot_bytes(Mesh("file", raw.points, nbr, w)) == 4
    assert row_slot_bytes(Mesh("file", raw.points, nbr, w), "float64") == 10
    assert row_slot_bytes(Mesh("file", raw.points[:1], np.zeros((1, 1), np.int32), np.zeros((1, 1)))) == 6


@pytest.mark.slow
def test_a_quick_run_through_the_file_path_writes_its_record(tmp_path, capsys):
    assert bench_mesh.main(backend="cpu", out_dir=tmp_path, quick=True) == 0
    record = json.loads((tmp_path / "cardiac-mesh.json").read_text())
    result = record["results"]
    assert 15_000 < result["nodes"] < 30_000 and result["neighbour_width"] == 14 and result["states"] == 21
    assert result["finished"] and result["steps"] == round(bench_mesh.QUICK_T_END / bench_mesh.DT)
    assert result["real_time_factor"] > 0 and result["floor_bytes_per_node_step"] == 316    # CPU: 8 B a slot
    assert result["row_bytes_per_slot"] == 8
    assert result["mesh_quality"]["stable_dt_ms"] > bench_mesh.DT
    assert "real time" in capsys.readouterr().out


def test_the_split_floor_counts_the_states_once_and_each_diffusion_stage():
    """Split every 0.1 ms on the shell: the 21 states read and written once, the bookkeeping once,
    and per RKC1 stage the row (14 offsets and weights), V of the previous stage and the stage
    before it read, the new one written: two stages (Godunov) 392 B, against 5 x 288 B unsplit
    (with int32 indices 448 B against 5 x 316 B)."""
    from app.sims.cardiac.bench import split_floor_bytes
    assert split_floor_bytes(21, 14, [2], 6) == 2 * 21 * 4 + 32 + 2 * (14 * 6 + 4 + 8) == 392
    assert split_floor_bytes(21, 14, [2, 2], 6) == 392 + 2 * 96
    assert split_floor_bytes(21, 14, [2], 8) == 2 * 21 * 4 + 32 + 2 * (14 * 8 + 4 + 8) == 448


@pytest.mark.slow
def test_a_quick_split_run_records_its_stages_and_floor(tmp_path):
    assert bench_mesh.main(backend="cpu", out_dir=tmp_path, quick=True, split_dt=0.1) == 0
    result = json.loads((tmp_path / "cardiac-mesh-strang-0.1ms.json").read_text())["results"]
    assert result["finished"] and result["steps"] == round(bench_mesh.QUICK_T_END / 0.1)
    rho = 2 / result["mesh_quality"]["stable_dt_ms"]
    from app.sims.cardiac.splitting import rkc1_parameters
    s = result["diffusion_stages"][0]
    assert rkc1_parameters(s)[2] >= 0.1 * rho and (s == 1 or rkc1_parameters(s - 1)[2] < 0.1 * rho)
    assert result["floor_bytes_per_node_ms"] == pytest.approx(result["floor_bytes_per_node_step"] / 0.1)


@pytest.mark.gpu
def test_a_quick_strang_split_run_on_cuda(tmp_path):
    """``bench cardiac --mesh --split-dt 0.1 --split strang`` on CUDA: the split kernels run the
    shell to its end, the wave spreads, the record names both half super-steps."""
    assert bench_mesh.main(backend="cuda", out_dir=tmp_path, quick=True, split_dt=0.1, split="strang") == 0
    result = json.loads((tmp_path / "cardiac-mesh-strang-0.1ms.json").read_text())["results"]
    assert result["backend"] == "cuda" and result["finished"] and result["split"] == "strang"
    assert result["steps"] == round(bench_mesh.QUICK_T_END / 0.1) and len(result["diffusion_stages"]) == 2
    assert result["activated_fraction"] > 0 and result["row_bytes_per_slot"] == 4


def test_a_record_names_its_split_and_a_cell_step_other_than_the_default():
    assert bench_mesh.record_name(0.0, "strang") == "cardiac-mesh"
    assert bench_mesh.record_name(0.1, "strang") == "cardiac-mesh-strang-0.1ms"
    assert bench_mesh.record_name(0.2, "godunov", 0.04) == "cardiac-mesh-godunov-0.2ms-dt0.04"
