"""The cultured-network run config: culture, neuron, synapses, growth, run length, analysis.

Units are SI as in BrainGrid (s, V, A, Ohm, F); lengths are grid units (spacing 1).
Defaults are the BrainGrid / Graphitti values of ``tR_1.0--fE_0.98_10000.xml``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from app.sims.common.config import Document, build, spec
from app.sims.common.steering import Steerable, SteeringEvent, by_key, check_steering

LAYOUTS = ("reference", "random")
SPIKE_RECORDING = ("all", "last_epoch", "none")
SYNAPSE_TYPES = ("EE", "EI", "IE", "II")   # source -> target
MAX_DELAY_STEPS = 48                         # delay + chunk must fit the 64-step spike history


@dataclass(frozen=True)
class CultureSettings:
    """The grid and who is inhibitory or endogenously active (a "starter")."""

    width: int = field(default=10, metadata=spec(range=(1, 4096)))
    height: int = field(default=10, metadata=spec(range=(1, 4096)))
    layout: str = field(default="reference", metadata=spec(choices=LAYOUTS,
                        doc="reference: BrainGrid's 10x10 motif tiled; random: placed with the seed"))
    inhibitory_fraction: float = field(default=0.02, metadata=spec(range=(0.0, 1.0)))
    starter_fraction: float = field(default=0.10, metadata=spec(range=(0.0, 1.0)))
    seed: int = field(default=777, metadata=spec(range=(0, 2**63 - 1),
                      doc="placement (random layout), starter thresholds and noise amplitudes"))


@dataclass(frozen=True)
class NeuronSettings:
    """Leaky integrate-and-fire neuron (BrainGrid AllLIFNeurons)."""

    Cm: float = field(default=3e-8, metadata=spec(range=(1e-15, 1.0)))
    Rm: float = field(default=1e6, metadata=spec(range=(1.0, 1e12)))
    Vrest: float = field(default=0.0, metadata=spec(range=(-1.0, 1.0)))
    Vthresh: float = field(default=15e-3, metadata=spec(range=(-1.0, 1.0)))
    Vreset: float = field(default=13.5e-3, metadata=spec(range=(-1.0, 1.0)))
    Vinit: float = field(default=13.0e-3, metadata=spec(range=(-1.0, 1.0)))
    Iinject: float = field(default=13.5e-9, metadata=spec(range=(-1e-3, 1e-3)))
    Inoise_min: float = field(default=1.0e-9, metadata=spec(range=(0.0, 1e-3)))
    Inoise_max: float = field(default=1.5e-9, metadata=spec(range=(0.0, 1e-3)))
    starter_Vthresh_min: float = field(default=13.565e-3, metadata=spec(range=(-1.0, 1.0)))
    starter_Vthresh_max: float = field(default=13.655e-3, metadata=spec(range=(-1.0, 1.0)))
    starter_Vreset: float = field(default=13.0e-3, metadata=spec(range=(-1.0, 1.0)))
    Trefract_exc: float = field(default=3e-3, metadata=spec(range=(0.0, 1.0)))
    Trefract_inh: float = field(default=2e-3, metadata=spec(range=(0.0, 1.0)))


@dataclass(frozen=True)
class SynapseType:
    """Tsodyks-Markram parameters of one source->target type."""

    U: float = field(default=0.5, metadata=spec(range=(1e-6, 1.0)))
    tau_rec: float = field(default=1.1, metadata=spec(range=(1e-6, 1e6)))
    tau_facil: float = field(default=0.05, metadata=spec(range=(1e-6, 1e6)))
    tau: float = field(default=3e-3, metadata=spec(range=(1e-6, 10.0), doc="PSC decay"))
    delay: float = field(default=1.5e-3, metadata=spec(range=(0.0, 1.0), doc="transmission delay"))


def _syn(U, D, F, tau, delay):
    return field(default_factory=lambda: SynapseType(U, D, F, tau, delay))


@dataclass(frozen=True)
class SynapseSettings:
    EE: SynapseType = _syn(0.50, 1.100, 0.050, 3e-3, 1.5e-3)
    EI: SynapseType = _syn(0.05, 0.125, 1.200, 3e-3, 0.8e-3)
    IE: SynapseType = _syn(0.25, 0.700, 0.020, 6e-3, 0.8e-3)
    II: SynapseType = _syn(0.32, 0.144, 0.060, 6e-3, 0.8e-3)

    def types(self) -> tuple[SynapseType, ...]:
        return (self.EE, self.EI, self.IE, self.II)


@dataclass(frozen=True)
class GrowthSettings:
    """Activity-dependent neurite outgrowth (BrainGrid ConnGrowth)."""

    epsilon: float = field(default=0.60, metadata=spec(range=(1e-6, 1.0)))
    beta: float = field(default=0.10, metadata=spec(range=(1e-6, 10.0)))
    rho: float = field(default=1e-4, metadata=spec(range=(0.0, 10.0), doc="grid units per second"))
    target_rate: float = field(default=1.0, metadata=spec(range=(1e-6, 1000.0), doc="Hz"))
    start_radius: float = field(default=0.4, metadata=spec(range=(0.0, 30.0)))
    weight_scale: float = field(default=1e-8, metadata=spec(range=(0.0, 1.0), doc="A per unit^2"))
    max_radius: float = field(default=30.0, metadata=spec(range=(0.0, 30.0),
                              doc="radii are clamped to [0, max_radius]"))


@dataclass(frozen=True)
class RunSettings:
    epochs: int = field(default=600, metadata=spec(range=(1, 1_000_000)))
    epoch_seconds: float = field(default=100.0, metadata=spec(range=(1e-3, 1e5)))
    dt: float = field(default=1e-4, metadata=spec(range=(1e-6, 1e-2)))
    seed: int = field(default=777, metadata=spec(range=(0, 2**64 - 1), doc="noise (Philox key)"))
    slice_seconds: float = field(default=1.0, metadata=spec(range=(1e-3, 1e5),
                                 doc="simulated time per advance() on CUDA (the CPU engine adapts)"))
    checkpoint: str = field(default="", metadata=spec(doc="checkpoint file written after every epoch"))
    resume: bool = field(default=True, metadata=spec(doc="start from the checkpoint file if it exists"))


@dataclass(frozen=True)
class AnalysisSettings:
    burst_bin: float = field(default=0.01, metadata=spec(range=(1e-4, 10.0), doc="s"))
    burst_fraction: float = field(default=0.05, metadata=spec(
        range=(1e-6, 1.0), doc="a bin is bursting when this fraction of all neurons fires in it"))
    spikes: str = field(default="all", metadata=spec(choices=SPIKE_RECORDING))
    raster_seconds: float = field(default=5.0, metadata=spec(range=(0.01, 1000.0)))


@dataclass(frozen=True)
class NetworkConfig:
    domain: str = "network"
    name: str = ""
    description: str = ""
    culture: CultureSettings = field(default_factory=CultureSettings)
    neuron: NeuronSettings = field(default_factory=NeuronSettings)
    synapses: SynapseSettings = field(default_factory=SynapseSettings)
    growth: GrowthSettings = field(default_factory=GrowthSettings)
    run: RunSettings = field(default_factory=RunSettings)
    analysis: AnalysisSettings = field(default_factory=AnalysisSettings)
    steering: tuple[SteeringEvent, ...] = ()    # changes made while it ran (replayed at their step)

    @property
    def n_neurons(self) -> int:
        return self.culture.width * self.culture.height

    @property
    def steps_per_epoch(self) -> int:
        return int(round(self.run.epoch_seconds / self.run.dt))

    def delay_steps(self) -> tuple[int, ...]:
        """BrainGrid's totalDelay = int(delay/dt) + 1 per type (EE, EI, IE, II)."""
        return tuple(int(t.delay / self.run.dt + 1e-9) + 1 for t in self.synapses.types())


def load_config(doc: Document) -> NetworkConfig:
    """Validate a parsed YAML document as a cultured-network run config."""
    cfg: NetworkConfig = build(NetworkConfig, doc.data, doc)
    n = cfg.neuron
    if n.Inoise_min > n.Inoise_max:
        raise doc.error("Inoise_min must not exceed Inoise_max", ("neuron", "Inoise_min"))
    if n.starter_Vthresh_min > n.starter_Vthresh_max:
        raise doc.error("starter_Vthresh_min must not exceed starter_Vthresh_max",
                        ("neuron", "starter_Vthresh_min"))
    if cfg.culture.inhibitory_fraction + cfg.culture.starter_fraction > 1.0:
        raise doc.error("inhibitory and starter fractions add up to more than 1",
                        ("culture", "starter_fraction"))
    for name, d in zip(SYNAPSE_TYPES, cfg.delay_steps()):
        if d > MAX_DELAY_STEPS:
            raise doc.error(f"delay is {d} steps; at most {MAX_DELAY_STEPS} steps of dt",
                            ("synapses", name, "delay"))
    steps = cfg.steps_per_epoch
    if steps < 1:
        raise doc.error("epoch_seconds is shorter than dt", ("run", "epoch_seconds"))
    if steps * cfg.run.epochs >= 2**30:
        raise doc.error(f"{cfg.run.epochs} epochs of {steps} steps exceed 2^30 steps "
                        "(step counters are 32-bit on the GPU)", ("run", "epochs"))
    if cfg.n_neurons > 2**26:
        raise doc.error("at most 2^26 neurons", ("culture", "width"))
    return replace(cfg, steering=check_steering(cfg.steering, by_key(steerables(cfg)), doc))


MAX_WEIGHT_FACTOR = 100.0


def steerables(cfg: NetworkConfig) -> tuple[Steerable, ...]:
    """What a developing culture takes while it runs: ``stimulate`` (the neurons of a region,
    a brush in grid units or indices, fire at the next step), ``scale.<type>`` (a factor on the
    weights of a synapse type, EE, EI, IE or II: 0 blocks it, a drug wash-in) and
    ``growth.target_rate``; the culture, neurons and synapse kinetics need a restart."""
    g = GrowthSettings.__dataclass_fields__["target_rate"].metadata["range"]
    return (Steerable("stimulate", "gesture", region=True, doc="the region's neurons fire"),
            *(Steerable(f"scale.{t}", "float", (0.0, MAX_WEIGHT_FACTOR),
                        doc=f"factor on the {t} synapse weights (0 blocks them)") for t in SYNAPSE_TYPES),
            Steerable("growth.target_rate", "float", g, log=True, unit="Hz",
                      doc="the firing rate growth aims at"),
            *(Steerable(f"synapses.{t}.{name}", "float", live=False) for t in SYNAPSE_TYPES
              for name in ("U", "tau_rec", "tau_facil", "tau", "delay")))


READBACK_STEPS = 9999               # the CUDA engine copies spikes back at least this often


def estimate_memory(cfg: NetworkConfig, backend: str):
    """Host and GPU bytes: per-neuron state, and synapses at the largest radius growth can reach
    in this run (radii grow by at most rho per second: start_radius + rho x run length, capped
    at max_radius; two neurons connect while their circles overlap)."""
    import math

    from app.sims.common.memory import estimate

    n = float(cfg.n_neurons)
    g = cfg.growth
    radius = min(g.max_radius, g.start_radius + g.rho * cfg.run.epoch_seconds * cfg.run.epochs)
    per_neuron = min(n - 1, math.pi * (2 * radius + 1) ** 2)
    synapses = n * per_neuron
    bins = float(-(-cfg.steps_per_epoch // max(1, int(round(cfg.analysis.burst_bin / cfg.run.dt)))))
    host = {f"neurons: {n:,.0f} x 40 values x 8 B": n * 40 * 8,
            f"synapses: up to {synapses:,.0f} (radius up to {radius:.3g}) x 3 copies x 64 B":
            synapses * 64 * 3,
            "population activity bins of one epoch": bins * 8 * 2}
    gpu = {}
    if backend == "cuda":
        # a read-back's spikes are bounded by one per refractory period + 1 step; the engine
        # keeps two such buffers and the blocks' segments
        gap = 1 + round(min(cfg.neuron.Trefract_exc, cfg.neuron.Trefract_inh) / cfg.run.dt)
        gpu = {"neurons": n * 40 * 8, "synapse rows": synapses * 52,
               "spike read-back buffers": 3 * n * (-(-READBACK_STEPS // gap) + 1) * 8}
    return estimate(host, gpu, ("culture", "width"))
