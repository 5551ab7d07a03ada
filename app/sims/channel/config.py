"""The channel-fitting run config: model, protocols, target data and GA settings."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from app.sims.channel.model import ChannelModel, ChannelSpec, compile_model
from app.sims.channel.protocol import Protocol, ProtocolSpec, compile_protocols
from app.sims.channel.files import resolve
from app.sims.channel.recordings import FamilyData
from app.sims.common.config import ConfigError, Document, build, load_yaml, spec
from app.sims.common.steering import (Steerable, SteeringEvent, by_key, check_steering,
                                      config_steerables)

MAX_POPULATION = 4_000_000


@dataclass(frozen=True)
class DataSpec:
    """Where the target currents come from."""

    source: str = field(default="surrogate", metadata=spec(choices=("surrogate", "csv", "abf", "recordings")))
    path: str | None = None                      # CSV/ABF file, relative to the config file
    families: list[FamilyData] = field(default_factory=list)   # source 'recordings': one per family
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
class FitSettings:
    """Which optimiser searches (the GA's ``population``, ``generations``, ``seed`` and
    ``chi2_threshold`` apply to CMA-ES too), the local refinement after it, and uncertainty."""

    optimizer: str = field(default="ga", metadata=spec(choices=("ga", "cmaes")))
    refine: str = field(default="none", metadata=spec(choices=("none", "lm", "nelder-mead")))
    sigma: float = field(default=0.3, metadata=spec(range=(1e-6, 1.0)))      # CMA-ES, of the range
    stall: int = field(default=30, metadata=spec(range=(0, 1_000_000)))   # CMA-ES: generations
    # without a relative improvement of 1e-6 that end the search (0: only the generation limit)
    refine_iterations: int = field(default=200, metadata=spec(range=(1, 1_000_000)))
    uncertainty: bool = True                    # Gauss-Newton intervals and correlations at the end
    mcmc_chains: int = field(default=0, metadata=spec(range=(0, 4_000_000)))   # 0: no posterior
    mcmc_steps: int = field(default=1000, metadata=spec(range=(1, 10_000_000)))


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
    fit: FitSettings = field(default_factory=FitSettings)
    base_dir: str = ""      # folder that relative paths are resolved against (set on load)
    model_file: str = ""      # the file the model came from, "" when inline (set on load)
    protocols_file: str = ""  # the file the protocols came from, "" when inline (set on load)
    steering: tuple[SteeringEvent, ...] = ()    # changes made while it ran (replayed at their iteration)

    def model_(self) -> ChannelModel:
        return compile_model(self.model)

    def protocol(self) -> Protocol:
        return compile_protocols(self.protocols)

    def fit_data(self, model: ChannelModel) -> FitData:
        """Protocol, target currents and weights of the fit (recordings per family, or the
        config's protocol with surrogate / one-file data and unit weights)."""
        if self.data.source != "recordings":
            protocol = self.protocol()
            return FitData(protocol, self.target(model, protocol), None, {})
        from app.sims.channel.recordings import prepare
        protocol = compile_protocols(self.protocols) if self.protocols else None
        protocol, target, weights, notes = prepare(self.data.families, protocol, self.base_dir)
        return FitData(protocol, target, weights, notes)

    def target(self, model: ChannelModel, protocol: Protocol) -> np.ndarray:
        """The data the GA fits, (n_points,) pA."""
        from app.sims.channel import data
        if self.data.source == "surrogate":
            return data.surrogate(model, protocol, noise_sd=self.data.noise_sd, seed=self.data.seed)
        path = resolve(self.data.path or "", self.base_dir)
        if self.data.source == "csv":
            return data.load_csv(path, protocol)
        return data.load_abf(path, protocol, self.data.channel)


@dataclass(frozen=True)
class FitData:
    """What a fit compares against: protocol, target (n_points,) pA, weights (or None: all 1)."""

    protocol: Protocol
    target: np.ndarray
    weights: np.ndarray | None
    notes: dict


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
    from_files = cfg.data.source == "recordings" and all(f.protocol == "file" for f in cfg.data.families)
    if from_files and not cfg.protocols:
        protocols = []
    else:
        protocols, proto_doc, proto_path = _load_part(cfg.protocols, list[ProtocolSpec], base, "protocols", doc)
        compile_protocols(protocols, proto_doc, proto_path)
    compile_model(model, model_doc, model_path)
    if cfg.data.source in ("csv", "abf") and not cfg.data.path:
        raise doc.error(f"data source '{cfg.data.source}' needs a 'path'", ("data",))
    if cfg.data.source == "recordings" and not cfg.data.families:
        raise doc.error("data source 'recordings' needs 'families' (one recording per protocol family)",
                        ("data",))
    model_file = str(resolve(cfg.model, base).resolve()) if isinstance(cfg.model, str) else ""
    protocols_file = str(resolve(cfg.protocols, base).resolve()) if isinstance(cfg.protocols, str) else ""
    cfg = replace(cfg, model=model, protocols=protocols, base_dir=base, model_file=model_file,
                  protocols_file=protocols_file)
    return replace(cfg, steering=check_steering(cfg.steering, by_key(steerables(cfg)), doc))


LIVE_GA_SETTINGS = ("generations", "crossover", "mutation", "creep", "creep_fraction", "chi2_threshold")


def steerables(cfg: ChannelConfig) -> tuple[Steerable, ...]:
    """What a running fit takes between iterations: the GA settings but the population and
    the seed (they size and seed the population), as ``ga.<name>``, and ``fixed.<parameter>``
    (the GA search holds the parameter at the value given, or frees it with none); the fit
    settings need a restart."""
    ga = [replace(s, live=s.key.split(".")[-1] in LIVE_GA_SETTINGS) for s in config_steerables(cfg.ga, "ga")]
    model = cfg.model_()
    fixed = [Steerable(f"fixed.{name}", "gesture", (float(lo), float(hi)),
                       doc="the GA holds it at this value; none frees it")
             for name, lo, hi in zip(model.param_names, model.lower, model.upper)]
    return (*ga, *fixed, *config_steerables(cfg.fit, "fit", live=False))


def estimate_memory(cfg: ChannelConfig, backend: str):
    """Host and GPU bytes of the fit's largest arrays: the population and its copies, the
    data and traces (recorded points), one chunk of scored individuals."""
    from app.sims.channel.protocol import protocol_size
    from app.sims.common.memory import estimate

    _, points = protocol_size(cfg.protocols)
    t, pop = float(points), float(cfg.ga.population)
    n_params, n_states = float(len(cfg.model.parameters)), float(len(cfg.model.states))
    chunk = min(pop, 8192.0)
    host = {f"data and best traces: {t:,.0f} recorded points x 6 x 8 B": 6 * t * 8,
            f"population: {pop:,.0f} individuals x {n_params:.0f} parameters x 4 copies x 8 B":
            4 * pop * (n_params + 1) * 8,
            "one chunk of individuals scored at once": chunk * (t * (3 if backend == "cpu-reference" else 0)
                                                               + 64 * n_states * n_states) * 8}
    gpu = {}
    if backend == "cuda":
        gpu = {"population and its next generation (float32)": 2 * pop * n_params * 4 + pop * 8,
               "data and traces (float32)": 2 * t * 4}
    data = f"data and best traces: {t:,.0f} recorded points x 6 x 8 B"
    return estimate(host, gpu, ("ga", "population"), {data: ("protocols",)})


# simulated samples (individuals x recorded points) one generation may cost: about an hour of
# one engine at its measured rate (CPU ~1e6-1e7 samples/s per core, CUDA ~1e9-1e10 samples/s)
GENERATION_WORK_LIMIT = {"cpu": 2e10, "cpu-reference": 2e9, "cuda": 2e13}


def check_before_run(cfg: ChannelConfig, backend: str) -> None:
    """A rate that is NaN or infinite for every parameter set at some protocol voltage is a
    model error (an individual with such a rate is only an invalid individual): checked on 256
    parameter sets drawn as the GA's first generation is, before anything is allocated."""
    from app.sims.channel.ga import initial_population
    from app.sims.channel.model import undefined_rate
    from app.sims.channel.protocol import protocol_size

    _, points = protocol_size(cfg.protocols)
    work, limit = float(cfg.ga.population) * points, GENERATION_WORK_LIMIT.get(backend, GENERATION_WORK_LIMIT["cpu"])
    if work > limit:
        raise ConfigError(f"{cfg.ga.population:,} individuals x {points:,} recorded points = {work:.3g} "
                          f"simulated samples per generation on the {backend} engine, above its limit "
                          f"{limit:.0e} (one generation would take hours): lower ga.population"
                          + ("" if backend == "cuda" else " or run on CUDA"), path=("ga", "population"))
    model = cfg.model_()
    protocol = cfg.fit_data(model).protocol if cfg.data.source == "recordings" else cfg.protocol()
    voltages = sorted({s.holding for s in protocol.sweeps}
                      | {v for s in protocol.sweeps for op in s.ops for v in (op.v, op.v_end)})
    params = initial_population(cfg.ga.seed, 256, model.lower, model.upper)
    found = undefined_rate(model, params, voltages)
    if found is not None:
        name, v = found
        raise ConfigError(f"rate {name} is NaN or infinite at v = {v:g} mV for every one of "
                          f"{len(params)} parameter sets in the parameter ranges: the model is "
                          "wrong there (e.g. the square root or log of a negative number)",
                          path=("model", "rates"))
    true = model.true_values
    if cfg.data.source == "surrogate" and np.isfinite(true).all():
        rates = model.rate_values(true[None, :], np.asarray(voltages, float))
        for name, r in rates.items():
            bad = ~np.isfinite(r[:, 0])
            if bad.any():
                raise ConfigError(f"the surrogate data would be NaN: at the parameters' 'value's rate "
                                  f"{name} is NaN or infinite at v = {voltages[int(np.flatnonzero(bad)[0])]:g} mV",
                                  path=("model", "parameters"))
