"""Small networks with exact laws (finite state projection), shared by the CME tests."""

from __future__ import annotations

from app.sims.common.config import parse_yaml
from app.sims.ssa.config import SSAConfig, load_config

_ENSEMBLE = "ensemble: {realizations: %d, t_end: %g, samples: %d, seed: %d, algorithm: direct}\n"

BIRTH_DEATH = """
domain: ssa
name: birth-death
model:
  species: {X: 0}
  parameters: {k: 10.0, g: 0.2}
  reactions: [{reactants: {}, products: {X: 1}, rate: k}, {reactants: {X: 1}, rate: g}]
"""

# DSMTS's dimerisation (model 003-01): 2P -> P2 at k1 P (P - 1) / 2, P2 -> 2P at k2 P2
DIMER = """
domain: ssa
name: dimerisation
model:
  species: {P: 100, P2: 0}
  parameters: {k1: 0.001, k2: 0.01}
  reactions: [{reactants: {P: 2}, products: {P2: 1}, rate: k1}, {reactants: {P2: 1}, products: {P: 2}, rate: k2}]
"""

# two-state gene (telegraph model): the promoter switches, mRNA made while on, degraded
TELEGRAPH = """
domain: ssa
name: telegraph
model:
  species: {Goff: 1, Gon: 0, M: 0}
  parameters: {kon: 0.5, koff: 0.5, ktx: 20.0, delta: 1.0}
  reactions:
    - {reactants: {Goff: 1}, products: {Gon: 1}, rate: kon}
    - {reactants: {Gon: 1}, products: {Goff: 1}, rate: koff}
    - {reactants: {Gon: 1}, products: {Gon: 1, M: 1}, rate: ktx}
    - {reactants: {M: 1}, rate: delta}
"""

# Schlogl at a fifth of the preset's volume (k1 x 5, k2 x 25, k3 / 5): modes near 15 and 109
SCHLOGL_SMALL = """
domain: ssa
name: schlogl-small
model:
  species: {X: 50}
  parameters: {k1: 0.15, k2: 2.5e-3, k3: 40.0, k4: 3.5}
  reactions:
    - {reactants: {X: 2}, products: {X: 3}, rate: k1}
    - {reactants: {X: 3}, products: {X: 2}, rate: k2}
    - {reactants: {}, products: {X: 1}, rate: k3}
    - {reactants: {X: 1}, rate: k4}
"""


def config(template: str, realizations: int = 1024, t_end: float = 1.0, samples: int = 2,
           seed: int = 1) -> SSAConfig:
    return load_config(parse_yaml(template + _ENSEMBLE % (realizations, t_end, samples, seed)))


def network(template: str):
    return config(template).network()


# (template, t_end, samples, compared times, box): the four exact references of the engine
# tests; the boxes hold all but < 1e-10 of the law (solve checks it and grows them otherwise)
MODELS = {
    "birth-death": (BIRTH_DEATH, 20.0, 5, (5.0, 10.0, 20.0), [110]),
    "dimerisation": (DIMER, 50.0, 51, (1.0, 10.0, 50.0), [100, 50]),
    "telegraph": (TELEGRAPH, 10.0, 11, (1.0, 5.0, 10.0), [1, 1, 70]),
    "schlogl-small": (SCHLOGL_SMALL, 4.0, 9, (0.5, 2.0, 4.0), [240]),
}
# a rate changed by a few percent, for the tests that the comparison can fail
PERTURBED = {"birth-death": {0: 1.03}, "dimerisation": {0: 1.03}, "telegraph": {2: 1.03},
             "schlogl-small": {2: 1.03}}
ALPHA = 1e-4       # family-wise false-alarm rate of one engine-vs-exact comparison


def solve_exact(name: str):
    from app.sims.ssa import cme

    template, _, _, times, box = MODELS[name]
    return cme.solve(network(template), list(times), cap=box)


def run_engine(name: str, backend: str, realizations: int, seed: int, scale: dict | None = None):
    """The SSA simulation of model ``name`` run to its end, states kept at the compared times."""
    from dataclasses import replace

    from app.sims.ssa.simulation import SSASimulation

    template, t_end, samples, times, _ = MODELS[name]
    cfg = config(template, realizations, t_end, samples, seed)
    cfg = replace(cfg, ensemble=replace(cfg.ensemble, snapshot_times=list(times)))
    sim = SSASimulation.from_config(cfg, backend)
    if scale:
        for j, f in scale.items():
            sim.steer(f"rates.{sim.net.reaction_names[j]}", float(sim.net.rates[j]) * f)
    while not sim.finished:
        sim.advance()
    sim.close()
    return sim


def engine_vs_exact(sim, sol, alpha: float = ALPHA):
    """One family per run: at every compared time and species of positive variance, the mean's
    Z, the sample variance's Z (exact fourth moment) and the histogram's chi-square against the
    exact marginal (cells pooled to >= 5 expected); Sidak on the Z's, Bonferroni on the p's."""
    import numpy as np

    from app.sims.ssa.stats import chi_square_test, family_verdict, variance_z

    zs, ps = [], []
    for k, t in enumerate(sol.times):
        states = sim.snapshots[int(np.argmin(np.abs(sim.times - t)))]
        for s in range(sol.states.shape[1]):
            mean, var, mu4 = sol.moments(s, k)
            if var < 1e-12:
                continue
            x = states[:, s]
            n = len(x)
            zs += [(x.mean() - mean) / np.sqrt(var / n), float(variance_z(x.var(ddof=1), var, mu4, n))]
            ps.append(chi_square_test(x, sol.marginal(s, k))[2])
    return family_verdict(np.array(zs), alpha, np.array(ps))
