"""Every run folder is an RO-Crate (Process Run Crate) that roc-validator accepts offline."""

from __future__ import annotations

import json

import numpy as np
import pytest

from app.sims.common.provenance import METADATA, sha256
from app.sims.common.session import write_run_outputs
from tests.sims.common.crate_check import validate_crate

pytest.importorskip("rocrate")


def _graph(folder):
    doc = json.loads((folder / METADATA).read_text())
    return {e["@id"]: e for e in doc["@graph"]}


def test_run_folder_is_a_valid_process_run_crate(tmp_path, monkeypatch):
    model = tmp_path / "model.xml"          # an input the config names, outside the run folder
    model.write_text("<sbml/>")
    out = tmp_path / "run"
    write_run_outputs(out, {"domain": "x", "n": 1, "sbml": str(model)}, {"a": np.arange(4.0)},
                      {"backend": "cpu", "device": "test CPU", "seed": 42, "finished": True},
                      started=1_700_000_000.0)
    graph = _graph(out)
    action = graph["#run"]
    assert action["@type"] == "CreateAction"
    assert action["startTime"] == "2023-11-14T22:13:20+00:00"
    assert action["endTime"] >= action["startTime"]
    assert action["instrument"] == {"@id": "#biogpu-studio"}
    ids = {o["@id"] for o in action["object"]}
    assert {"config.yaml", "#seed", "#backend", "#device", "#kernel-compiler", "#git-commit",
            model.resolve().as_uri()} <= ids
    assert graph[model.resolve().as_uri()]["sha256"] == sha256(model)
    assert graph["#seed"]["value"] == "42" and graph["#device"]["value"] == "test CPU"
    results = {r["@id"] for r in action["result"]}
    assert results == {"results.npz", "summary.json"}
    for name in ("config.yaml", "results.npz", "summary.json"):       # every file with its hash
        assert graph[name]["sha256"] == sha256(out / name)
        assert graph[name]["contentSize"] == str((out / name).stat().st_size)
    assert validate_crate(out, monkeypatch) == []


def test_a_tampered_crate_fails_the_validator(tmp_path, monkeypatch):
    """The validator is not a rubber stamp: a crate without its CreateAction's instrument fails."""
    out = tmp_path / "run"
    write_run_outputs(out, {"n": 1}, {"a": np.zeros(2)}, {"backend": "cpu", "seed": 1})
    doc = json.loads((out / METADATA).read_text())
    for entity in doc["@graph"]:
        if entity["@id"] == "#run":
            del entity["instrument"]
    (out / METADATA).write_text(json.dumps(doc))
    assert validate_crate(out, monkeypatch) != []


def test_manifest_lists_the_crate_and_a_rerun_replaces_it(tmp_path):
    out = tmp_path / "run"
    write_run_outputs(out, {"n": 1}, {"a": np.zeros(2)}, {"backend": "cpu", "seed": 1})
    first = _graph(out)["results.npz"]["sha256"]
    write_run_outputs(out, {"n": 2}, {"a": np.ones(2)}, {"backend": "cpu", "seed": 2})
    manifest = json.loads((out / "manifest.json").read_text())
    assert METADATA in manifest["files"]
    graph = _graph(out)
    assert graph["results.npz"]["sha256"] == sha256(out / "results.npz") != first
    assert graph["#seed"]["value"] == "2"

