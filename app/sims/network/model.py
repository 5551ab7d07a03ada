"""The culture model shared by both engines: layout, per-neuron constants, synapse types,
the Tsodyks-Markram update, the growth law and the overlap connectivity (NumPy, float64).

Step semantics (both engines; BrainGrid's ``advanceNeuron`` / ``changePSR`` order):

* step ``m`` of neuron ``i``: if its refractory counter is > 0 it is decremented (membrane
  frozen); else if ``V >= Vthresh`` it spikes (recorded at step ``m``), ``V <- Vreset`` and the
  counter is set to ``round(Trefract/dt)``; else ``V <- C1 V + C2 (I_E + I_I + I0 + Inoise z)``
  with ``z`` the standard normal of (neuron, step) and ``I_E``, ``I_I`` the synaptic currents
  after step ``m-1``.
* then the synaptic currents of every neuron decay, ``I <- I exp(-dt/tau)``, and every synapse
  whose source spiked at step ``m - delay`` delivers: first ``r <- 1 + (r(1-u) - 1) e^(-isi/D)``,
  ``u <- U + u(1-U) e^(-isi/F)`` (isi since its previous delivery; infinite for the first, which
  gives ``u = U, r = 1``), then ``I += W u r``. Currents from excitatory and inhibitory sources
  are summed separately per target (each has its own tau), which is exact because every
  synapse of one class onto one target shares tau.
* a synapse delivers every spike its source emitted ``delay`` steps earlier, whether or not it
  already existed then (spikes in flight across a growth update use the new connectivity).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from math import pi

import numpy as np

from app.sims.common.simulation import PRESETS
from app.sims.network.config import GrowthSettings, NetworkConfig

LAYOUT_DIR = PRESETS / "network" / "layouts"
NEVER = -(2**30)          # "last delivery" of a synapse that never delivered
MAX_CHUNK = 16            # longest chunk of the CUDA engine (register arrays of this size)
# BrainGrid's 10x10 motif (configfiles/NList/*_0.98.xml, *_0.10.xml), (x, y)
MOTIF_INHIBITORY = ((3, 3), (6, 6))
MOTIF_STARTERS = ((7, 0), (1, 1), (4, 1), (7, 3), (1, 4), (4, 4), (7, 6), (1, 7), (4, 7), (7, 9))


@dataclass
class Culture:
    """Per-neuron constants of one culture (float64 on the host, cast by the CUDA engine)."""

    width: int
    height: int
    inhibitory: np.ndarray     # bool (N,)
    starter: np.ndarray        # bool (N,)
    vthresh: np.ndarray        # (N,)
    vreset: np.ndarray         # (N,)
    inoise: np.ndarray         # (N,) SD of the noise current
    trefract: np.ndarray       # int32 (N,) steps
    vinit: np.ndarray          # (N,)

    @property
    def n(self) -> int:
        return self.width * self.height

    def positions(self) -> tuple[np.ndarray, np.ndarray]:
        idx = np.arange(self.n)
        return idx % self.width, idx // self.width


@dataclass(frozen=True)
class Constants:
    """Scalars both engines need, derived from the config."""

    dt: float
    c1: float                  # exp(-dt/tau_m)
    c2: float                  # Rm (1 - c1)
    i0: float                  # Iinject + Vrest/Rm
    U: np.ndarray              # (4,) per type EE, EI, IE, II
    D: np.ndarray
    F: np.ndarray
    decay: np.ndarray          # exp(-dt/tau) per type
    delay: np.ndarray          # int steps per type
    chunk: int                 # min delay: steps that can run without exchanging spikes
    weight_scale: float
    w_scale: np.ndarray = field(default_factory=lambda: np.ones(4))   # steering: per type factor (0 blocks)

    @classmethod
    def from_config(cls, cfg: NetworkConfig) -> "Constants":
        n, dt = cfg.neuron, cfg.run.dt
        c1 = float(np.exp(-dt / (n.Rm * n.Cm)))
        types = cfg.synapses.types()
        delay = np.array(cfg.delay_steps(), np.int64)
        return cls(dt, c1, n.Rm * (1.0 - c1), n.Iinject + n.Vrest / n.Rm,
                   np.array([t.U for t in types]), np.array([t.tau_rec for t in types]),
                   np.array([t.tau_facil for t in types]),
                   np.array([np.exp(-dt / t.tau) for t in types]), delay, min(int(delay.min()), MAX_CHUNK),
                   cfg.growth.weight_scale)


def synapse_type(src_inh: np.ndarray, dst_inh: np.ndarray) -> np.ndarray:
    """Type index 0..3 = EE, EI, IE, II (source -> target)."""
    return 2 * np.asarray(src_inh, np.int64) + np.asarray(dst_inh, np.int64)


def read_index_list(path) -> np.ndarray:
    text = re.sub(r"<!--.*?-->", " ", path.read_text(), flags=re.S)
    body = re.search(r"<([AI])>(.*?)</\1>", text, flags=re.S).group(2)
    return np.array([int(v) for v in body.split()], np.int64)


def reference_layout(width: int, height: int) -> tuple[np.ndarray, np.ndarray]:
    """(inhibitory, starter) masks: BrainGrid's 10x10 motif tiled over the grid."""
    idx = np.arange(width * height)
    mx, my = (idx % width) % 10, (idx // width) % 10
    inh = np.zeros(idx.size, bool)
    act = np.zeros(idx.size, bool)
    for x, y in MOTIF_INHIBITORY:
        inh |= (mx == x) & (my == y)
    for x, y in MOTIF_STARTERS:
        act |= (mx == x) & (my == y)
    return inh, act


def build_culture(cfg: NetworkConfig) -> Culture:
    """Layout and per-neuron constants from the config (deterministic in ``culture.seed``)."""
    c, nr = cfg.culture, cfg.neuron
    width, height = c.width, c.height
    n = width * height
    rng = np.random.default_rng(c.seed)
    if c.layout == "reference":
        inh, act = reference_layout(width, height)
    else:
        order = rng.permutation(n)
        n_inh = int(round(c.inhibitory_fraction * n))
        n_act = int(round(c.starter_fraction * n))
        inh = np.zeros(n, bool)
        act = np.zeros(n, bool)
        inh[order[:n_inh]] = True
        act[order[n_inh:n_inh + n_act]] = True        # starters are excitatory
    vthresh = np.full(n, nr.Vthresh)
    vthresh[act] = rng.uniform(nr.starter_Vthresh_min, nr.starter_Vthresh_max, int(act.sum()))
    vreset = np.where(act, nr.starter_Vreset, nr.Vreset)
    inoise = rng.uniform(nr.Inoise_min, nr.Inoise_max, n)
    dt = cfg.run.dt
    tref = np.where(inh, int(round(nr.Trefract_inh / dt)), int(round(nr.Trefract_exc / dt)))
    return Culture(width, height, inh, act, vthresh, vreset, inoise, tref.astype(np.int32),
                   np.full(n, nr.Vinit))


# ---- Tsodyks-Markram ----------------------------------------------------------------------
def tm_deliver(u, r, isi, U, D, F):
    """One delivery after ``isi`` seconds: the new (u, r); the current jump is W u r."""
    r = 1.0 + (r * (1.0 - u) - 1.0) * np.exp(-isi / D)
    u = U + u * (1.0 - U) * np.exp(-isi / F)
    return u, r


# ---- growth -------------------------------------------------------------------------------
def outgrowth(rate: np.ndarray, g: "GrowthSettings") -> np.ndarray:
    """G(F) with F = rate / (target_rate / epsilon): positive below target, negative above."""
    f = np.asarray(rate, float) / (g.target_rate / g.epsilon)
    return 1.0 - 2.0 / (1.0 + np.exp((g.epsilon - f) / g.beta))


def grow_radii(radius: np.ndarray, rate: np.ndarray, g, epoch_seconds: float) -> np.ndarray:
    """One explicit Euler step of dR/dt = rho G(F) over the epoch, clamped to [0, max_radius]."""
    new = radius + epoch_seconds * g.rho * outgrowth(rate, g)
    return np.clip(new, 0.0, g.max_radius)


def overlap_area(ri, rj, d):
    """Area shared by circles of radii ri, rj whose centres are d apart (d > 0), float64."""
    ri, rj, d = np.broadcast_arrays(np.asarray(ri, float), np.asarray(rj, float), np.asarray(d, float))
    area = np.zeros(ri.shape)
    small, big = np.minimum(ri, rj), np.maximum(ri, rj)
    touch = d < ri + rj
    inside = touch & (d + small <= big)
    area[inside] = pi * small[inside] ** 2
    lens = touch & ~inside
    a, b, dd = ri[lens], rj[lens], d[lens]
    ca = np.clip((b * b + dd * dd - a * a) / (2.0 * b * dd), -1.0, 1.0)   # half-angle at j
    cb = np.clip((a * a + dd * dd - b * b) / (2.0 * a * dd), -1.0, 1.0)   # half-angle at i
    al, be = np.arccos(ca), np.arccos(cb)
    area[lens] = 0.5 * (b * b * (2 * al - np.sin(2 * al)) + a * a * (2 * be - np.sin(2 * be)))
    return area


@dataclass
class Connectivity:
    """Synapses in canonical order (by target, then source): pre, post, W (A)."""

    pre: np.ndarray    # int64
    post: np.ndarray   # int64
    W: np.ndarray      # float64

    @property
    def size(self) -> int:
        return int(self.pre.size)


def connectivity(width: int, height: int, radius: np.ndarray, inhibitory: np.ndarray,
                 weight_scale: float) -> Connectivity:
    """Every ordered pair whose circles overlap, W = area x scale x sign of the source."""
    n = width * height
    idx = np.arange(n)
    x, y = idx % width, idx // width
    rmax = float(radius.max(initial=0.0))
    h = int(np.ceil(2 * rmax))
    pres, posts, areas = [], [], []
    for dy in range(-h, h + 1):
        for dx in range(-h, h + 1):
            if (dx == 0 and dy == 0) or dx * dx + dy * dy >= 4 * rmax * rmax:
                continue
            ok = (x + dx >= 0) & (x + dx < width) & (y + dy >= 0) & (y + dy < height)
            post = idx[ok]
            pre = post + dy * width + dx
            area = overlap_area(radius[pre], radius[post], np.hypot(dx, dy))
            keep = area > 0
            pres.append(pre[keep])
            posts.append(post[keep])
            areas.append(area[keep])
    if not pres:
        empty = np.zeros(0, np.int64)
        return Connectivity(empty, empty.copy(), np.zeros(0))
    pre, post, area = np.concatenate(pres), np.concatenate(posts), np.concatenate(areas)
    order = np.lexsort((pre, post))
    pre, post, area = pre[order], post[order], area[order]
    sign = np.where(inhibitory[pre], -1.0, 1.0)
    return Connectivity(pre, post, area * weight_scale * sign)


# ---- analysis -----------------------------------------------------------------------------
def detect_bursts(counts: np.ndarray, threshold: float) -> np.ndarray:
    """Start bins of runs of consecutive bins with count >= threshold."""
    above = np.asarray(counts) >= threshold
    if not above.any():
        return np.zeros(0, np.int64)
    starts = np.flatnonzero(above & ~np.concatenate([[False], above[:-1]]))
    return starts
