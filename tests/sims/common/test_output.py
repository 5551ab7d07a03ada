import json

import numpy as np

from app.sims.common.output import atomic_write_bytes, save_csv, save_json, save_npz


def test_atomic_write_leaves_no_temp_files(tmp_path):
    target = tmp_path / "sub" / "a.bin"
    atomic_write_bytes(target, b"one")
    atomic_write_bytes(target, b"two")
    assert target.read_bytes() == b"two"
    assert [p.name for p in target.parent.iterdir()] == ["a.bin"]


def test_npz_json_csv(tmp_path):
    save_npz(tmp_path / "r.npz", {"a": np.arange(3)})
    assert np.load(tmp_path / "r.npz")["a"].tolist() == [0, 1, 2]
    save_json(tmp_path / "s.json", {"x": np.float64(1.5), "y": np.arange(2)})
    assert json.loads((tmp_path / "s.json").read_text()) == {"x": 1.5, "y": [0, 1]}
    save_csv(tmp_path / "t.csv", ["t", "v"], [np.arange(2), np.array([0.5, 1.5])])
    assert (tmp_path / "t.csv").read_text().splitlines() == ["t,v", "0,0.5", "1,1.5"]
