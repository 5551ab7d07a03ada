"""The hardening report's reproducers run as a user runs them: ``python -m app ...`` in a
child process, in an empty working folder. Each must end within its time limit with the exit
code named (2: refused before the run, 3: stopped in the run with what it had, 0: legitimate and
run correctly), no traceback, a message naming the file, key or value and the reason, and
nothing written outside the run's own folder (the working folder and the user's files are
untouched).

Reproducers whose surface is not the command line are tested where that surface is: the GUI's
Open (YAML alias cycles, a session on a FIFO, session files that are deeply nested, carry a
YAML bomb or a Python tag, name a member with ``../`` or hold fields of the wrong type) in
``tests/gui/test_workbench_hostile.py``; the generated-module symlink in
``tests/compute/test_jit_tempfiles.py``; a numba cache damaged by runs killed mid-compile in
``tests/compute``; the largest CPU sizes with Stop in ``tests/sims/common/test_largest_sizes.py``.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
PRESETS = ROOT / "resources" / "presets"
SWEEP = ROOT / "resources" / "sweeps" / "ssa-dimerization-c2.yaml"


@dataclass
class Case:
    """One reproducer: ``make(folder)`` writes its inputs and returns the CLI arguments."""

    make: Callable[[Path], list[str]]
    code: int
    words: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    seconds: float = 60.0          # generous on a loaded 2-core machine; a hang meets it


def _file(folder: Path, name: str, text: str | bytes) -> Path:
    path = folder / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def _run(config: str | Path, *extra: str) -> list[str]:
    return ["run", str(config), "--backend", "cpu-reference", "--out", "out", "--no-png", *extra]


SSA = """domain: ssa
model:
  species: {X: 1}
  parameters: {k: 1.0}
  reactions: [%s]
ensemble: {realizations: 2, t_end: 10.0, samples: 11, seed: 1}
"""


def _sbml(body: str, reactions: int = 1) -> str:
    from tests.sims.ssa.test_sbml import law, sbml

    return sbml(reactions="".join(law(f"r{i + 1}", body) for i in range(reactions)))


def _sbml_k_over_0() -> str:
    from tests.sims.ssa.test_sbml import law, sbml

    return sbml(reactions=law("r1", "<apply><divide/><ci>k</ci><cn>0</cn></apply>"),
                parameters='<parameter id="k" value="1" constant="true"/>')


def _recursive_function() -> str:
    from tests.sims.ssa.test_sbml_limits import call, with_functions

    return with_functions({"f": call("f")}, call("f", "<ci>X</ci>"))


def _nested(depth: int) -> str:
    from tests.sims.ssa.test_sbml_limits import nested

    return nested(depth)


def _cellml(k: str) -> str:
    from tests.sims.cardiac.test_cellml_messages import TEMPLATE

    return TEMPLATE.format(k=k)


def _cellml_run(folder: Path, k: str) -> list[str]:
    model = _file(folder, "model.cellml", _cellml(k))
    cfg = _file(folder, "run.yaml", f"domain: cardiac\nmesh: {{kind: single}}\nmodel: {{file: {model}, "
                "voltage: membrane.V}\nprotocol: {t_end: 10, stimuli: []}\n")
    return _run(cfg)


def _sweep(folder: Path, *extra: str, text: str | None = None) -> list[str]:
    path = _file(folder, "sweep.yaml", text) if text is not None else SWEEP
    return ["sweep", str(path), "--out", "out", "--no-png", *extra]


def _huge_csv(folder: Path) -> list[str]:
    csv = folder / "huge.csv"
    with open(csv, "wb") as fh:
        fh.write(b"t,i\n0,1\n")
        fh.truncate(300 << 20)                         # sparse: 300 MB, no disk used
    preset = (PRESETS / "channel" / "00-model-b-surrogate.yaml").read_text()
    text = preset.replace("data: {source: surrogate, noise_sd: 0.0, seed: 1}", f"data: {{source: csv, path: {csv}}}")
    text = text.replace("protocols: protocols/", f"protocols: {PRESETS.parent}/protocols/")
    text = text.replace("model: models/", f"model: {PRESETS.parent}/models/")
    return _run(_file(folder, "fit.yaml", text))


GRID = SWEEP.read_text().replace("num: 5, scale: log}}", "num: 1000, scale: log}}\n"
                                 "    - {key: model.parameters.c1, range: {start: 0.5, stop: 2, num: 1000}}")
HUGE_POINT = SWEEP.read_text().replace("realizations: 128", "realizations: 67108864")
DIV = '<apply><divide/><cn cellml:units="per_ms">1</cn><cn cellml:units="dimensionless">0</cn></apply>'

CASES: dict[str, Case] = {
    # ---- unsafe ----------------------------------------------------------------------------
    "cache clear on a folder of the user's": Case(
        lambda d: ((d / "mine").mkdir(), _file(d / "mine", "a.bin", b"user data"),
                   _file(d / "mine", "b.bin", b"more"), ["cache", "clear"])[-1],
        0, ("removed 0",), env={"BIOGPU_CACHE_DIR": "mine"}),
    # ---- crash, SIGSEGV ----------------------------------------------------------------------
    "SBML function that calls itself": Case(
        lambda d: _run(_file(d, "rec.xml", _recursive_function())), 2, ("rec.xml", "calls itself")),
    "SBML kinetic law nested 100,000 levels": Case(
        lambda d: _run(_file(d, "deep.xml", _sbml(_nested(100_000)))), 2, ("deep.xml", "nested")),
    # ---- hang ---------------------------------------------------------------------------------
    "YAML alias that contains itself": Case(
        lambda d: _run(_file(d, "a.yaml", "domain: ssa\nname: &a [*a]\n")), 2, ("a.yaml:2", "contains it")),
    "YAML merge key that merges itself": Case(
        lambda d: _run(_file(d, "m.yaml", "domain: ssa\nx: &m {<<: *m}\n")), 2, ("m.yaml:2", "contains it")),
    "infinite propensity k/0": Case(
        lambda d: _run(_file(d, "inf.xml", _sbml_k_over_0())), 3, ("reaction r1 is inf at t = 0", "state X=")),
    "stoichiometry 1e12": Case(
        lambda d: _run(_file(d, "grow.yaml", SSA % "{name: r, reactants: {X: 1}, products: {X: 1000000000001}, "
                                                   "rate: k}")),
        3, ("realization", "limit 1e+10", "X=")),
    "sweep --workers 5000": Case(lambda d: _sweep(d, "--workers", "5000"), 2, ("--workers 5000", "1 to")),
    "sweep 1000 x 1000 grid": Case(lambda d: _sweep(d, text=GRID), 2, ("sweep.yaml", "more than the limit")),
    "sweep point too large for memory": Case(lambda d: _sweep(d, text=HUGE_POINT), 2,
                                             ("sweep.yaml", "sweep point p00000-r00", "needs about",
                                              "1.0 GiB is available"), env={"BIOGPU_MEMORY_LIMIT": "1G"}),
    "300 MB recordings CSV": Case(_huge_csv, 2, ("huge.csv", "a CSV recording may have at most")),
    "GA population 4e6 on 12,500 points": Case(
        lambda d: ["run", "00-model-b-surrogate", "--backend", "cpu", "--out", "out", "--no-png",
                   "--set", "ga.population=4000000"],
        2, ("ga.population", "4,000,000 individuals x 12,500 recorded points")),
    "SBML with 5,000 reactions": Case(
        lambda d: _run(_file(d, "big.xml", _sbml("<ci>X</ci>", 5000))), 2, ("big.xml", "more than 2,000 reactions")),
    # ---- silently wrong -------------------------------------------------------------------------
    "SBML law 0/0": Case(lambda d: _run(_file(d, "nan.xml", _sbml("<apply><divide/><cn>0</cn><cn>0</cn></apply>"))),
                         3, ("reaction r1 is nan", "state X=", "at t = ")),
    "SBML law -k": Case(lambda d: _run(_file(d, "neg.xml", _sbml("<apply><minus/><cn>2</cn></apply>"))),
                        3, ("reaction r1 is -2.0", "state X=", "at t = ")),
    "SBML law k/X at X = 0": Case(
        lambda d: _run(_file(d, "div.xml", _sbml("<apply><divide/><cn>1</cn><apply><minus/><ci>X</ci>"
                                                 "<cn>49</cn></apply></apply>"))),
        3, ("reaction r1 is inf", "state X=49", "at t = ")),
    # ---- tracebacks and unclear messages --------------------------------------------------------
    "CellML constant 1/0": Case(lambda d: _cellml_run(d, DIV), 2, ("model.cellml", "membrane.k", "not a finite number")),
    "CellML one state, no gate": Case(lambda d: _cellml_run(d, '<cn cellml:units="per_ms">0.1</cn>'), 2,
                                      ("model.cellml", "no gating variable")),
    "NUMBA_NUM_THREADS=0": Case(lambda d: _run("birth-death"), 2, ("NUMBA_NUM_THREADS", "0"),
                                env={"NUMBA_NUM_THREADS": "0"}),
    "BIOGPU_MEMORY_LIMIT=-5G": Case(lambda d: _run("birth-death"), 2, ("BIOGPU_MEMORY_LIMIT", "-5G"),
                                    env={"BIOGPU_MEMORY_LIMIT": "-5G"}),
    "sweep --scheduler http://": Case(lambda d: _sweep(d, "--scheduler", "http://127.0.0.1:8786"), 2,
                                      ("--scheduler http://127.0.0.1:8786", "http:// is not supported")),
}


def _snapshot(folder: Path) -> dict[str, bytes | str]:
    """Every file under ``folder`` (but the run folder 'out') with its bytes or link target."""
    out: dict[str, bytes | str] = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if rel.parts[0] == "out":
            continue
        out[str(rel)] = os.readlink(path) if path.is_symlink() else (path.read_bytes() if path.is_file() else "dir")
    return out


def _child(folder: Path, args: list[str], env: dict[str, str], seconds: float) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("BIOGPU_MEMORY", "NUMBA_NUM_THREADS"))}
    base["PYTHONPATH"] = os.pathsep.join([str(ROOT), base.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-m", "app", *args], cwd=folder, env={**base, **env},
                          capture_output=True, text=True, timeout=seconds)


def _check(folder: Path, case: Case, args: list[str]) -> str:
    before = _snapshot(folder)
    done = _child(folder, args, case.env, case.seconds)
    err = done.stderr
    assert "Traceback" not in err and "Traceback" not in done.stdout, err
    assert done.returncode == case.code, (done.returncode, err, done.stdout[-2000:])
    text = err if case.code else done.stdout
    for word in case.words:
        assert word in text, (word, text)
    assert _snapshot(folder) == before                # nothing outside the run folder changed
    if case.code == 2:                                # refused before the run: no results
        assert not (folder / "out").exists() or not any((folder / "out").rglob("*"))
    return text


@pytest.mark.parametrize("name", list(CASES))
def test_reproducer(name, tmp_path):
    case = CASES[name]
    if "SBML" in name:
        pytest.importorskip("libsbml")
    if "CellML" in name:
        pytest.importorskip("myokit")
    if "sweep" in name:
        pytest.importorskip("distributed")
    folder = tmp_path / "work"
    folder.mkdir()
    _check(folder, case, case.make(folder))


def test_reproducer_scheduler_that_accepts_and_never_answers(tmp_path):
    """The port takes the connection and never speaks: refused after our own timeout."""
    pytest.importorskip("distributed")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    try:
        port = server.getsockname()[1]
        folder = tmp_path / "work"
        folder.mkdir()
        _check(folder, Case(lambda d: [], 2, (f"tcp://127.0.0.1:{port}", "cannot reach a Dask scheduler")),
               _sweep(folder, "--scheduler", f"tcp://127.0.0.1:{port}"))
    finally:
        server.close()


def _edited_checkpoint(domain: str, folder: Path, how: str) -> tuple[Path, str]:
    """A checkpoint of ``domain`` edited by hand (``how``), and the array edited."""
    from app.sims.common.checkpoint import write_checkpoint
    from tests.sims.common.test_checkpoint_schema import real_state

    state, schema = real_state(domain)
    edited = dict(state)
    if domain == "network" and how != "fraction":
        name = {"index": "engine_syn_pre", "neuron": "spike_neurons", "nan": "engine_V"}[how]
        a = np.asarray(state[name])
        edited[name] = {"index": lambda: a + 1000, "neuron": lambda: np.full_like(a, 2**31 - 1),
                        "nan": lambda: np.where(np.arange(a.size) == 3, np.nan, a)}[how]()
    else:
        spec = next(s for s in schema if s.kind == "int" and s.name in state and np.asarray(state[s.name]).size)
        name = spec.name
        edited[name] = np.asarray(state[name]).astype(float) + 0.5
    path = folder / f"{domain}-{how}.npz"
    write_checkpoint(path, edited, domain)
    return path, name


RESUME = {"network": "network/00-development-10x10-fast.yaml", "epidermis": "epidermis/small-cpu-demo.yaml",
          "cardiac": "cardiac/00-single-cell-1hz.yaml"}


@pytest.mark.parametrize("domain,how,words", [
    ("network", "index", "above its largest allowed value"),
    ("network", "neuron", "above its largest allowed value"),
    ("network", "nan", "nan at index (3,)"),
    ("network", "fraction", "fractional"),
    ("epidermis", "fraction", "fractional"),
    ("cardiac", "fraction", "fractional"),
])
def test_reproducer_hand_edited_checkpoint(domain, how, words, tmp_path):
    folder = tmp_path / "work"
    folder.mkdir()
    path, name = _edited_checkpoint(domain, folder, how)
    args = _run(PRESETS / RESUME[domain], "--set", f"run.checkpoint={path}")
    _check(folder, Case(lambda d: [], 2, (f"checkpoint {path}", f"'{name}'", words)), args)


def test_reproducer_yaml_error_in_a_checkpoints_config(tmp_path):
    """Reported at the checkpoint's path (was '<checkpoint>:2')."""
    from app.sims.common.checkpoint import write_checkpoint
    from tests.sims.common.test_checkpoint_schema import real_state

    folder = tmp_path / "work"
    folder.mkdir()
    state, _ = real_state("network")
    path = folder / "net.npz"
    write_checkpoint(path, dict(state, config_yaml=np.array("domain: network\n  : bad: [\n")), "network")
    args = _run(PRESETS / RESUME["network"], "--set", f"run.checkpoint={path}")
    text = _check(folder, Case(lambda d: [], 2, (f"checkpoint {path} (its embedded config)", "YAML syntax error")),
                  args)
    assert "<checkpoint>" not in text

