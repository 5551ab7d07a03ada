"""The surface every domain exposes: ``Simulation`` and ``Frame``; presets and run configs of
the registered domains (:mod:`app.sims.common.registry`)."""

from __future__ import annotations

import abc
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Mapping

import numpy as np

from app.package_data import data_dir
from app.sims.common.config import ConfigError, load_yaml, parse_yaml
from app.sims.common.registry import DOMAINS, Domain
from app.sims.common.steering import SteeringEvent

__all__ = ["DOMAINS", "Domain", "Frame", "Simulation", "default_preset", "find_preset", "freeze",
           "load_run_config", "presets", "read_run_document", "resolve_config_path"]


def freeze(array: np.ndarray) -> np.ndarray:
    """A read-only copy of ``array``: frames never share memory with a running engine."""
    out = np.array(array, copy=True)
    out.flags.writeable = False
    return out


@dataclass(frozen=True)
class Frame:
    """Immutable snapshot of a running simulation: all the GUI ever sees of it.

    Domain frames subclass this and add their arrays (already frozen with :func:`freeze`).
    """

    progress: float            # 0..1 of the whole run
    done: bool
    wall_seconds: float
    throughput: float          # domain unit per wall second, named by ``throughput_unit``
    throughput_unit: str
    status: str = ""           # one line for the status bar
    events: tuple[SteeringEvent, ...] = ()   # the steering applied so far (marks on time axes)


AFTER_CHANGE_FRACTION = 8   # the slice after a steering change is this much shorter


def slice_after_change(steps: int, least: int = 1) -> int:
    """A CPU slice's step budget right after a steering change: ``steps`` cut by
    :data:`AFTER_CHANGE_FRACTION` (at least ``least``), so the first frame that shows the change
    comes soon; the wall-clock sizing grows it back over the next slices."""
    return max(least, steps // AFTER_CHANGE_FRACTION)


class Simulation(abc.ABC):
    """A running simulation advanced in bounded slices by its owning thread."""

    domain: ClassVar[str]

    @classmethod
    @abc.abstractmethod
    def from_config(cls, cfg: Any, backend: str) -> "Simulation":
        """Create from a validated config on ``backend`` ('cpu' or 'cuda')."""

    @abc.abstractmethod
    def advance(self, until: int | None = None, within: int = 0) -> Frame:
        """Do a bounded slice of work and return the newest frame; never past step ``until``
        (a steering event's boundary), and, where the domain works inside a step
        (:attr:`within`), never past ``within`` of step ``until``."""

    def frame(self) -> Frame | None:
        """The newest frame without advancing (the state a steering change left); None where
        the domain builds its frames only in :meth:`advance`."""
        return None

    @abc.abstractmethod
    def state(self) -> dict[str, Any]:
        """Checkpoint: numpy arrays and plain values, enough for :meth:`restore`."""

    @classmethod
    @abc.abstractmethod
    def restore(cls, state: Mapping[str, Any], backend: str) -> "Simulation":
        """Resume from :meth:`state` output."""

    @property
    @abc.abstractmethod
    def finished(self) -> bool:
        """True once the run has reached its end."""

    @property
    def can_hand_over(self) -> bool:
        """Whether :meth:`restore` of :meth:`state` continues this run exactly now (on another
        engine of the same backend family): the session's hand-over to the compiled engine."""
        return True

    # ---- steering (see app.sims.common.steering) ----------------------------------------
    steered: tuple[SteeringEvent, ...] = ()     # the events applied so far, in order

    @property
    def step(self) -> int:
        """Where the run is in the domain's step counter (a steering event's ``at``)."""
        raise NotImplementedError(f"{self.domain} has no step counter")

    @property
    def sim_time(self) -> float:
        """The simulated time at :attr:`step`, in the domain's unit (what plots put on their
        time axis): SSA and network seconds of model time, cardiac ms, epidermis model time,
        the channel fit its iteration."""
        return float(self.step)

    @property
    def within(self) -> int:
        """The work done inside :attr:`step` (a steering event's ``within``): 0 where a change
        only takes effect between whole steps."""
        return 0

    @property
    def at_boundary(self) -> bool:
        """Whether a change applied now takes effect exactly at :attr:`step` (False inside a
        step the engine has not finished, e.g. an SSA sample interval on the CPU)."""
        return True

    def steer(self, key: str, value: Any, region: Mapping[str, Any] | None = None) -> SteeringEvent:
        """Apply a checked change at the current step boundary and record it."""
        if not self.at_boundary:
            raise RuntimeError(f"{self.domain}: a change waits for a step boundary (at_boundary)")
        at, t, within = self.step, self.sim_time, self.within
        event = SteeringEvent(at, key, value, self.apply_change(key, value, region),
                              None if region is None else dict(region), t, within)
        self.steered = (*self.steered, event)
        return event

    def apply_change(self, key: str, value: Any, region: Mapping[str, Any] | None) -> Any:
        """Apply one change (already checked against the domain's ``steerables``); return the
        value it replaced (None for a gesture)."""
        raise ConfigError(f"{self.domain} does not accept changes while running")

    def results(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """(arrays for results.npz, values for summary.json) of the run so far."""
        return {}, {}

    def close(self) -> None:
        """Free device memory; called in the owning thread."""


RESOURCES = data_dir("resources")
PRESETS = RESOURCES / "presets"


def presets(domain: str) -> list[Path]:
    """Shipped preset files of ``domain`` (its manifest's presets folder), sorted by name."""
    return sorted(DOMAINS[domain].presets_dir.glob("*.yaml"))


def default_preset(domain: str) -> Path:
    """The preset a panel opens with (``default.yaml`` link or the first one)."""
    files = presets(domain)
    for f in files:
        if f.stem.startswith("00-"):
            return f
    return files[0]


def find_preset(name: str) -> Path | None:
    """A shipped preset by name: ``birth-death``, ``ssa/birth-death`` (or with ``.yaml``)."""
    stem = name[:-5] if name.endswith(".yaml") else name
    domain, _, preset = stem.rpartition("/")
    found = [p for d in ([domain] if domain else DOMAINS) if d in DOMAINS for p in presets(d)
             if p.stem == preset]
    return found[0] if len(found) == 1 else None


def resolve_config_path(name: str | Path) -> Path:
    """A config file path as given, else the shipped preset of that name."""
    path = Path(name)
    if path.exists() or path.suffix not in ("", ".yaml"):
        return path
    return find_preset(str(name)) or path


def sbml_run_document(path: Path):
    """An SBML model file opened as a run: an SSA config with default ensemble settings."""
    import yaml

    data = {"domain": "ssa", "name": path.stem, "sbml": str(path.expanduser().resolve())}
    return parse_yaml(yaml.safe_dump(data, sort_keys=False), str(path))


def read_run_document(path_or_text: str | Path, *, text: bool = False,
                      overrides: list[str] | None = None, source: str | None = None):
    """A run config file (or text) parsed as a mapping, with ``key=value`` overrides applied;
    ``source`` names where the text came from in messages (default ``<text>``)."""
    from app.sims.common.config import set_path

    if not text and Path(str(path_or_text)).suffix.lower() in (".xml", ".sbml"):
        doc = sbml_run_document(Path(path_or_text))
    else:
        doc = (parse_yaml(str(path_or_text), source or "<text>") if text
               else load_yaml(resolve_config_path(path_or_text)))
    if not isinstance(doc.data, dict):
        raise doc.error("a run config is a mapping with a 'domain' key")
    for item in overrides or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--set expects key=value, got '{item}'")
        set_path(doc.data, key, value)
    return doc


def load_run_config(path_or_text: str | Path, *, text: bool = False,
                    overrides: list[str] | None = None, source: str | None = None) -> tuple[Domain, Any]:
    """Load a run config file (or text) of any domain, apply ``key=value`` overrides, validate."""
    doc = read_run_document(path_or_text, text=text, overrides=overrides, source=source)
    name = doc.data.get("domain")
    if not isinstance(name, str) or name not in DOMAINS:
        raise doc.error(f"unknown domain {name!r}; valid: {', '.join(DOMAINS)}", ("domain",))
    domain = DOMAINS[name]
    return domain, domain.load().load_config(doc)

