"""GillesPy2's SSACSolver (C++ direct method) on the decay-dimerization preset: the bench's peer.

Optional: used only when ``gillespy2`` is installed (it compiles its solver with the system's
C++ compiler at first use; that build is excluded from the timing). GillesPy2 does not count
reactions, so its rate is ``trajectories x (mean reactions per realization of our run) /
wall``: the same network and law, hence the same expected count.
"""

from __future__ import annotations

import os
import sys
import time

from app.sims.ssa.model import Network


def available() -> bool:
    try:
        import gillespy2  # noqa: F401
    except ImportError:
        return False
    return True


def run(net: Network, trajectories: int, t_end: float, samples: int, seed: int = 1) -> dict:
    """Time SSACSolver on ``net`` (mass action); returns trajectories, wall seconds and build seconds."""
    import gillespy2
    import numpy as np

    model = gillespy2.Model(name="peer")
    species = [gillespy2.Species(name=n, initial_value=int(x), mode="discrete")
               for n, x in zip(net.species, net.x0)]
    model.add_species(species)
    for j, name in enumerate(net.reaction_names):
        rate = gillespy2.Parameter(name=f"c{j}", expression=repr(float(net.rates[j])))
        model.add_parameter(rate)
        reactants = {net.species[s]: int(m) for s, m in enumerate(net.reactant_order[j]) if m}
        products = {net.species[s]: int(m + net.change[j, s])
                    for s, m in enumerate(net.reactant_order[j]) if m + net.change[j, s] > 0}
        model.add_reaction(gillespy2.Reaction(name=f"r{j}", reactants=reactants, products=products,
                                              rate=rate))
    model.timespan(np.linspace(0.0, t_end, samples))
    # GillesPy2 runs SCons as `scons` from PATH, else through the *resolved* interpreter, which
    # in a virtual environment is the base Python without SCons: put this environment first.
    os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
    start = time.perf_counter()
    solver = gillespy2.SSACSolver(model=model)
    build = time.perf_counter() - start
    start = time.perf_counter()
    model.run(solver=solver, number_of_trajectories=trajectories, seed=seed)
    return {"trajectories": trajectories, "wall_seconds": time.perf_counter() - start,
            "build_seconds": build}
