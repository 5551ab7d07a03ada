"""The SSA run config: a network (or the spatial grid template) and the ensemble settings."""

from __future__ import annotations

from dataclasses import dataclass, field

from app.sims.common.config import ConfigError, Document, build, spec
from app.sims.ssa.engine import ALGORITHMS
from app.sims.ssa.model import GridSpec, Network, NetworkSpec, compile_network, grid_network
MAX_HISTOGRAM_SPECIES = 8


@dataclass(frozen=True)
class EnsembleSettings:
    """How many realizations, to when, sampled how often, by which algorithm."""

    realizations: int = field(default=4096, metadata=spec(range=(1, 1 << 26)))
    t_end: float = field(default=10.0, metadata=spec(range=(1e-12, 1e12)))
    samples: int = field(default=101, metadata=spec(range=(2, 100001)))
    algorithm: str = field(default="direct", metadata=spec(choices=ALGORITHMS))
    epsilon: float = field(default=0.03, metadata=spec(range=(1e-4, 0.5)))   # tau-leap error bound
    seed: int = field(default=2024, metadata=spec(range=(0, 2**64 - 1)))
    histogram_species: list[str] = field(default_factory=list)   # empty: the first up to 8
    histogram_bins: int = field(default=64, metadata=spec(range=(2, 1024)))
    snapshot_times: list[float] = field(default_factory=list)    # full samples kept at these


@dataclass(frozen=True)
class SSAConfig:
    """A whole SSA run: ``model`` (a network), ``grid`` (the spatial template) or ``sbml`` (an
    SBML file, relative to the config's folder), and ``ensemble``."""

    domain: str = "ssa"
    name: str = ""
    description: str = ""
    model: NetworkSpec | None = None
    grid: GridSpec | None = None
    sbml: str | None = None
    ensemble: EnsembleSettings = field(default_factory=EnsembleSettings)

    def network(self) -> Network:
        if self.grid is not None:
            return grid_network(self.grid)
        if self.sbml is not None:
            from app.sims.ssa.sbml import load_sbml_network
            return load_sbml_network(self.sbml)
        return compile_network(self.model)

    def sample_times(self):
        import numpy as np
        return np.linspace(0.0, self.ensemble.t_end, self.ensemble.samples)

    def histogram_indices(self, network: Network) -> list[int]:
        names = self.ensemble.histogram_species
        if not names:
            if network.grid_shape is not None:
                return [int(network.grid_index[network.grid_shape[0] // 2, network.grid_shape[1] // 2])]
            return list(range(min(network.n_species, MAX_HISTOGRAM_SPECIES)))
        return [network.species.index(n) for n in names]


def load_config(doc: Document) -> SSAConfig:
    """Validate a parsed YAML document as an SSA run config."""
    cfg: SSAConfig = build(SSAConfig, doc.data, doc)
    if sum(x is not None for x in (cfg.model, cfg.grid, cfg.sbml)) != 1:
        raise doc.error("give exactly one of 'model' (a reaction network), 'grid' (the spatial "
                        "template) or 'sbml' (an SBML file)")
    try:
        if cfg.sbml is not None:
            cfg = _resolve_sbml(cfg, doc)
            network = cfg.network()
        else:
            network = compile_network(cfg.model, doc) if cfg.model is not None else grid_network(cfg.grid)
    except ValueError as exc:
        if isinstance(exc, ConfigError):
            raise
        raise doc.error(str(exc), ("grid",)) from None
    ens = cfg.ensemble
    for i, name in enumerate(ens.histogram_species):
        if name not in network.species:
            raise doc.error(f"unknown species '{name}'", ("ensemble", "histogram_species", i))
    if len(ens.histogram_species) > MAX_HISTOGRAM_SPECIES:
        raise doc.error(f"at most {MAX_HISTOGRAM_SPECIES} histogram species",
                        ("ensemble", "histogram_species"))
    if ens.algorithm == "tau-leap" and network.general:
        raise doc.error("tau-leaping runs mass-action networks without events or assignment "
                        "rules; use algorithm: direct for this model", ("ensemble", "algorithm"))
    for i, t in enumerate(ens.snapshot_times):
        if not 0 <= t <= ens.t_end:
            raise doc.error(f"snapshot time {t} is outside [0, t_end={ens.t_end:g}]",
                            ("ensemble", "snapshot_times", i))
    return cfg


def _resolve_sbml(cfg: SSAConfig, doc: Document) -> SSAConfig:
    """``cfg`` with its SBML path absolute (relative paths are from the config's folder)."""
    from dataclasses import replace
    from pathlib import Path

    path = Path(cfg.sbml).expanduser()
    if not path.is_absolute() and doc.source and not doc.source.startswith("<"):
        path = Path(doc.source).parent / path
    if not path.is_file():
        raise doc.error(f"SBML file '{cfg.sbml}' not found (looked at {path})", ("sbml",))
    return replace(cfg, sbml=str(path.resolve()))
