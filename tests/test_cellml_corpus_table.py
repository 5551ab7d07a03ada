"""scripts/cardiac/cellml_corpus.py's table from result rows (no corpus, no Myokit needed)."""

import importlib.util
import json
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "cardiac" / "cellml_corpus.py"
spec = importlib.util.spec_from_file_location("cellml_corpus", SCRIPT)
corpus = importlib.util.module_from_spec(spec)
spec.loader.exec_module(corpus)


def _write(path: Path, row: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(row))


def test_rodas4_rows_make_a_column_with_error_time_steps_and_a_summary(tmp_path):
    last = {"apd90_ms": 200.0, "rest_mV": -85.0, "peak_mV": 30.0}
    for name in ("a", "b", "c"):
        _write(tmp_path / f"{name}.json", {
            "model": name, "states": 8, "gates": 5, "protocol": {"start": 10.0, "duration": 1.0, "amplitude": -50.0},
            "reference": {"seconds": 0.1, "beats": [last, last], "last": last},
            "single": {"apd90_ms": 200.0, "engine_seconds": 0.05}})
    _write(tmp_path / "rodas4" / "a.json", {"model": "a", "rodas4": {"apd90_ms": 201.2, "engine_seconds": 1.5,
                                                                     "steps_accepted": 12345}})
    _write(tmp_path / "rodas4" / "b.json", {"model": "b", "timeout_s": 210.0,
                                            "reached": {"t_ms": 5000.0, "t_end_ms": 20010.0, "steps_accepted": 9}})
    text = corpus.table(tmp_path)
    lines = text.splitlines()
    assert "rodas4: error (time, steps)" in lines[0] and "CUDA default" not in lines[0]
    row = {line.split(" | ")[0].strip("| "): line for line in lines[2:5]}
    assert "+0.600 % (1.5 s, 12,345 steps)" in row["a"]
    assert "not finished within 210 s (at 5.0 of 20.0 s)" in row["b"]
    assert "| not run |" in row["c"]
    assert all(line.count("|") == lines[0].count("|") for line in lines[:5])
    assert "rodas4: 1 compared, largest |APD90 error| 0.600 %, 0 within 0.5 %." in text
