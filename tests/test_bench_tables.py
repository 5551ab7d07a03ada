"""scripts/bench_tables.py: tables generated from result records, and the check CI runs."""

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "bench_tables.py"
spec = importlib.util.spec_from_file_location("bench_tables", SCRIPT)
tables = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tables)

ENV = {"commit": "abc123", "date": "2026-11-27T21:00:00+00:00", "device": "NVIDIA H200", "driver": "580.1",
       "compiler": "NVRTC 13.0", "cpu": "test CPU"}


def record(tmp_path, name, results):
    folder = tmp_path / "benchmarks" / "h200"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.json").write_text(json.dumps({"schema": 1, "benchmark": name, "environment": ENV,
                                                      "results": results}))


def test_tables_come_from_the_records_and_check_finds_stale_files(tmp_path):
    record(tmp_path, "compare", {"reference": "4ccdcb4", "cases": [
        {"case": "channel-ga-1.12M", "unit": "s per generation", "current_seconds": [0.009, 0.0092],
         "reference_seconds": [0.0158, 0.016], "ratio": 0.57},
        {"case": "epidermis-5000x3000", "unit": "s", "current_seconds": [0.38], "reference_seconds": []}]})
    record(tmp_path, "channel", {"cases": [{"engine": "cuda", "population": 1120000,
                                            "seconds_per_generation": 0.0091}]})
    (tmp_path / "README.md").write_text(f"intro\n{tables.BEGIN}\nold\n{tables.END}\nrest\n")
    assert tables.main(["--root", str(tmp_path), "--check"]) == 1
    assert tables.main(["--root", str(tmp_path)]) == 0
    assert tables.main(["--root", str(tmp_path), "--check"]) == 0
    readme = (tmp_path / "README.md").read_text()
    assert readme.startswith("intro\n") and readme.endswith("rest\n") and "old" not in readme
    assert "| channel-ga-1.12M | s per generation | 0.0091 |" in readme
    docs = (tmp_path / "docs" / "benchmarks.md").read_text()
    assert "## NVIDIA H200" in docs and "not in the reference" in docs and "| cuda | 1,120,000 | 0.0091 |" in docs
    record(tmp_path, "channel", {"cases": [{"engine": "cuda", "population": 1120000,
                                            "seconds_per_generation": 0.0080}]})
    assert tables.main(["--root", str(tmp_path), "--check"]) == 1


def test_a_figure_needs_a_record_and_markers_are_optional(tmp_path):
    (tmp_path / "README.md").write_text("no markers\n")
    assert tables.main(["--root", str(tmp_path)]) == 0
    assert (tmp_path / "README.md").read_text() == "no markers\n"
    assert "No results are committed yet" in (tmp_path / "docs" / "benchmarks.md").read_text()
    record(tmp_path, "bad", {"cases": []})
    (tmp_path / "benchmarks" / "h200" / "bad.json").write_text("{\"x\": 1}")
    with pytest.raises(SystemExit, match="not a benchmark record"):
        tables.main(["--root", str(tmp_path)])



def test_performance_pages_get_their_domain_rows_and_nothing_else(tmp_path):
    record(tmp_path, "compare", {"reference": "4ccdcb4", "cases": [
        {"case": "channel-ga-1.12M", "domain": "channel", "unit": "s per generation",
         "current_seconds": [0.0075, 0.0077], "reference_seconds": [0.0087, 0.0087], "ratio": 0.87},
        {"case": "epidermis-5000x3000", "domain": "epidermis", "unit": "s", "current_seconds": [0.38],
         "reference_seconds": []}]})
    pages = tmp_path / "docs" / "performance"
    pages.mkdir(parents=True)
    (pages / "channel.md").write_text(f"# Channel\n{tables.BEGIN}\n{tables.END}\nfloor\n")
    (pages / "ssa.md").write_text(f"# SSA\n{tables.BEGIN}\n{tables.END}\n")
    (pages / "gui.md").write_text("# GUI, no markers\n")
    assert tables.main(["--root", str(tmp_path), "--check"]) == 1
    assert tables.main(["--root", str(tmp_path)]) == 0
    channel = (pages / "channel.md").read_text()
    assert "| channel-ga-1.12M | s per generation | NVIDIA H200 | 0.0076 ± 1.3 % | 0.0087 ± 0.0 % (4ccdcb4) |" in channel
    assert "benchmarks/h200/compare.json" in channel and "epidermis" not in channel and channel.endswith("floor\n")
    assert "No result of this domain is committed yet" in (pages / "ssa.md").read_text()
    assert (pages / "gui.md").read_text() == "# GUI, no markers\n"
    assert tables.main(["--root", str(tmp_path), "--check"]) == 0


def test_the_first_run_table_is_the_newest_startup_record_with_its_load(tmp_path):
    (tmp_path / "README.md").write_text(f"a\n{tables.FIRST_BEGIN}\n{tables.FIRST_END}\nb\n")
    record(tmp_path, "startup", {"target_cold_s": 2.0, "target_warm_s": 1.0, "load_average_before": [3.5, 2, 1],
                                 "load_average_after": [4.25, 3, 2], "rows": [
                                     {"panel": "ssa", "front": "cli", "cold_first_frame_s": 0.512,
                                      "warm_first_frame_s": 0.3, "again_first_frame_s": 0.1},
                                     {"panel": "epidermis", "front": "gui", "skipped": "3D view needs a display"}]})
    assert tables.main(["--root", str(tmp_path)]) == 0
    readme = (tmp_path / "README.md").read_text()
    assert "| ssa | cli | 0.51 | 0.30 | 0.10 |" in readme and "3D view needs a display" in readme
    assert "load average (1 min) 3.5 and 4.2 before and after" in readme and "test CPU" in readme
    assert tables.main(["--root", str(tmp_path), "--check"]) == 0


def test_the_estimate_check_names_what_was_shortened(tmp_path):
    record(tmp_path, "estimates", {"engine": "cpu", "max_seconds": 10.0, "load_average_before": [2.0, 1, 1],
                                   "rows": [{"preset": "ssa/birth-death", "estimate_s": 1.5, "actual_s": 1.4,
                                             "ratio": 0.93, "result": "ok"},
                                            {"preset": "ssa/paper", "shortened": "ensemble.realizations=124",
                                             "estimate_s": 8.0, "actual_s": 9.0, "ratio": 1.12, "result": "ok"}]})
    assert tables.main(["--root", str(tmp_path)]) == 0
    docs = (tmp_path / "docs" / "benchmarks.md").read_text()
    assert "| ssa/birth-death | as shipped | 1.5 | 1.4 | 0.93 | ok |" in docs
    assert "| ssa/paper | ensemble.realizations=124 | 8 | 9 | 1.12 | ok |" in docs


PAPER_RESULTS = {
    "level": 7, "n_cells": 163842, "t_end": 300.0, "s2_ms": 250.0, "backend": "cuda", "states": 21,
    "neighbour_width": 7, "floor_bytes_per_cell_step": 260, "bandwidth_bytes_per_s": 3.35e12,
    "reference": {"steps_accepted": 11245, "steps_rejected": 12, "wall_seconds": 9.79, "method": "bs32",
                  "at": 1e-3, "rt": 1e-6, "precision": "float64", "s1_excited_fraction": 1.0,
                  "s1_last_activation_ms": 180.5, "s2_excited_fraction": 0.0},
    "rows": [
        {"method": "rlfe", "dt": 0.05, "wall_seconds": 0.095, "steps": 6000, "rejected": 0, "i_rel_error": 0.15,
         "i_abs_error": 12.1, "rrms": 0.25, "stopped": "", "floor_seconds": 0.0763, "target_seconds": 0.3,
         "paper": {"seconds": 11.2, "steps": 6000, "i_rel_error": 0.062, "i_abs_error": 5.38, "rrms": 0.16}},
        {"method": "te21", "at": 0.01, "rt": 1e-4, "dt": 0.01, "wall_seconds": 2.28, "steps": 34151,
         "rejected": 31, "i_rel_error": 0.0038, "i_abs_error": 0.306, "rrms": 0.0037, "stopped": "",
         "paper": None},
        {"method": "bs32", "at": 1.0, "rt": 0.0, "dt": 0.01, "error": "out of memory"}]}


def test_a_docs_page_gets_the_newest_record_it_names_and_the_paper_table(tmp_path):
    page = tmp_path / "docs" / "validation" / "sphere.md"
    page.parent.mkdir(parents=True)
    begin, end = tables.RECORD_BEGIN.format("cardiac-paper"), tables.RECORD_END.format("cardiac-paper")
    page.write_text(f"# Sphere\nintro\n{begin}\nhand-typed 0.095 s\n{end}\nafter\n")
    assert tables.main(["--root", str(tmp_path)]) == 0
    assert "No `cardiac-paper` result is committed yet" in page.read_text()
    record(tmp_path, "cardiac-paper", PAPER_RESULTS)
    assert tables.main(["--root", str(tmp_path), "--check"]) == 1
    assert tables.main(["--root", str(tmp_path)]) == 0
    text = page.read_text()
    assert text.startswith("# Sphere\nintro\n") and text.endswith("after\n") and "hand-typed" not in text
    assert "| RLFE | Δt 0.05 | 0.095 | 6,000 | 0.15 | 12.1 | 0.25 | 0.0763 | 11.2, 6,000, 0.062, 5.38, 0.16 |" in text
    assert "| TE 2(1) | at 0.01 rt 0.0001 | 2.28 | 34,151 (31) |" in text and text.count("| fail |") == 1
    assert "| BS 3(2) | at 1 rt 0 | error: out of memory |" in text
    assert "S1 excited 100.0 % of the cells, the last at 180.5 ms; S2 (at 250 ms) excited 0.0 %" in text
    assert "RLFE Δt 0.05 under 0.3 s: 0.095 s (118x faster than the paper's 11.2 s)" in text
    assert "260 B per cell per step" in text and "3.35 TB/s" in text and "benchmarks/h200/cardiac-paper.json" in text
    assert tables.main(["--root", str(tmp_path), "--check"]) == 0


def test_a_shortened_paper_run_says_so_and_that_s2_came_after_it(tmp_path):
    page = tmp_path / "docs" / "validation" / "sphere.md"
    page.parent.mkdir(parents=True)
    page.write_text(f"{tables.RECORD_BEGIN.format('cardiac-paper')}\n{tables.RECORD_END.format('cardiac-paper')}\n")
    record(tmp_path, "cardiac-paper", {**PAPER_RESULTS, "t_end": 30.0, "quick": True, "level": 6})
    assert tables.main(["--root", str(tmp_path)]) == 0
    text = page.read_text()
    assert "30 ms (shortened: `--quick`)" in text and "S2 (at 250 ms) is past this run's end" in text
    assert "Targets" not in text and "paper:" not in text and "11.2" not in text   # the paper's case is another


def test_the_split_study_table_shows_each_run_against_reference_and_consensus():
    row = {"run": "strang Δt_s 0.1, dt 0.02", "split": "strang", "split_dt_ms": 0.1, "dt_ms": 0.02,
           "activation_ms": {"P1": 1.2, "P2": 35.0, "P5": 40.0, "P8": 55.0, "P9": 24.0}, "wall_seconds": 81.4,
           "max_abs_error_ms": 0.456, "max_consensus_sd": 0.412, "stopped": None}
    results = {"engine": "cpu (compiled)",
               "cable": [{"dx_mm": 0.2, "reference_dt_ms": 0.0025, "reference_cv_mm_per_ms": 0.5547,
                          "rows": [{**row, "cv_mm_per_ms": 0.5642, "relative_error": 0.0172}]}],
               "nversion": [{"dx_mm": 0.2, "nodes": 58176, "t_end_ms": 80.0, "reference_dt_ms": 0.005,
                             "consensus": {"P2": [34.43, 1.48], "P5": [38.56, 5.0], "P8": [53.81, 8.17],
                                           "P9": [24.58, 3.76]}, "rows": [row]}]}
    text = "\n".join(tables.TABLES["cardiac-split"](results))
    assert "| strang Δt_s 0.1, dt 0.02 | +1.72 % |" in text and "dx 0.2: dt 0.0025 ms, 0.5547 mm/ms" in text
    assert "| strang Δt_s 0.1, dt 0.02 | 35.00 | 40.00 | 55.00 | 24.00 | 0.46 | 0.41 |" in text
    assert "dx 0.2 mm (58,176 nodes, 80 ms)" in text and "P8 53.81 ± 8.17" in text
    assert "a 10 mm cable (the slab's along-fibre diffusivity)" in text
    crn = {**results, "cable_description": "a 20 mm cable of CRN cells", "nversion": []}
    text = "\n".join(tables.TABLES["cardiac-split-crn"](crn))
    assert "wave in a 20 mm cable of CRN cells, error" in text and "N-version" not in text


def test_the_mesh_table_names_the_row_format_where_the_record_has_it():
    record = {"nodes": 1_023_672, "elements": 5_750_784, "neighbour_width": 14, "states": 21, "dt_ms": 0.02,
              "t_end_ms": 100.0, "steps": 5000, "wall_seconds": 0.5, "real_time_factor": 0.2,
              "floor_bytes_per_node_step": 288, "floor_seconds": 0.44, "nominal_bandwidth_GBps": 3350.0,
              "effective_bandwidth_GBps": 2900.0, "activated_fraction": 0.5, "split_dt_ms": 0.0}
    floor = next(line for line in tables.cardiac_mesh_table({**record, "row_bytes_per_slot": 6}) if "floor" in line)
    assert "288 B per node and step (rows at 6 B a slot): 0.440 s" in floor
    older = next(line for line in tables.cardiac_mesh_table(record) if "floor" in line)
    assert "288 B per node and step: 0.440 s" in older


def test_the_epidermis_table_shows_each_case_against_its_floor_and_the_grown_tissue():
    cases = [{"case": "movement 5000 periodic cell_list", "engine": "cuda", "elements": 100000, "steps": 3000,
              "us_per_step": 53.95, "steps_per_second": 18533.1, "floor_us_per_step": 13.41,
              "measured_over_floor": 4.022, "candidates_per_element": 2.828},
             {"case": "full model, 100 cells, 130000 steps", "engine": "cuda", "cells": 386, "elements": 8194,
              "layers": 5, "suprabasal_fraction": 0.76, "steps": 130000, "us_per_step": 79.55},
             {"case": "movement 128 cells (NumPy reference)", "engine": "ref", "steps": 200}]
    text = "\n".join(tables.TABLES["epidermis"]({"cases": cases}))
    assert "| movement 5000 periodic cell_list | cuda | 100,000 | 3,000 | 53.95 | 1.853e+04 | 13.41 | 4.022 | 2.828 |" in text
    assert "| 386 cells, 5 layers, 76% suprabasal |" in text
    assert "| movement 128 cells (NumPy reference) | ref | - | 200 | - |" in text
