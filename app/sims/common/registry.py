"""The domain registry: every domain declares itself once, in a :class:`Domain` manifest.

Built-in domains are the packages under ``app.sims`` with a ``manifest`` module that defines
``DOMAIN``; other packages add domains through the ``biogpu.domains`` entry point group, whose
entries load to a :class:`Domain` (as napari plugins do)::

    [project.entry-points."biogpu.domains"]
    decay = "my_package.manifest:DOMAIN"

Everything else (the main window's panel list, export, the CLI, the sweep runner, the tests)
reads the registry. A manifest names code by import path (``"package.module:attribute"``), so
reading it imports nothing heavy and ``app.sims`` never imports Qt.
"""

from __future__ import annotations

import importlib
import logging
import pkgutil
import threading
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Any, Iterator, Mapping

from app.package_data import data_dir

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "biogpu.domains"
BACKEND_FALLBACK = {"cpu": "cpu-reference"}   # where a domain has no compiled engine


def resolve(path: str) -> Any:
    """The object an import path names: ``"package.module:attribute"`` or a module path."""
    module, _, attribute = path.partition(":")
    obj: Any = importlib.import_module(module)
    for part in filter(None, attribute.split(".")):
        obj = getattr(obj, part)
    return obj


@dataclass(frozen=True)
class Domain:
    """A domain's manifest: what it is called, where its pieces live.

    ``module`` is the domain's package: it exports ``Config``, ``Simulation`` and
    ``load_config(doc)``. ``engines`` maps a backend name (``cpu-reference``, ``cpu``, ``cuda``)
    to an engine class path; ``panel`` and ``main_plot`` are import paths into the GUI layer
    (``main_plot(frame) -> QWidget`` draws the run's main plot for ``python -m app run``);
    ``bench`` is a module with ``main(backend, out_dir, quick)``. ``presets`` is the folder of
    the domain's shipped run configs (default: ``resources/presets/<name>``). ``exports`` maps a
    standard format (``neuroml``, ``nwb``, ``cellml``) to a function ``export_run(folder, out)``
    writing a run folder's model or data in that format (:mod:`app.sims.common.export`).
    ``prefers_cpu`` names a function ``(config) -> str | None``: why a run is faster on the CPU
    engines than on a GPU (the backend ``auto`` then picks the CPU), or None.
    """

    name: str
    label: str
    module: str
    description: str
    order: int = 100
    engines: Mapping[str, str] = field(default_factory=dict)
    panel: str | None = None
    main_plot: str | None = None
    bench: str | None = None
    presets: Path | None = None
    exports: Mapping[str, str] = field(default_factory=dict)   # format -> "module:export_run"
    prefers_cpu: str | None = None

    def cpu_preference(self, cfg: Any) -> str | None:
        """Why ``cfg`` runs faster on the CPU engines than on a GPU, or None (see ``prefers_cpu``)."""
        return resolve(self.prefers_cpu)(cfg) if self.prefers_cpu and cfg is not None else None

    def load(self) -> ModuleType:
        """The domain's package (``Config``, ``Simulation``, ``load_config``)."""
        return importlib.import_module(self.module)

    @property
    def config_class(self) -> type:
        return self.load().Config

    @property
    def simulation_class(self) -> type:
        return self.load().Simulation

    @property
    def presets_dir(self) -> Path:
        return Path(self.presets) if self.presets is not None else data_dir("resources") / "presets" / self.name

    def engine_class(self, backend: str) -> type:
        """The engine class for ``backend``; a CPU name falls back to the NumPy reference where
        the domain has no compiled engine. An unknown backend is an error."""
        name = backend
        while name not in self.engines and name in BACKEND_FALLBACK:
            name = BACKEND_FALLBACK[name]
        if name not in self.engines:
            raise ValueError(f"the {self.name} domain has no engine for backend {backend!r}; "
                             f"it offers: {', '.join(self.engines)}")
        return resolve(self.engines[name])


class Registry(Mapping[str, Domain]):
    """Domains by name, in their manifest order; filled on first use."""

    def __init__(self) -> None:
        self._domains: dict[str, Domain] = {}
        self._loaded = False
        self._lock = threading.RLock()

    def register(self, domain: Domain, *, replace: bool = False) -> Domain:
        """Add ``domain`` (what the entry-point loader calls for each manifest)."""
        if not isinstance(domain, Domain):
            raise TypeError(f"a domain manifest is an app.sims.common.registry.Domain, got {domain!r}")
        if not domain.name.isidentifier():
            raise ValueError(f"a domain name is a plain identifier, got {domain.name!r}")
        with self._lock:
            self._load()
            if domain.name in self._domains and not replace:
                raise ValueError(f"a domain named {domain.name!r} is already registered "
                                 f"({self._domains[domain.name].module})")
            self._domains[domain.name] = domain
        return domain

    def unregister(self, name: str) -> None:
        with self._lock:
            self._domains.pop(name, None)

    def reload(self) -> None:
        """Forget everything and read the manifests and entry points again."""
        with self._lock:
            self._domains.clear()
            self._loaded = False
            self._load()

    def _load(self) -> None:
        with self._lock:
            if self._loaded:
                return
            self._loaded = True
            for domain in _builtin_manifests():
                self._domains[domain.name] = domain
            for entry in entry_points(ENTRY_POINT_GROUP):
                try:
                    domain = entry.load()
                    self.register(domain)
                except Exception as exc:       # one broken plugin never breaks the others
                    log.warning("domain entry point %s = %s not loaded: %s", entry.name, entry.value, exc)

    def _ordered(self) -> dict[str, Domain]:
        self._load()
        return dict(sorted(self._domains.items(), key=lambda item: (item[1].order, item[0])))

    def __getitem__(self, name: str) -> Domain:
        self._load()
        return self._domains[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._ordered())

    def __len__(self) -> int:
        self._load()
        return len(self._domains)

    def __repr__(self) -> str:
        return f"Registry({', '.join(self)})"


def entry_points(group: str) -> list[metadata.EntryPoint]:
    """The installed entry points of ``group`` (tests stand in for ``pip install`` here)."""
    return list(metadata.entry_points(group=group))


def _builtin_manifests() -> Iterator[Domain]:
    """``DOMAIN`` of every ``app.sims.<package>.manifest`` module."""
    import app.sims

    for info in pkgutil.iter_modules(app.sims.__path__):
        if not info.ispkg or info.name == "common":
            continue
        try:
            module = importlib.import_module(f"app.sims.{info.name}.manifest")
        except ModuleNotFoundError as exc:
            if exc.name != f"app.sims.{info.name}.manifest":
                raise
            continue
        yield module.DOMAIN


DOMAINS = Registry()
register = DOMAINS.register
