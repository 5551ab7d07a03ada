"""The epidermis run config: mechanics (subcellular elements), gene network, growth and
division, the initial tissue, the run.

Units: lengths in µm; the element drag is 1, which sets the time unit (a force of 1 moves an
element 1 µm per time unit). Defaults are the PROPOSED set of
``shared/reference/epidermis/PARAMETERS.md`` (the paper's Tables 1 and 2 are not available),
with the gene-network values chosen here so that basal cells (attached, Ovol2 high) keep
Delta low and grow, and detached cells switch to Ovol1 high, Delta high (see ``model.py``).

Stratification (CPU engine, seed 2010; only ``c1_height`` was tuned, see its comment): with
the current defaults (pitch 7 µm, layers in 6 µm bins) the small demo (16 cells, growth every
200 steps) goes 16 -> 32 -> 48 -> 80 cells by step 16,000, 4 layers, 60 % suprabasal (see
``small-cpu-demo.yaml``; the paper preset's CUDA result is in ``00-full-100-cells.yaml``).
Measured before the pitch changed from PARAMETERS.md's 9.7 µm (cells not yet touching at the
start), all other defaults as now: 100 cells with growth every 200 steps for 13,000 steps (the
same 65 growth events as the paper's 130,000 steps at 2000) end with 402 cells: the 100
attached cells all basal at z = 2-3.7 µm, the 302 free ones all suprabasal, cell centres up to
17 µm: 3 layers by 6 µm bins. The paper reports 535 cells: here only attached cells and the few
suprabasal cells whose neighbours keep Delta low grow, so the count rises by about the basal
count per round.

The intracellular Morse defaults pull a 20-element body together to a mean nearest-neighbour
distance of ~0.69 r* (2.2 µm; r* = 3.22 µm is the pair minimum): 19 partners attract over
xi2 = 2 µm. So relaxed 20-element cells have a radius of ~3.1 µm, and the default lattice pitch
is 7 µm (not PARAMETERS.md's 9.7 µm, at which they would not touch). A shorter-range
attraction (xi1 = 0.5, xi2 = 1 µm, same r* and well depth) keeps the spacing within 10 % of r*,
but its force at r -> 0 is 120 instead of 2, which a new element placed at the cell centre does
not survive at dt = 0.1, so the defaults stay.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from app.sims.common.config import Document, build, spec
from app.sims.common.steering import (Steerable, SteeringEvent, by_key, check_steering,
                                      config_steerables)

MODES = ("movement", "genes", "full")          # the paper's three models (Table 3)
BOUNDARIES = ("periodic", "none")              # periodic in x and y, or no boundary at all
SEARCHES = ("cell_list", "centre_cutoff")      # O(N) hash-sorted grid, or the paper's Alg. 2
DIVISION_AXES = ("long", "vertical")
LAYOUTS = ("lattice", "random")
MAX_RANDOM_LAYOUT_CELLS = 50_000               # dart throwing is quadratic: about 30 s at this size


@dataclass(frozen=True)
class Morse:
    """V(r) = U0·exp(-r/xi1) - V0·exp(-r/xi2)."""

    U0: float = field(default=2.5, metadata=spec(range=(0.0, 1e4)))
    xi1: float = field(default=1.0, metadata=spec(range=(1e-3, 100.0), doc="µm"))
    V0: float = field(default=1.0, metadata=spec(range=(0.0, 1e4)))
    xi2: float = field(default=2.0, metadata=spec(range=(1e-3, 100.0), doc="µm"))


def _morse(U0, xi1, V0, xi2):
    return field(default_factory=lambda: Morse(U0, xi1, V0, xi2))


@dataclass(frozen=True)
class MechanicsSettings:
    """Subcellular-element forces (the paper's Eq. for dX/dt)."""

    intra: Morse = _morse(2.5, 1.0, 1.0, 2.0)
    inter: Morse = _morse(2.5, 1.0, 1.0, 2.0)
    inter_cutoff: float = field(default=3.2, metadata=spec(
        range=(0.1, 20.0), doc="µm; intercellular pairs interact (repulsion only) below it"))
    membrane: Morse = _morse(5.0, 0.5, 2.0, 1.0)
    wall_stiffness: float = field(default=5.0, metadata=spec(
        range=(0.0, 1e4), doc="linear push back of any element below z = 0 (no flux)"))
    # 2.5 µm, not the 2.0 µm of ALGORITHM.md: after the 500-step relaxation a 20-element body
    # has only 1-4 elements below 2.0 µm (a quarter of the 100 cells just one, A ≈ 1.6), and
    # with A < ~2 the Ovol toggle flips to the suprabasal state at once (25 of 100 cells
    # suprabasal after 1000 steps of the gene network; 0 of 100 with 2.5 µm, 2-6 C1 elements).
    c1_height: float = field(default=2.5, metadata=spec(
        range=(0.0, 20.0), doc="µm; elements of an attached cell below it are membrane-adhesive (C1)"))
    centre_cutoff: float = field(default=16.0, metadata=spec(
        range=(1.0, 100.0), doc="µm; cell-centre pre-filter of the centre_cutoff search"))


@dataclass(frozen=True)
class Hill:
    """One regulatory factor f(x) = a + b / (1 + (c·x)^h): b > 0 represses, b < 0 activates."""

    a: float = field(default=0.0, metadata=spec(range=(-1e3, 1e3)))
    b: float = field(default=1.0, metadata=spec(range=(-1e3, 1e3)))
    c: float = field(default=1.0, metadata=spec(range=(0.0, 1e4)))
    h: float = field(default=2.0, metadata=spec(range=(0.0, 16.0)))


def _hill(a, b, c, h=2.0):
    return field(default_factory=lambda: Hill(a, b, c, h))


@dataclass(frozen=True)
class GeneSettings:
    """Notch (N), Delta (D), bound complex (B), Ovol2 (O2), Ovol1 (O1), c-Myc (M); the
    paper's equations with its Hill factors named after (regulator, target)."""

    G: float = field(default=0.4, metadata=spec(range=(0.0, 100.0), doc="TGF-beta, constant"))
    k_a: float = field(default=0.1, metadata=spec(range=(0.0, 100.0), doc="N + <D> binding"))
    k_d: float = field(default=0.01, metadata=spec(range=(0.0, 100.0), doc="B unbinding"))
    d_N: float = field(default=0.1, metadata=spec(range=(0.0, 100.0)))
    d_D: float = field(default=0.1, metadata=spec(range=(0.0, 100.0)))
    d_B: float = field(default=0.1, metadata=spec(range=(0.0, 100.0)))
    d_O2: float = field(default=0.1, metadata=spec(range=(0.0, 100.0)))
    d_O1: float = field(default=0.1, metadata=spec(range=(0.0, 100.0)))
    d_M: float = field(default=0.1, metadata=spec(range=(0.0, 100.0)))
    BN: Hill = _hill(0.05, 0.05, 10.0)     # B represses N production (mildly)
    ON: Hill = _hill(0.0, 1.0, 20.0)       # Ovol2 represses N
    ND: Hill = _hill(0.1, -0.1, 5.0)       # N activates D
    VO: Hill = _hill(0.0, 0.1, 10.0)       # Ovol1 represses Ovol2
    GO: Hill = _hill(0.0, 1.0, 5.0)        # TGF-beta represses Ovol2
    OV: Hill = _hill(0.0, 0.1, 10.0)       # Ovol2 represses Ovol1
    AV: Hill = _hill(0.0, 1.0, 1.0)        # membrane adhesion A represses Ovol1
    OM: Hill = _hill(0.0, 0.1, 10.0)       # Ovol2 represses c-Myc
    initial: float = field(default=0.5, metadata=spec(range=(0.0, 100.0),
                           doc="initial N and D of every cell (others start at 0)"))
    initial_noise: float = field(default=0.05, metadata=spec(range=(0.0, 1.0),
                                 doc="relative uniform noise on the initial N and D"))


@dataclass(frozen=True)
class GrowthSettings:
    """Growth by one element every ``interval`` steps for low-Delta cells; division at
    ``max_elements`` into two cells of half as many."""

    interval: int = field(default=2000, metadata=spec(range=(1, 10**9), doc="steps"))
    delta_low: float = field(default=0.5, metadata=spec(range=(0.0, 100.0),
                             doc="a cell grows while its Delta is below this"))
    jitter: float = field(default=0.32, metadata=spec(range=(0.0, 5.0),
                          doc="µm; a new element sits at the cell centre ± this (uniform)"))
    division_axis: str = field(default="long", metadata=spec(
        choices=DIVISION_AXES, doc="split at the median along the long axis or along z"))
    division_noise: float = field(default=0.05, metadata=spec(
        range=(0.0, 1.0), doc="relative noise on each daughter's half of the gene products"))


@dataclass(frozen=True)
class TissueSettings:
    """The initial tissue: cells in one layer on the membrane, the box."""

    cells: int = field(default=100, metadata=spec(range=(1, 2_000_000)))
    elements: int = field(default=20, metadata=spec(range=(2, 64), doc="per cell at start"))
    max_elements: int = field(default=40, metadata=spec(range=(4, 64),
                              doc="a cell divides when it reaches this many elements"))
    layout: str = field(default="lattice", metadata=spec(choices=LAYOUTS))
    # 7 µm: relaxed 20-element cells are ~6.2 µm across, so the first layer is confluent
    # (PARAMETERS.md's 9.7 µm assumed cells of radius 4.8 µm; ours relax smaller, see above).
    pitch: float = field(default=7.0, metadata=spec(range=(1.0, 100.0),
                         doc="µm between neighbouring cell centres at start"))
    cell_radius: float = field(default=3.9, metadata=spec(
        range=(0.5, 50.0), doc="µm; elements start uniformly in a ball of this radius"))
    boundary: str = field(default="periodic", metadata=spec(
        choices=BOUNDARIES, doc="periodic in x and y (minimum image), or no boundary"))
    seed: int = field(default=2010, metadata=spec(range=(0, 2**63 - 1),
                      doc="initial placement, initial noise, growth jitter, division noise"))


@dataclass(frozen=True)
class RunSettings:
    mode: str = field(default="full", metadata=spec(
        choices=MODES, doc="movement: mechanics only; genes: + gene network; full: + growth and division"))
    search: str = field(default="cell_list", metadata=spec(
        choices=SEARCHES, doc="cell_list: O(N) grid of element hashes; centre_cutoff: the paper's "
        "cell-centre pre-filter (reference)"))
    steps: int = field(default=130_000, metadata=spec(range=(1, 2**31 - 1)))
    dt: float = field(default=0.1, metadata=spec(range=(1e-5, 1.0)))
    relax_steps: int = field(default=500, metadata=spec(
        range=(0, 10**6), doc="movement-only steps before step 0 to relax the initial bodies"))
    slice_steps: int = field(default=500, metadata=spec(
        range=(1, 10**7), doc="steps per advance() on CUDA (the CPU engine adapts)"))
    history_every: int = field(default=500, metadata=spec(range=(1, 10**7),
                               doc="steps between history samples (cells, layers, states)"))
    # A relaxed cell is about 6 µm across (radius 3.1 µm at 20 elements, 3.9 at 40), so a
    # layer of cells is one 6-µm bin of centre heights.
    layer_thickness: float = field(default=6.0, metadata=spec(
        range=(0.5, 100.0), doc="µm; cell centres are binned in z by this to count layers"))
    checkpoint: str = field(default="", metadata=spec(doc="checkpoint file, written every slice "
                                                          "that crosses a growth event"))
    resume: bool = field(default=True, metadata=spec(doc="start from the checkpoint if it exists"))


@dataclass(frozen=True)
class EpidermisConfig:
    domain: str = "epidermis"
    name: str = ""
    description: str = ""
    tissue: TissueSettings = field(default_factory=TissueSettings)
    mechanics: MechanicsSettings = field(default_factory=MechanicsSettings)
    genes: GeneSettings = field(default_factory=GeneSettings)
    growth: GrowthSettings = field(default_factory=GrowthSettings)
    run: RunSettings = field(default_factory=RunSettings)
    steering: tuple[SteeringEvent, ...] = ()    # changes made while it ran (replayed at their step)

    @property
    def grid_side(self) -> int:
        """Cells per side of the initial square lattice."""
        return int(-(-self.tissue.cells ** 0.5 // 1))

    @property
    def box(self) -> float:
        """Periodic box side L (µm) in x and y: the initial lattice's extent."""
        return self.grid_side * self.tissue.pitch


def load_config(doc: Document) -> EpidermisConfig:
    """Validate a parsed YAML document as an epidermis run config."""
    cfg: EpidermisConfig = build(EpidermisConfig, doc.data, doc)
    t, m = cfg.tissue, cfg.mechanics
    if t.elements > t.max_elements:
        raise doc.error(f"elements ({t.elements}) exceeds max_elements ({t.max_elements})",
                        ("tissue", "elements"))
    if t.max_elements % 2:
        raise doc.error("max_elements must be even (a cell divides into two halves)",
                        ("tissue", "max_elements"))
    if t.boundary == "periodic":
        need = max(3 * m.inter_cutoff, 4 * t.cell_radius)
        what = "3 inter_cutoff and 4 cell_radius"
        if cfg.run.search == "centre_cutoff":
            need, what = max(need, 2 * m.centre_cutoff), what + " and 2 centre_cutoff"
        if cfg.box < need:
            raise doc.error(f"the periodic box is {cfg.box:g} µm (grid side x pitch); the minimum "
                            f"image needs at least {need:g} µm ({what})", ("tissue", "pitch"))
    if t.layout == "random" and t.cells > MAX_RANDOM_LAYOUT_CELLS:
        raise doc.error(f"the random layout places cells one by one against all placed so far "
                        f"(time grows with the square of the count): at most "
                        f"{MAX_RANDOM_LAYOUT_CELLS:,} cells, got {t.cells:,}; use layout: lattice",
                        ("tissue", "cells"))
    if m.centre_cutoff < m.inter_cutoff:
        raise doc.error("centre_cutoff must not be below inter_cutoff", ("mechanics", "centre_cutoff"))
    return replace(cfg, steering=check_steering(cfg.steering, by_key(steerables(cfg)), doc))


# Config parts that may change while running (steering) or on resume; the tissue may not.
LIVE_SECTIONS = ("mechanics", "genes", "growth")
# (run.search is not live: on CUDA it is a compile-time switch of the kernels)
LIVE_RUN_KEYS = ("steps", "dt", "slice_steps", "checkpoint", "resume")


def steerables(cfg: EpidermisConfig) -> tuple[Steerable, ...]:
    """What a growing tissue takes while it runs: ``wound`` (remove the cells of a region),
    ``growth.paused``, the mechanics, gene network and growth settings and ``run.{steps, dt,
    slice_steps, checkpoint, resume}`` (the engine is rebuilt from its exact state);
    the tissue and the other run settings need a restart."""
    out = [Steerable("wound", "gesture", region=True,
                     doc="remove the cells whose centre is in the region (a brush in µm or cell indices)"),
           Steerable("growth.paused", "bool", live=cfg.run.mode == "full",
                     doc="no growth or division while true (run.mode full)")]
    out += [s for section in LIVE_SECTIONS for s in config_steerables(getattr(cfg, section), section)]
    out += [replace(s, live=s.key.split(".")[-1] in LIVE_RUN_KEYS) for s in config_steerables(cfg.run, "run")]
    out += config_steerables(cfg.tissue, "tissue", live=False)
    return tuple(out)


DEVICE_LIST_CAP = 16      # pair-list entries per element on the GPU (more: it scans the bins)


def estimate_memory(cfg: EpidermisConfig, backend: str):
    """Host and GPU bytes: the element arrays at twice the initial cells (the first capacity),
    the engine's forces, contact sums and cell list, and the placement's work arrays (on the
    GPU also the second sorted buffer, the reference positions and the pair list)."""
    from app.sims.common.memory import estimate

    t = cfg.tissue
    cap = float(max(64, 2 * t.cells) + 31) // 32 * 32
    e = float(t.max_elements)
    elements = cap * e
    host = {f"elements: {cap:,.0f} cells of capacity x {e:.0f} elements x 13 B": elements * 13 + cap * 28,
            f"forces, contact sums and cell list: {elements:,.0f} element slots x 80 B": elements * 80,
            f"placement: {t.cells:,} cells x {t.elements} elements x 5 x 24 B": float(t.cells) * t.elements * 120}
    gpu = {}
    if backend == "cuda":
        per_slot = 13 + 80 + 36 + 4 * DEVICE_LIST_CAP
        gpu = {"elements, forces, cell list and pair list": elements * per_slot + cap * 28}
    return estimate(host, gpu, ("tissue", "cells"))


def estimated_work(cfg: EpidermisConfig) -> tuple[float, bool]:
    """(element-steps of the run: the initial relaxation's and the run's, measured): in mode
    full the growing cells (the initial basal ones: a division leaves one daughter on the
    membrane, growing, and squeezes the other up, where it stops) each gain an element every
    ``growth.interval`` steps, and a division keeps the elements, so the tissue holds
    ``cells·elements + cells·⌊step/interval⌋`` elements at ``step``."""
    t, r = cfg.tissue, cfg.run
    start = t.cells * t.elements
    work = start * (r.relax_steps + r.steps)
    if r.mode == "full":
        events = r.steps // cfg.growth.interval      # growth events within the run
        # each event k (at step k·interval) adds `cells` elements for the rest of the run
        work += t.cells * (events * r.steps - cfg.growth.interval * events * (events + 1) // 2)
    return float(work), True
