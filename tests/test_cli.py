"""The headless CLI: the same engines as the GUI, files as ARCHITECTURE.md lists them."""

import builtins
import json

import numpy as np
import pytest

from app.cli import main
from app.sims.common.simulation import PRESETS

BIRTH_DEATH = str(PRESETS / "ssa" / "birth-death.yaml")


def test_run_writes_results(tmp_path, capsys):
    out = tmp_path / "run"
    rc = main(["run", BIRTH_DEATH, "--backend", "cpu", "--set", "ensemble.realizations=200",
               "--set", "ensemble.samples=11", "--out", str(out), "--no-png"])
    assert rc == 0
    summary = json.loads((out / "summary.json").read_text())
    for key in ("realizations", "reactions_fired", "wall_seconds", "reactions_per_second", "backend", "device"):
        assert key in summary
    assert summary["realizations"] == 200 and summary["backend"] == "cpu"
    data = np.load(out / "results.npz")
    assert data["times"].shape == (11,) and data["mean"].shape == (11, 1)
    assert data["std"].shape == (11, 1) and data["final"].shape == (200, 1)
    assert list(data["species"]) == ["X"]
    assert "realizations: 200" in (out / "config.yaml").read_text()


def test_png_is_skipped_cleanly_without_qt(tmp_path, monkeypatch, capsys):
    real_import = builtins.__import__

    def no_qt(name, *args, **kwargs):
        if name.startswith("PySide6") or name.startswith("app.gui"):
            raise ModuleNotFoundError(f"No module named '{name}'", name=name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_qt)
    rc = main(["run", BIRTH_DEATH, "--backend", "cpu", "--set", "ensemble.realizations=20",
               "--set", "ensemble.samples=3", "--out", str(tmp_path / "r")])
    assert rc == 0
    assert "PNG skipped" in capsys.readouterr().out


def test_bad_config_reports_line_and_exit_code(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("domain: ssa\nmodel:\n  species: {X: 1}\n  reactions: [{rate: 1, reactants: {Y: 1}}]\n")
    assert main(["run", str(bad), "--backend", "cpu", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:4:" in err and "unknown species 'Y'" in err


def test_bad_override_is_reported(tmp_path, capsys):
    assert main(["run", BIRTH_DEATH, "--set", "ensemble.realizations=-3", "--out", str(tmp_path)]) == 2
    assert "valid range" in capsys.readouterr().err


def test_devices_and_unknown_bench(capsys):
    assert main(["devices"]) == 0
    assert "auto picks" in capsys.readouterr().out
    assert main(["bench", "nothing"]) == 2


def test_cpu_and_cpu_reference_backends_give_the_same_counts(tmp_path):
    """`cpu` (compiled) and `cpu-reference` (NumPy) run the same streams: same final counts."""
    finals = {}
    for backend in ("cpu", "cpu-reference"):
        out = tmp_path / backend
        rc = main(["run", BIRTH_DEATH, "--backend", backend, "--set", "ensemble.realizations=50",
                   "--set", "ensemble.samples=3", "--out", str(out), "--no-png"])
        assert rc == 0
        summary = json.loads((out / "summary.json").read_text())
        assert summary["backend"] == backend and summary["compile_seconds"] >= 0
        finals[backend] = np.load(out / "results.npz")["final"]
    assert np.array_equal(finals["cpu"], finals["cpu-reference"])
    with pytest.raises(SystemExit):   # argparse names the allowed backends
        main(["run", BIRTH_DEATH, "--backend", "numpy", "--out", str(tmp_path / "x")])
