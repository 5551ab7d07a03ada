"""The channel-fitting run config: model, protocols, target data and GA settings."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from app.sims.channel.model import ChannelModel, ChannelSpec, compile_model
from app.sims.channel.protocol import Protocol, ProtocolSpec, compile_protocols
from app.sims.common.config import ConfigError, Document, build, load_yaml, spec
from app.sims.common.simulation import RESOURCES

MAX_POPULATION = 4_000_000


@dataclass(frozen=True)
class DataSpec:
    """Where the target currents come from."""

    source: str = field(default="surrogate", metadata=spec(choices=("surrogate", "csv", "abf")))
    path: str | None = None                      # CSV/ABF file, relative to the config file
    noise_sd: float = field(default=0.0, metadata=spec(range=(0.0, 1e6)))   # pA, surrogate only
    seed: int = field(default=1, metadata=spec(range=(0, 2**64 - 1)))
    channel: int = field(default=0, metadata=spec(range=(0, 64)))          # ABF channel


@dataclass(frozen=True)
class GASettings:
    """Genetic algorithm settings (defaults as in Ben-Shalom et al. 2012)."""

    population: int = field(default=1120, metadata=spec(range=(2, MAX_POPULATION)))
    generations: int = field(default=500, metadata=spec(range=(1, 10_000_000)))
    crossover: float = field(default=0.1, metadata=spec(range=(0.0, 1.0)))
    mutation: float = field(default=0.01, metadata=spec(range=(0.0, 1.0)))
    creep: float = field(default=0.05, metadata=spec(range=(0.0, 1.0)))          # relative step
    creep_fraction: float = field(default=0.0, metadata=spec(range=(0.0, 1.0)))  # 0: the paper
    chi2_threshold: float = field(default=0.0, metadata=spec(range=(0.0, 1e30)))
    seed: int = field(default=2012, metadata=spec(range=(0, 2**64 - 1)))


@dataclass(frozen=True)
class ChannelConfig:
    """A fit: ``model`` (inline or a model file), ``protocols`` (inline or a file), data, GA."""

    domain: str = "channel"
    name: str = ""
    description: str = ""
    model: ChannelSpec | str = ""
    protocols: list[ProtocolSpec] | str = ""
    data: DataSpec = field(default_factory=DataSpec)
    ga: GASettings = field(default_factory=GASettings)
    base_dir: str = ""      # folder that relative paths are resolved against (set on load)
    model_file: str = ""      # the file the model came from, "" when inline (set on load)
    protocols_file: str = ""  # the file the protocols came from, "" when inline (set on load)

    def model_(self) -> ChannelModel:
        return compile_model(self.model)

    def protocol(self) -> Protocol:
        return compile_protocols(self.protocols)

    def target(self, model: ChannelModel, protocol: Protocol) -> np.ndarray:
        """The data the GA fits, (n_points,) pA."""
        from app.sims.channel import data
        if self.data.source == "surrogate":
            return data.surrogate(model, protocol, noise_sd=self.data.noise_sd, seed=self.data.seed)
        path = resolve(self.data.path or "", self.base_dir)
        if self.data.source == "csv":
            return data.load_csv(path, protocol)
        return data.load_abf(path, protocol, self.data.channel)


def resolve(path: str, base_dir: str) -> Path:
    """A relative path against the config's folder, then against ``resources/``."""
    p = Path(path)
    if p.is_absolute():
        return p
    for root in (Path(base_dir or "."), RESOURCES):
        if (root / p).exists():
            return root / p
    raise ConfigError(f"file not found: {path} (looked in {base_dir or '.'} and {RESOURCES})")


def _load_part(value, kind, base_dir: str, key: str, doc: Document) -> tuple:
    """(spec, document, key path) of an inline part or of a file holding it; errors in a file
    point at that file's lines."""
    from app.sims.common.config import convert
    if not isinstance(value, str):
        return value, doc, (key,)
    if not value:
        raise doc.error(f"'{key}' is required", (key,))
    sub = load_yaml(resolve(value, base_dir))
    path = (key,) if isinstance(sub.data, dict) and key in sub.data else ()
    data = sub.data[key] if path else sub.data
    return convert(kind, data, sub, path), sub, path


def load_config(doc: Document) -> ChannelConfig:
    """Validate a parsed YAML document as a channel-fitting run config."""
    cfg: ChannelConfig = build(ChannelConfig, doc.data, doc)
    base = cfg.base_dir or (str(Path(doc.source).parent) if doc.source and doc.source != "<text>" else "")
    model, model_doc, model_path = _load_part(cfg.model, ChannelSpec, base, "model", doc)
    protocols, proto_doc, proto_path = _load_part(cfg.protocols, list[ProtocolSpec], base, "protocols", doc)
    compile_model(model, model_doc, model_path)
    compile_protocols(protocols, proto_doc, proto_path)
    if cfg.data.source != "surrogate" and not cfg.data.path:
        raise doc.error(f"data source '{cfg.data.source}' needs a 'path'", ("data",))
    model_file = str(resolve(cfg.model, base).resolve()) if isinstance(cfg.model, str) else ""
    protocols_file = str(resolve(cfg.protocols, base).resolve()) if isinstance(cfg.protocols, str) else ""
    return replace(cfg, model=model, protocols=protocols, base_dir=base, model_file=model_file,
                   protocols_file=protocols_file)
