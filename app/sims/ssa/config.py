"""The SSA run config: a network (or the spatial grid template) and the ensemble settings."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from app.sims.common.config import ConfigError, Document, build, spec
from app.sims.common.steering import Steerable, SteeringEvent, by_key, check_steering
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
    steering: tuple[SteeringEvent, ...] = ()    # changes made while it ran (replayed at their sample)

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
    return replace(cfg, steering=check_steering(cfg.steering, by_key(steerables(cfg, network)), doc))


MAX_RATE = 1e12
STEERING_MODES = ("continue", "explore")


def steerables(cfg: SSAConfig, network: Network | None = None) -> tuple[Steerable, ...]:
    """What a running ensemble takes: ``mode`` (continue: a change applies to the running
    ensemble from the current sample; explore: each change re-runs the ensemble from t = 0, a
    small ensemble first), ``rates.<reaction>`` and ``initial.<species>``; the ensemble's size,
    algorithm and times need a restart."""
    net = network if network is not None else cfg.network()
    out = [Steerable("mode", "choice", choices=STEERING_MODES,
                     doc="continue: from the current sample; explore: re-run from t = 0")]
    out += [Steerable(f"rates.{name}", "float", (0.0, MAX_RATE), log=True,
                      doc=f"rate constant of reaction {name}") for name in net.reaction_names]
    out += [Steerable(f"initial.{name}", "int", (0, INT32_MAX // 2), log=True,
                      doc=f"count of {name} (continue: set in every realization now)")
            for name in net.species]
    out += [Steerable("ensemble.realizations", "int", live=False),
            Steerable("ensemble.samples", "int", live=False),
            Steerable("ensemble.t_end", "float", live=False),
            Steerable("ensemble.algorithm", "choice", choices=ALGORITHMS, live=False)]
    return tuple(out)


INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


def count_limit(backend: str) -> int:
    """The largest count the engine's integer type holds: int32 on CUDA, int64 on the CPU."""
    return INT32_MAX if backend == "cuda" else INT64_MAX


def check_counts(cfg: SSAConfig, network: Network, backend: str) -> None:
    """Refuse, before the run, counts the engine's integers cannot hold: initial counts over the
    limit, and in a network whose reactions never raise the total count (then every count stays
    at most the initial total) an initial total over it. Open networks are checked while running."""
    # the CUDA engine keeps its sums relative to the initial counts: half the int32 range
    limit = INT32_MAX // 2 if backend == "cuda" else INT64_MAX
    engine = "the CUDA engine (32-bit counts)" if backend == "cuda" else "the CPU engines (64-bit counts)"
    where = ("grid",) if cfg.grid is not None else ("model", "species")
    for name, x in zip(network.species, network.x0):
        if int(x) > limit:
            raise ConfigError(f"the initial count {int(x):,} of {name} does not fit {engine}: "
                              f"at most {limit:,}", path=where + ((name,) if cfg.model else ()))
    if backend == "cuda" and network.n_reactions and int(abs(network.change).max()) > 2**24:
        raise ConfigError(f"a reaction changes a count by {int(abs(network.change).max()):,}: the CUDA "
                          "engine checks its 32-bit counts every 64 reactions, so at most 2^24 a reaction",
                          path=where)
    total = int(sum(int(x) for x in network.x0))
    if total > limit and network.n_reactions and (network.change.sum(axis=1) <= 0).all():
        raise ConfigError(f"the initial counts add up to {total:,}, and the reactions keep the total, "
                          f"so one species can reach it: more than {engine} hold ({limit:,})",
                          path=where)


def estimated_work(cfg: SSAConfig) -> tuple[float, bool]:
    """(reaction events of the run, measured to t_end): an exact algorithm's work from a pilot
    rate equations or a pilot ensemble (:mod:`app.sims.ssa.workload`); tau-leaping's is
    realizations x t_end."""
    if cfg.ensemble.algorithm == "tau-leap":
        return float(cfg.ensemble.realizations * cfg.ensemble.t_end), True
    from app.sims.ssa.workload import workload

    work = workload(cfg)
    return cfg.ensemble.realizations * work.events_per_realization, work.measured


def estimate_memory(cfg: SSAConfig, backend: str):
    """Host and GPU bytes of the run's largest arrays (engine state, statistics, snapshots)."""
    from app.sims.common.memory import estimate

    net = cfg.network()
    ens = cfg.ensemble
    r, s, m = float(ens.realizations), float(net.n_species), float(net.n_reactions)
    k, h, bins = float(ens.samples), float(len(cfg.histogram_indices(net))), float(ens.histogram_bins)
    snapshots = float(min(len(set(ens.snapshot_times)), ens.samples) + 1)   # + the final state
    kept = f"kept states: {snapshots:,.0f} x {r:,.0f} realizations x {s:,.0f} species x 8 B"
    host = {kept: snapshots * r * s * 8,
            f"statistics: {k:,.0f} samples x ({s:,.0f} species + {h:.0f} histograms x {bins:.0f} bins)":
            k * (2 * s + h * (bins + 2)) * 8}
    gpu = {}
    if backend == "cuda":
        host["state copies: 2 x realizations x species"] = 2 * r * s * 8
        gpu["states: realizations x species x 4 B"] = r * s * 4
        gpu["per-realization counters"] = r * 8
    else:
        host[f"engine state: {r:,.0f} realizations x ({s:,.0f} species + 2 x {m:,.0f} reactions) x 8 B"] = \
            r * ((s + 1) + 2 * m + 5) * 8
        if backend == "cpu-reference":
            host["random-number buffers"] = r * 64 * 8
        host["statistics pass: one state copy"] = r * s * 8
    return estimate(host, gpu, ("ensemble", "realizations"),
                    {kept: ("ensemble", "snapshot_times")} if snapshots > 2 else None)


def check_before_run(cfg: SSAConfig, backend: str) -> None:
    """Integer ranges of the engine that runs (see :func:`check_counts`) and, on the compiled
    CPU engine, the size of the code it would generate."""
    network = cfg.network()
    check_counts(cfg, network, backend)
    if backend == "cpu" and cfg.ensemble.algorithm != "tau-leap":
        from app.sims.ssa.compiled import check_code_size
        check_code_size(network)


def _resolve_sbml(cfg: SSAConfig, doc: Document) -> SSAConfig:
    """``cfg`` with its SBML path absolute (relative paths are from the config's folder)."""
    from pathlib import Path

    path = Path(cfg.sbml).expanduser()
    if not path.is_absolute() and doc.source and not doc.source.startswith("<"):
        path = Path(doc.source).parent / path
    if not path.is_file():
        raise doc.error(f"SBML file '{cfg.sbml}' not found (looked at {path})", ("sbml",))
    return replace(cfg, sbml=str(path.resolve()))
