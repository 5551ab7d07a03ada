"""Reaction networks: the YAML spec, validation, and the compiled arrays both engines use.

Propensities are mass action with the combinatorial convention of Gillespie (1977): a
reaction with reactants ``m_i S_i`` has propensity ``c * prod_i C(x_i, m_i)``, so
``2 S1 -> S2`` fires at ``c * x1 * (x1 - 1) / 2`` and ``0 -> S`` at ``c``.

An imported model (:mod:`app.sims.ssa.sbml`) may also carry general kinetic laws: reaction j
then fires at ``rate[j] * max(0, law_j(x))`` (``rate[j]`` a scale, 1 on import), the law an
expression tree of the one expression core over species counts, printed to every engine. It
may also carry species set by assignment rules (``derived``, recomputed where statistics are
taken) and events without delay (:class:`Event`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import factorial

import numpy as np

from app.compute.codegen import Node, evaluate, names_used
from app.sims.common.config import Document, spec

MAX_ORDER = 3
NAME_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


@dataclass(frozen=True)
class ReactionSpec:
    """One reaction: ``reactants -> products`` at rate constant ``rate`` (number or parameter)."""

    rate: float | str
    reactants: dict[str, int] = field(default_factory=dict)
    products: dict[str, int] = field(default_factory=dict)
    name: str = ""


@dataclass(frozen=True)
class NetworkSpec:
    """Species with initial counts, named parameters and reactions."""

    species: dict[str, int]
    reactions: list[ReactionSpec]
    parameters: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class GridSpec:
    """Li & Petzold's spatial model (after Shnerb et al. 2000) on an ``n`` x ``n`` grid.

    A diffuses to the four neighbours (no flux at the border), decays, and divides where the
    fixed catalyst B sits: ``A_ij -> A_kl``, ``A_ij -> 0``, ``A_ij + B_ij -> 2 A_ij + B_ij``.
    """

    n: int = field(default=8, metadata=spec(range=(2, 64)))
    diffusion: float = field(default=0.5, metadata=spec(range=(0.0, 1e9)))
    decay: float = field(default=0.1, metadata=spec(range=(0.0, 1e9)))
    division: float = field(default=0.0025, metadata=spec(range=(0.0, 1e9)))
    a_initial: int = field(default=100, metadata=spec(range=(0, 2**30)))
    b_initial: int = field(default=100, metadata=spec(range=(0, 2**30)))
    a_cell: list[int] | None = None          # [row, col]; default: the centre
    b_cells: list[list[int]] | None = None   # default: a 2x2 block at (n//4, n//4)


@dataclass(frozen=True)
class Event:
    """An event without delay: a trigger and the species it assigns when the trigger turns true.

    A time event (``time`` set) fires once when the clock reaches that instant; a species event
    (``trigger`` set, an indicator tree: true where > 0.5) fires whenever its trigger goes from
    false to true, checked after every reaction and event. Assigned values are rounded to the
    nearest count (and held at >= 0).
    """

    name: str
    assignments: tuple[tuple[int, Node], ...]   # (species index, value tree)
    trigger: Node | None = None
    time: float | None = None
    initial_value: bool = True     # SBML's trigger value before t = 0


MAX_EVENTS = 32      # the CUDA engine keeps each realization's trigger states in one 32-bit word


@dataclass(frozen=True)
class Network:
    """A validated network as arrays: what the engines and the code generator consume."""

    species: tuple[str, ...]
    x0: np.ndarray              # (S,) int64 initial counts
    rates: np.ndarray           # (M,) float64 rate constants
    reactant_order: np.ndarray  # (M, S) int64 reactant stoichiometry
    change: np.ndarray          # (M, S) int64 net state change
    reaction_names: tuple[str, ...]
    grid_shape: tuple[int, int] | None = None
    grid_index: np.ndarray | None = None   # (n, n) index of A_ij in the state
    laws: tuple[Node | None, ...] | None = None   # per reaction; None: mass action only
    derived: tuple[tuple[int, Node], ...] = ()    # (species index, tree) from assignment rules
    events: tuple[Event, ...] = ()
    event_state0: tuple[bool, ...] = ()           # trigger values after t = 0

    @property
    def mass_action(self) -> bool:
        """Whether every propensity is mass action (no reaction carries a law)."""
        return not (self.laws and any(law is not None for law in self.laws))

    @property
    def general(self) -> bool:
        """Whether the engines need generated code beyond mass action."""
        return not self.mass_action or bool(self.derived) or bool(self.events)

    def guards(self) -> list[list[tuple[int, int]]]:
        """Per reaction, the (species, count) pairs it consumes when it has a general kinetic
        law: such a law need not vanish when they run out (a constant rate does not), so every
        engine sets the propensity to 0 while any count is below what one firing takes, and
        counts never go negative. Empty for mass action, which vanishes there by itself."""
        return [[(int(s), int(-self.change[j, s])) for s in np.flatnonzero(self.change[j] < 0)]
                if self.laws and self.laws[j] is not None else [] for j in range(self.n_reactions)]

    def law_reads(self) -> np.ndarray:
        """(M, S) bool: species each reaction's propensity reads (guards included)."""
        reads = self.reactant_order != 0
        if self.laws:
            index = {n: i for i, n in enumerate(self.species)}
            reads = reads.copy()
            for j, law in enumerate(self.laws):
                if law is not None:
                    for name in names_used(law):
                        reads[j, index[name]] = True
            for j, guard in enumerate(self.guards()):
                for s, _ in guard:
                    reads[j, s] = True
        return reads

    def structure_key(self) -> tuple:
        """Equal for networks that differ only in rate constants and initial counts."""
        return (self.species, self.change.tobytes(), tuple(map(tuple, self.reactant_lists())),
                self.laws, self.derived, self.events, self.event_state0)

    @property
    def n_species(self) -> int:
        return len(self.species)

    @property
    def n_reactions(self) -> int:
        return len(self.reaction_names)

    def reactant_lists(self) -> list[list[tuple[int, int]]]:
        """Per reaction, the (species index, order) pairs of its reactants."""
        return [[(int(s), int(m)) for s, m in enumerate(row) if m] for row in self.reactant_order]

    def dependents(self) -> list[list[int]]:
        """Dependency graph: reactions whose propensity changes when reaction j fires."""
        changed = self.change != 0
        uses = self.law_reads()
        return [list(np.flatnonzero((uses & changed[j]).any(axis=1))) for j in range(self.n_reactions)]

    def propensities(self, x: np.ndarray, rates: np.ndarray | None = None) -> np.ndarray:
        """Mass-action propensities (..., M) for states ``x`` (..., S), in float64."""
        rates = self.rates if rates is None else rates
        with np.errstate(over="ignore", invalid="ignore"):    # bad values are the caller's to refuse
            return self._propensities(np.asarray(x, dtype=np.float64), rates)

    def _propensities(self, x: np.ndarray, rates: np.ndarray) -> np.ndarray:
        a = np.broadcast_to(rates, x.shape[:-1] + (self.n_reactions,)).copy()
        for j, reactants in enumerate(self.reactant_lists()):
            for s, m in reactants:
                a[..., j] *= binomial(x[..., s], m)
            if self.laws and self.laws[j] is not None:
                a[..., j] *= evaluate(self.laws[j], self.species_env(x))
        return a * self.guard_open(x)

    def guard_open(self, x: np.ndarray) -> np.ndarray:
        """(..., M) 1.0 where every guard of the reaction holds in states ``x`` (..., S), else 0."""
        x = np.asarray(x)
        open_ = np.ones(x.shape[:-1] + (self.n_reactions,))
        for j, guard in enumerate(self.guards()):
            for s, n in guard:
                open_[..., j] *= x[..., s] >= n
        return open_

    def species_env(self, x: np.ndarray) -> dict[str, np.ndarray]:
        """Species name -> counts (float64) of states ``x`` (..., S): what law trees read."""
        x = np.asarray(x, dtype=np.float64)
        return {n: x[..., i] for i, n in enumerate(self.species)}

    def with_values(self, x0: np.ndarray | None = None, rates: np.ndarray | None = None) -> "Network":
        """A copy with other initial counts or rate constants (the GUI's table edits)."""
        from dataclasses import replace
        return replace(self, x0=self.x0 if x0 is None else np.asarray(x0, np.int64),
                       rates=self.rates if rates is None else np.asarray(rates, np.float64))


def binomial(x: np.ndarray, m: int) -> np.ndarray:
    """C(x, m) as float64, zero where x < m."""
    out = np.ones_like(x, dtype=np.float64)
    for i in range(m):
        out = out * np.maximum(x - i, 0)
    return out / factorial(m)


def compile_network(spec_: NetworkSpec, doc: Document | None = None, path: tuple = ("model",)) -> Network:
    """Validate ``spec_`` and build its arrays; errors point at the YAML line when ``doc`` is given."""
    def fail(message: str, sub: tuple = ()) -> Exception:
        if doc is not None:
            return doc.error(message, path + sub)
        from app.sims.common.config import ConfigError
        return ConfigError(message, path=path + sub)

    if not spec_.species:
        raise fail("the network has no species", ("species",))
    if not spec_.reactions:
        raise fail("the network has no reactions", ("reactions",))
    names = list(spec_.species)
    for name in names + list(spec_.parameters):
        if not name or not set(name) <= NAME_CHARS or name[0].isdigit():
            raise fail(f"'{name}' is not a valid name (letters, digits, _; not starting with a digit)")
    for name, count in spec_.species.items():
        if count < 0:
            raise fail(f"initial count of {name} is {count}; counts must be >= 0", ("species", name))
    for name, value in spec_.parameters.items():
        if not np.isfinite(value) or value < 0:
            raise fail(f"parameter {name} = {value}; rate constants must be finite and >= 0",
                       ("parameters", name))
    index = {n: i for i, n in enumerate(names)}
    m, s = len(spec_.reactions), len(names)
    order = np.zeros((m, s), np.int64)
    change = np.zeros((m, s), np.int64)
    rates = np.zeros(m)
    labels = []
    for j, r in enumerate(spec_.reactions):
        where = ("reactions", j)
        for side, sign in (("reactants", -1), ("products", 1)):
            for sp, k in getattr(r, side).items():
                if sp not in index:
                    raise fail(f"unknown species '{sp}'; species are: {', '.join(names)}", where + (side, sp))
                if k < 1:
                    raise fail(f"stoichiometry of {sp} is {k}; it must be >= 1", where + (side, sp))
                change[j, index[sp]] += sign * k
                if side == "reactants":
                    order[j, index[sp]] = k
        if order[j].sum() > MAX_ORDER:
            raise fail(f"reaction order {order[j].sum()} is above {MAX_ORDER}", where)
        if isinstance(r.rate, str):
            if r.rate not in spec_.parameters:
                raise fail(f"rate '{r.rate}' is not a parameter; parameters are: "
                           f"{', '.join(spec_.parameters) or 'none'}", where + ("rate",))
            rates[j] = spec_.parameters[r.rate]
        else:
            if not np.isfinite(r.rate) or r.rate < 0:
                raise fail(f"rate {r.rate} must be finite and >= 0", where + ("rate",))
            rates[j] = r.rate
        labels.append(r.name or f"R{j + 1}")
    x0 = np.array([spec_.species[n] for n in names], np.int64)
    return Network(tuple(names), x0, rates, order, change, tuple(labels))


def grid_network(grid: GridSpec) -> Network:
    """Generate the spatial network for ``grid`` (any n); B exists only where it is placed."""
    n = grid.n
    a_cell = tuple(grid.a_cell) if grid.a_cell is not None else (n // 2, n // 2)
    if grid.b_cells is not None:
        b_cells = [tuple(c) for c in grid.b_cells]
    else:
        k = max(0, min(n // 4, n - 2))
        b_cells = [(k, k), (k, k + 1), (k + 1, k), (k + 1, k + 1)] if n >= 2 else [(0, 0)]
    for cell in [a_cell, *b_cells]:
        if len(cell) != 2 or not all(0 <= c < n for c in cell):
            raise ValueError(f"grid cell {list(cell)} is outside the {n}x{n} grid (rows and columns 0..{n - 1})")
    species = {f"A_{i}_{j}": (grid.a_initial if (i, j) == a_cell else 0) for i in range(n) for j in range(n)}
    for i, j in b_cells:
        species[f"B_{i}_{j}"] = grid.b_initial
    reactions = []
    for i in range(n):
        for j in range(n):
            a = f"A_{i}_{j}"
            for di, dj in ((-1, 0), (1, 0), (0, -1), (0, 1)):
                k, l = i + di, j + dj
                if 0 <= k < n and 0 <= l < n:
                    reactions.append(ReactionSpec("diffusion", {a: 1}, {f"A_{k}_{l}": 1}, f"D_{i}_{j}>{k}_{l}"))
            reactions.append(ReactionSpec("decay", {a: 1}, {}, f"decay_{i}_{j}"))
    for i, j in b_cells:
        a, b = f"A_{i}_{j}", f"B_{i}_{j}"
        reactions.append(ReactionSpec("division", {a: 1, b: 1}, {a: 2, b: 1}, f"div_{i}_{j}"))
    params = {"diffusion": grid.diffusion, "decay": grid.decay, "division": grid.division}
    net = compile_network(NetworkSpec(species, reactions, params))
    index = {s: i for i, s in enumerate(net.species)}
    grid_index = np.array([[index[f"A_{i}_{j}"] for j in range(n)] for i in range(n)], np.int64)
    from dataclasses import replace
    return replace(net, grid_shape=(n, n), grid_index=grid_index)
