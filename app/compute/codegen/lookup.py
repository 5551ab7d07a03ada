"""Lookup tables for the parts of a model that depend on one variable only (the membrane
voltage), as openCARP, Chaste and Myokit's code generators make them.

:func:`plan_lookup` takes a model's equations (name, tree) in calculation order and finds the
*entries*: the largest subexpressions that depend on the variable and on fixed names only (the
constants of a run) and are worth a table (a transcendental, a power or a division by something
that varies). It returns the equations rewritten to read the entries by name, split into

* ``prelude``: cheap equations on the variable and fixed names (always computed),
* ``helpers``: the expensive variable-only equations the entries read (computed only where the
  variable is outside the table, together with the entries themselves: direct evaluation,
  never a clamped value),
* ``main``: everything else, reading the entries as names.

A quotient ``(f(v)·g(x)) / d(v)`` is regrouped as ``(f(v)/d(v))·g(x)`` (d may also be a
constant of the run: a division becomes a lookup), so a removable singularity of ``f/d`` (a GHK
flux's ``v/(exp(v)-1)`` at v = 0) becomes a table entry, which :func:`tabulate` fills with its
limit. The printers stay the core's: an entry is an ordinary
tree, the lookup itself is printed by the caller.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np

from app.compute.codegen import Binary, Call, Compare, Name, Node, Num, Unary, evaluate, names_used

FIXED, VARIABLE, OTHER = 0, 1, 2        # what a tree depends on: fixed names only, + the variable, + other
_COSTLY_CALLS = {"exp", "log", "pow", "sqrt", "expm1"}


@dataclass(frozen=True)
class LookupPlan:
    variable: str
    entries: tuple[Node, ...]                 # trees over the variable, fixed names, helpers and prelude
    prelude: tuple[tuple[str, Node], ...]
    helpers: tuple[tuple[str, Node], ...]
    main: tuple[tuple[str, Node], ...]

    @property
    def n_entries(self) -> int:
        return len(self.entries)


def entry_name(k: int) -> str:
    return f"lut_{k}"


class _Planner:
    def __init__(self, equations: Sequence[tuple[str, Node]], variable: str, fixed: set[str]):
        self.variable = variable
        self.kind: dict[str, int] = {variable: VARIABLE, **{f: FIXED for f in fixed}}
        self.costly: dict[str, bool] = {}
        for name, tree in equations:
            self.kind[name] = self.tree_kind(tree)
            self.costly[name] = self.kind[name] != OTHER and self.is_costly(tree)
        self.entries: dict[Node, int] = {}

    def tree_kind(self, node: Node) -> int:
        return max((self.kind.get(n, OTHER) for n in names_used(node)), default=FIXED)

    def is_costly(self, node: Node) -> bool:
        """Whether a tree without other names is worth a table lookup: a transcendental, a
        power or a division of something that is not a number (a constant of the run, such as
        ``exp(Na_o/67.3)``, costs a lookup instead of its evaluation in every cell and step)."""
        if isinstance(node, Name):
            return self.costly.get(node.name, False)
        if isinstance(node, Num):
            return False
        if isinstance(node, Call) and node.func in _COSTLY_CALLS \
                and any(not isinstance(a, Num) for a in node.args):
            return True
        if isinstance(node, Binary) and (node.op == "**" or node.op == "/") and not isinstance(node.right, Num):
            return True
        return any(self.is_costly(c) for c in _children(node))

    def entry(self, node: Node) -> Name:
        k = self.entries.setdefault(node, len(self.entries))
        return Name(entry_name(k))

    def rewrite(self, node: Node) -> Node:
        """``node`` (an equation that reads other names) with its costly variable-only parts
        replaced by entries."""
        kind = self.tree_kind(node)
        if kind != OTHER and self.is_costly(node):
            return self.entry(node)
        if kind != OTHER:
            return node
        if isinstance(node, Binary) and node.op == "/" and self.tree_kind(node.right) != OTHER \
                and not isinstance(node.right, Num):
            node = self.regroup(node)
        if isinstance(node, Unary):
            return Unary(node.op, self.rewrite(node.arg))
        if isinstance(node, Binary):
            return Binary(node.op, self.rewrite(node.left), self.rewrite(node.right))
        if isinstance(node, Compare):
            return Compare(node.op, self.rewrite(node.left), self.rewrite(node.right))
        if isinstance(node, Call):
            return Call(node.func, tuple(self.rewrite(a) for a in node.args))
        return node

    def factors(self, node: Node) -> list[Node]:
        """``node`` as a product: through ``*``, a sign, and a division by something that does
        not read other names (``x/c`` gives the factors of x and ``1/c``)."""
        if isinstance(node, Binary) and node.op == "*":
            return self.factors(node.left) + self.factors(node.right)
        if isinstance(node, Binary) and node.op == "/" and self.tree_kind(node.right) != OTHER:
            return self.factors(node.left) + [Binary("/", Num(1.0), node.right)]
        if isinstance(node, Unary) and node.op == "-":
            return [Num(-1.0)] + self.factors(node.arg)
        return [node]

    def regroup(self, node: Binary) -> Node:
        """``(f·g)/d`` with f, d free of other names and g not: ``(f/d)·g`` (``(1/d)·g``
        without f): the quotient becomes one entry, the division a lookup."""
        ours: list[Node] = []
        others: list[Node] = []
        for factor in self.factors(node.left):
            (others if self.tree_kind(factor) == OTHER else ours).append(factor)
        quotient = Binary("/", _product(ours) if ours else Num(1.0), node.right)
        return Binary("*", quotient, _product(others))


def _children(node: Node) -> tuple[Node, ...]:
    if isinstance(node, Unary):
        return (node.arg,)
    if isinstance(node, (Binary, Compare)):
        return (node.left, node.right)
    if isinstance(node, Call):
        return node.args
    return ()


def _product(factors: list[Node]) -> Node:
    out = factors[0]
    for f in factors[1:]:
        out = Binary("*", out, f)
    return out


def variable_only(equations: Sequence[tuple[str, Node]], variable: str, fixed: set[str]) -> set[str]:
    """The equations that depend on ``variable`` and ``fixed`` names only (or on fixed ones only)."""
    p = _Planner(equations, variable, fixed)
    return {name for name, _ in equations if p.kind[name] != OTHER}


def plan_lookup(equations: Sequence[tuple[str, Node]], outputs: Sequence[str], variable: str,
                fixed: set[str]) -> LookupPlan:
    """Split ``equations`` (calculation order) into prelude, table entries with their helpers,
    and the rewritten rest; ``fixed``: the names that are constant over a table's life."""
    p = _Planner(equations, variable, fixed)
    main: list[tuple[str, Node]] = []
    prelude: list[tuple[str, Node]] = []
    helpers: list[tuple[str, Node]] = []
    read_directly = set(outputs)
    for name, tree in equations:
        if p.kind[name] == OTHER:
            read_directly |= names_used(tree)
    for name, tree in equations:
        kind = p.kind[name]
        if kind == OTHER:
            main.append((name, p.rewrite(tree)))
        elif not p.costly[name]:
            prelude.append((name, tree))
        else:
            helpers.append((name, tree))
            if name in read_directly:
                main.append((name, p.entry(Name(name))))
    entries = tuple(sorted(p.entries, key=p.entries.__getitem__))
    return LookupPlan(variable, entries, tuple(prelude), tuple(helpers), tuple(main))


def _denominators(node: Node, depends: Callable[[Node], bool]) -> list[Node]:
    """The divisors in ``node`` that depend on the variable."""
    out, stack = [], [node]
    while stack:
        n = stack.pop()
        if isinstance(n, Binary) and n.op == "/" and depends(n.right):
            out.append(n.right)
        stack.extend(_children(n))
    return out


def tabulate(plan: LookupPlan, grid: np.ndarray, fixed: Mapping[str, float]) -> np.ndarray:
    """The entries between the points of ``grid`` (a uniform, increasing grid), float64, shape
    (rows, entries, 2): for row i, the value at ``grid[i]`` (a comparison of the variable with
    ``grid[i]`` takes its ``>=`` side) and the difference to the value just below
    ``grid[i + 1]`` (0 on the last row), so a ``where`` that jumps at a grid point jumps
    between two rows, not inside one.

    A point where a divisor is 0 or nearly so (a removable singularity such as
    ``v/(exp(v)-1)`` at 0, where direct evaluation cancels) gets the mean of the values at
    ``±step/20`` (the limit, within ``step²/800·|f''|``); a value that is still not finite
    raises ``ValueError`` naming the entry and the point.
    """
    grid = np.asarray(grid, np.float64)
    step = float(grid[1] - grid[0]) if len(grid) > 1 else 1.0
    fixed_env = {k: np.float64(x) for k, x in fixed.items()}
    depends = _Planner([*plan.prelude, *plan.helpers], plan.variable, set(fixed))

    def environment(v: np.ndarray) -> dict[str, np.ndarray]:
        env: dict[str, np.ndarray] = {plan.variable: v, **fixed_env}
        for name, tree in (*plan.prelude, *plan.helpers):
            env[name] = np.broadcast_to(evaluate(tree, env), v.shape)
        return env

    def values(v: np.ndarray) -> np.ndarray:
        env = environment(v)
        return np.stack([np.broadcast_to(evaluate(e, env), v.shape) for e in plan.entries], axis=-1)

    def near_zero_divisor(v: np.ndarray) -> np.ndarray:
        """Points where some divisor is below 1e-3 of its size one step away (a root within
        step/1000): direct evaluation there loses more than ~1e-10 to cancellation."""
        env = environment(v)
        env_lo, env_hi = environment(v - step), environment(v + step)
        marked = np.zeros(v.shape, bool)
        trees = [*plan.entries, *(t for _, t in (*plan.prelude, *plan.helpers))]
        for tree in trees:
            for d in _denominators(tree, lambda n: depends.tree_kind(n) == VARIABLE):
                here = np.abs(np.broadcast_to(evaluate(d, env), v.shape))
                around = np.maximum(np.abs(evaluate(d, env_lo)), np.abs(evaluate(d, env_hi)))
                marked |= ~(here >= 1e-3 * around)
        return marked

    def limits(v: np.ndarray) -> np.ndarray:
        out = values(v)
        marked = near_zero_divisor(v)
        if marked.any():
            h = step / 20.0
            out[marked] = 0.5 * (values(v[marked] - h) + values(v[marked] + h))
        return out

    table = np.zeros((len(grid), plan.n_entries, 2))
    table[:, :, 0] = limits(grid)
    below_next = limits(grid[1:] - 1e-6 * step)
    table[:-1, :, 1] = below_next - table[:-1, :, 0]
    bad = np.argwhere(~np.isfinite(table))
    if len(bad):
        row, k, _ = bad[0]
        raise ValueError(f"lookup table entry {k} is not finite at {plan.variable} = {grid[row]:g} "
                         "(nor its limit): turn lookup tables off or change their range")
    return table
