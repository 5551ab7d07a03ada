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


def test_run_help_explains_config_and_lists_presets(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "name of a shipped preset" in out and "birth-death" in out
    assert "00-decay-dimerization" in out


def test_mistyped_preset_suggests_close_names(tmp_path, capsys):
    assert main(["run", "birth-deth", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "did you mean ssa/birth-death" in err and "cannot read file" not in err
    assert not (tmp_path / "o").exists()


def test_run_names_only_files_that_exist_and_no_internal_info(tmp_path, capsys):
    out = tmp_path / "run"
    rc = main(["run", BIRTH_DEATH, "--backend", "cpu-reference", "--set", "ensemble.realizations=20",
               "--set", "ensemble.samples=3", "--out", str(out)])
    assert rc == 0
    captured = capsys.readouterr()
    text = captured.out + captured.err
    assert ".tmp" not in text and "INFO" not in text
    assert f"plot in {out / 'plot.png'}" in text and (out / "plot.png").is_file()


def test_bench_announces_where_it_writes(tmp_path, capsys, monkeypatch):
    import types

    from app.sims.common import simulation

    seen = {}
    module = types.SimpleNamespace(main=lambda **kw: seen.update(kw) or 0)
    monkeypatch.setattr("importlib.import_module", lambda name: module)
    name = next(d.name for d in simulation.DOMAINS.values() if d.bench)
    assert main(["bench", name, "--quick", "--out", str(tmp_path / "b")]) == 0
    assert f"results go to {(tmp_path / 'b').resolve()}/" in capsys.readouterr().out
    assert seen["out_dir"] == tmp_path / "b"


def test_bench_paper_runs_the_cardiac_paper_table_and_belongs_to_cardiac(tmp_path, capsys, monkeypatch):
    import types

    seen = {}
    module = types.SimpleNamespace(paper=lambda **kw: seen.update(kw) or 0, main=lambda **kw: 1)
    monkeypatch.setattr("importlib.import_module", lambda name: module)
    assert main(["bench", "cardiac", "--paper", "--backend", "cpu", "--out", str(tmp_path)]) == 0
    assert seen == {"backend": "cpu", "out_dir": tmp_path, "quick": False}
    assert main(["bench", "ssa", "--paper"]) == 2
    assert "--paper belongs to the cardiac benchmark" in capsys.readouterr().err


def test_dsmts_help_is_whole_sentences(capsys):
    """The help text once stopped mid-sentence ('... (Evans, Gillespie & Wilkinson')."""
    from app.sims.ssa.dsmts import main as dsmts_main

    with pytest.raises(SystemExit) as done:
        dsmts_main(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert done.value.code == 0
    assert "Wilkinson 2008)" in out and "false-alarm rate." in out and "Exit codes: 0" in out
