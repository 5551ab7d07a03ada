"""SBML export of mass-action networks (Level 3 Version 2, written with python-libsbml), and the
way back to a YAML network spec.

Species are amounts (``hasOnlySubstanceUnits``, substance unit ``item``) in one compartment of
size 1; named rate parameters become global parameters, numeric rates local ones; each kinetic
law is the stochastic mass-action propensity ``c * X * (X - 1) / 2 ...`` that the importer reads
back as the same reaction. Networks with general laws, rules or events (imported ones) are
refused: export them from their SBML file.
"""

from __future__ import annotations

import re
from pathlib import Path

from app.fileio import atomic_write_bytes
from app.sims.ssa.model import Network, NetworkSpec, ReactionSpec, compile_network
from app.sims.ssa.sbml import _libsbml

_NOT_SID = re.compile(r"[^A-Za-z0-9_]")


def _sid(name: str, taken: set[str]) -> str:
    base = _NOT_SID.sub("_", name) or "R"
    base = base if not base[0].isdigit() else f"_{base}"
    sid, k = base, 1
    while sid in taken:
        k += 1
        sid = f"{base}_{k}"
    taken.add(sid)
    return sid


def _propensity_formula(rate: str, reactants: dict[str, int]) -> str:
    factors = [rate]
    for species, m in reactants.items():
        factors += [species] + [f"({species} - {i})" for i in range(1, m)]
        if m > 1:
            factors.append(f"1 / {[1, 1, 2, 6][m]}")
    return " * ".join(factors)


def spec_to_sbml(spec: NetworkSpec, model_id: str = "network") -> str:
    """SBML text of a YAML network spec."""
    sb = _libsbml()
    doc = sb.SBMLDocument(3, 2)
    model = doc.createModel()
    taken: set[str] = set()
    model.setId(_sid(model_id, taken))
    model.setSubstanceUnits("item")
    model.setTimeUnits("second")
    model.setExtentUnits("item")
    comp = model.createCompartment()
    comp.setId(_sid("cell", taken))
    comp.setSize(1.0)
    comp.setConstant(True)
    comp.setSpatialDimensions(3)
    for name, count in spec.species.items():
        taken.add(name)
        sp = model.createSpecies()
        sp.setId(name)
        sp.setCompartment(comp.getId())
        sp.setInitialAmount(float(count))
        sp.setHasOnlySubstanceUnits(True)
        sp.setBoundaryCondition(False)
        sp.setConstant(False)
        sp.setSubstanceUnits("item")
    for name, value in spec.parameters.items():
        taken.add(name)
        p = model.createParameter()
        p.setId(name)
        p.setValue(float(value))
        p.setConstant(True)
    for j, r in enumerate(spec.reactions):
        reaction = model.createReaction()
        label = r.name or f"R{j + 1}"
        reaction.setId(_sid(label, taken))
        reaction.setName(label)
        reaction.setReversible(False)
        for side, create in ((r.reactants, reaction.createReactant), (r.products, reaction.createProduct)):
            for species, k in side.items():
                ref = create()
                ref.setSpecies(species)
                ref.setStoichiometry(float(k))
                ref.setConstant(True)
        law = reaction.createKineticLaw()
        rate = r.rate
        if not isinstance(rate, str):
            local = law.createLocalParameter()
            local.setId("c")
            local.setValue(float(rate))
            rate = "c"
        law.setMath(sb.parseL3Formula(_propensity_formula(rate, r.reactants)))
    text = sb.writeSBMLToString(doc)
    if not text:
        raise ValueError("libSBML could not write the model")
    return text


def network_spec(net: Network) -> NetworkSpec:
    """The YAML spec of a mass-action network (rates as numbers)."""
    if net.general:
        raise ValueError("this network has general kinetic laws, rules or events; only "
                         "mass-action networks have a YAML form (keep its SBML file)")
    reactions = []
    for j, name in enumerate(net.reaction_names):
        reactants = {net.species[s]: int(m) for s, m in enumerate(net.reactant_order[j]) if m}
        products = {net.species[s]: int(m + d) for s, (m, d) in
                    enumerate(zip(net.reactant_order[j], net.change[j])) if m + d > 0}
        consumed = {s: k for s, k in reactants.items()}
        reactions.append(ReactionSpec(float(net.rates[j]), consumed, products, name))
    return NetworkSpec({s: int(c) for s, c in zip(net.species, net.x0)}, reactions)


def export_sbml(net_or_spec: Network | NetworkSpec, path: str | Path, model_id: str = "network") -> Path:
    """Write ``net_or_spec`` as SBML to ``path``."""
    spec = net_or_spec if isinstance(net_or_spec, NetworkSpec) else network_spec(net_or_spec)
    compile_network(spec)                   # the same checks a YAML network gets
    path = Path(path)
    atomic_write_bytes(path, spec_to_sbml(spec, model_id).encode())
    return path
