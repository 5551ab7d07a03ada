"""Shared pieces of the bad-input suites: the CLI run in process, config files, an alias bomb."""

from __future__ import annotations

from pathlib import Path

from app.cli import main
from app.sims.common.simulation import PRESETS

ALIAS_BOMB = ("a: &a [x, x, x, x, x, x, x, x, x, x]\n"
              + "".join(f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
                        for p, c in zip("abcdefgh", "bcdefghi"))
              + "domain: ssa\n")

PRESET = {
    "ssa": PRESETS / "ssa" / "birth-death.yaml",
    "channel": PRESETS / "channel" / "00-model-b-surrogate.yaml",
    "cardiac": PRESETS / "cardiac" / "02-sheet-spiral-s1s2.yaml",
    "cardiac-single": PRESETS / "cardiac" / "00-single-cell-1hz.yaml",
    "network": PRESETS / "network" / "00-development-10x10-fast.yaml",
    "epidermis": PRESETS / "epidermis" / "small-cpu-demo.yaml",
}


def run_cli(capsys, config: str | Path, *sets: str, out: Path, backend: str = "cpu-reference",
            extra: tuple[str, ...] = ()) -> tuple[int, str]:
    """``python -m app run`` in process: (exit code, stderr); never a traceback."""
    args = ["run", str(config), "--backend", backend, "--out", str(out), "--no-png", *extra]
    for item in sets:
        args += ["--set", item]
    code = main(args)
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    return code, err


def write(tmp_path: Path, text: str | bytes, name: str = "c.yaml") -> Path:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path
