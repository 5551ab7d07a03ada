"""bench compare: the verdict, the case programs and the reference tree (no GPU, seconds)."""

import json

import pytest

from app import bench_compare
from app.bench_compare import CASES, Case, judge, run_case


def test_a_loss_must_clear_the_threshold_and_the_noise():
    assert not judge([1.0, 1.0], [1.09, 1.09]).slower
    assert judge([1.0, 1.0], [1.12, 1.12]).slower
    noisy = judge([0.9, 1.1], [1.12, 1.14])      # reference spread 20 %: a 13 % loss is noise
    assert not noisy.slower and noisy.limit == pytest.approx(1.1 * (1 + 0.5 * (0.2 + 0.02 / 1.13)))
    assert judge([1.0], [0.5]).ratio == 0.5


def test_case_programs_compile_and_name_their_measure():
    for case in CASES:
        compile(bench_compare.driver(case, 2), case.name, "exec")
        assert "def measure(reps)" in case.code and case.device in ("cuda", "cpu")
    assert len({c.name for c in CASES}) == len(CASES)


def test_select_refuses_unknown_names():
    assert all(c.device == "cpu" for c in bench_compare.select(None, cuda=False))
    assert [c.name for c in bench_compare.select("channel-ga", cuda=True)] == ["channel-ga-1.12M"]
    with pytest.raises(SystemExit, match="no case matches"):
        bench_compare.select("nonsense", cuda=True)


def test_runs_each_tree_in_its_own_interpreter(tmp_path):
    tree = bench_compare.extract("HEAD", tmp_path)
    assert (tree / "app" / "__init__.py").is_file() and not (tree / ".git").exists()
    probe = Case("probe", "none", "cpu", "s", """
import app, pathlib
def measure(reps):
    print(pathlib.Path(app.__file__).resolve())
    return [0.25] * reps
""")
    values, error = run_case(probe, tree, 3, 60, "x")
    assert values == [0.25] * 3 and error == ""
    broken = Case("broken", "none", "cpu", "s", "def measure(reps):\n    raise RuntimeError('nope')\n")
    values, error = run_case(broken, tree, 1, 60, "x")
    assert values is None and "RuntimeError: nope" in error


def test_compare_writes_a_record_and_exits_by_verdict(tmp_path, monkeypatch):
    fast = Case("fast", "none", "cpu", "s", "def measure(reps):\n    return [1.0] * reps\n")
    monkeypatch.setattr(bench_compare, "CASES", [fast])
    code = bench_compare.main(None, str(bench_compare.ROOT), tmp_path, rounds=2, reps=1)
    doc = json.loads((tmp_path / "compare.json").read_text())
    assert code == 0 and doc["benchmark"] == "compare" and doc["results"]["cases"][0]["ratio"] == 1.0
    assert set(doc["environment"]) >= {"commit", "date", "device", "driver", "compiler"}
    with pytest.raises(SystemExit, match="no app/__init__.py"):
        bench_compare.main(None, str(tmp_path), tmp_path)
