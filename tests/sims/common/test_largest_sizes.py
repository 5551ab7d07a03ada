"""The largest sizes the validators allow on the CPU: the memory estimate is printed before any
work and refuses what cannot fit, before allocating; what fits shows progress from its first
long step, and Stop (``Session.stop()``, as the GUI's Stop button) ends it inside that step (a
setup or a slice that lasts minutes), not after it."""

from __future__ import annotations

import logging
import threading

import pytest

from app.sims.channel.config import GENERATION_WORK_LIMIT
from app.sims.common.config import ConfigError
from app.sims.common.session import Session, preflight
from app.sims.common.simulation import load_run_config, resolve_config_path

CHANNEL_POINTS = 12_500              # the paper protocols of the channel preset
LARGEST = {
    # population x points at the cpu-reference engine's generation work limit
    "channel": ("00-model-b-surrogate",
                [f"ga.population={int(GENERATION_WORK_LIMIT['cpu-reference'] // CHANNEL_POINTS)}"]),
    "cardiac": ("01-sphere-paper", ["mesh.level=9"]),
    "epidermis": ("00-full-100-cells", ["tissue.cells=2000000"]),
}


def _config(domain: str, extra: tuple[str, ...] = ()):
    preset, sets = LARGEST[domain]
    return load_run_config(resolve_config_path(preset), overrides=[*sets, *extra])


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []
        self.seen = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())
        self.seen.set()


def _stop_at_first_progress(domain: str, extra: tuple[str, ...] = ()) -> tuple[Session, list[str]]:
    """Run headless on the NumPy engine (what a CPU run starts on), wait for the first progress
    line of a long step, press Stop; the run must end inside that step."""
    dom, cfg = _config(domain, extra)
    session = Session(dom, cfg, "cpu-reference", handover=False)
    handler, logger = _Lines(), logging.getLogger("app.setup")
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    errors: list[BaseException] = []

    def work() -> None:
        try:
            session.run()
        except BaseException as exc:      # reported below, never lost in the thread
            errors.append(exc)

    thread = threading.Thread(target=work, daemon=True)
    try:
        thread.start()
        assert handler.seen.wait(600), "no progress line from the long step"
        lines_at_stop = len(handler.lines)
        session.stop()
        thread.join(600)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
    assert not thread.is_alive() and not errors, errors
    assert session.stopped
    return session, handler.lines[:lines_at_stop + 2]


def test_a_level_9_sphere_stops_while_it_is_built():
    session, lines = _stop_at_first_progress("cardiac")
    assert session.last_frame is None                 # stopped in the setup: nothing ran
    assert any("building the level-9 sphere" in line for line in lines), lines


def test_the_largest_channel_generation_stops_while_it_is_scored():
    session, lines = _stop_at_first_progress("channel")
    assert any(line.startswith(("scoring", "drawing")) for line in lines), lines


def test_a_large_epidermis_stops_while_its_cells_are_placed():
    """A tenth of the maximum (2,000,000 cells needs about 18 GiB, see below)."""
    session, lines = _stop_at_first_progress("epidermis", ("tissue.cells=200000",))
    assert session.last_frame is None
    assert any("cells" in line for line in lines), lines


@pytest.mark.parametrize("domain", list(LARGEST))
def test_the_largest_sizes_are_refused_where_memory_cannot_hold_them(domain, monkeypatch):
    """With a 16 MiB limit every one of them is refused by the preflight, naming its size key,
    before anything is allocated."""
    monkeypatch.setenv("BIOGPU_MEMORY_LIMIT", "16M")
    dom, cfg = _config(domain)
    with pytest.raises(ConfigError, match=r"needs about .* of host memory .*; 16\.0 MiB is available here") as info:
        preflight(dom, cfg, "cpu")
    assert info.value.path and info.value.path[0] in ("ga", "mesh", "tissue"), info.value.path


@pytest.mark.parametrize("domain", list(LARGEST))
def test_the_cli_prints_time_and_memory_before_the_run(domain, tmp_path, capsys, monkeypatch):
    """The CLI's lines before any work: the time estimate (or that there is none) and the memory
    estimate with what is available; here the run is then refused (a 16 MiB limit)."""
    from app.cli import main

    monkeypatch.setenv("BIOGPU_MEMORY_LIMIT", "16M")
    preset, sets = LARGEST[domain]
    args = ["run", preset, "--backend", "cpu", "--out", str(tmp_path / "out"), "--no-png"]
    for item in sets:
        args += ["--set", item]
    assert main(args) == 2
    out, err = capsys.readouterr()
    assert "expected: " in out and "memory: about " in out and "16.0 MiB available here" in out, out
    assert "needs about" in err
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())   # nothing written


def test_the_largest_channel_population_is_refused_for_its_work():
    """The population's maximum, 4,000,000, on the 12,500 points: hours a generation."""
    from app.sims.channel.config import MAX_POPULATION

    dom, cfg = load_run_config(resolve_config_path("00-model-b-surrogate"),
                               overrides=[f"ga.population={MAX_POPULATION}"])
    with pytest.raises(ConfigError, match=r"4,000,000 individuals x 12,500 recorded points") as info:
        preflight(dom, cfg, "cpu")
    assert info.value.path == ("ga", "population")


def test_the_largest_epidermis_of_a_measured_class_gets_its_time_up_front(tmp_path, capsys, monkeypatch):
    """The cell count only sizes the work: the lesson's measured rate gives 2,000,000 cells an
    estimate of days before anything runs (here then refused for memory)."""
    from app.cli import main

    monkeypatch.setenv("BIOGPU_MEMORY_LIMIT", "16M")
    assert main(["run", "lesson-first-divisions", "--backend", "cpu", "--set", "tissue.cells=2000000",
                 "--out", str(tmp_path / "out"), "--no-png"]) == 2
    out = capsys.readouterr().out
    assert "expected: " in out and " days" in out.split("expected: ")[1].splitlines()[0], out
