"""Symbolic derivatives of a program of assignments (forward mode over the expression trees).

A program is a list of ``(name, tree)`` in calculation order; :func:`jacobian_entries` adds
the equations of ∂output_k/∂state_k for chosen pairs, :func:`jacobian_columns` those of the
whole Jacobian (a Rosenbrock method's, :mod:`app.sims.cardiac.rosenbrock`) (entries of a model's Jacobian: its
diagonal, what the generalized Rush–Larsen method needs, and a Markov chain's block,
:mod:`app.sims.cardiac.markov`), each derivative an equation named
``<prefix><k>_<name>`` that reads the program's own names, so every printer prints it as it
prints the model. Only what the output reads and what depends on the state is differentiated;
products with 0 and 1 are folded, so a term independent of the state costs nothing.

Rules: the usual ones for + − * / and the functions of :data:`app.compute.codegen.FUNCTIONS`;
``x ** c`` and ``pow(x, c)`` with a constant c as ``c·x^(c−1)``, otherwise
``x^y·(y'·log x + y·x'/x)``; ``abs``, ``min``, ``max`` and ``where`` take the derivative of the
branch they select (``where`` a derivative of each branch, the condition unchanged). At a kink
(``abs`` at 0, ``min`` of equal values) that is one of the one-sided derivatives.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from app.compute.codegen import Binary, Call, Compare, Name, Node, Num, Unary, names_used

ZERO, ONE = Num(0.0), Num(1.0)


def _add(a: Node, b: Node) -> Node:
    if a == ZERO:
        return b
    if b == ZERO:
        return a
    return Binary("+", a, b)


def _sub(a: Node, b: Node) -> Node:
    if b == ZERO:
        return a
    if a == ZERO:
        return Unary("-", b)
    return Binary("-", a, b)


def _mul(a: Node, b: Node) -> Node:
    if a == ZERO or b == ZERO:
        return ZERO
    if a == ONE:
        return b
    if b == ONE:
        return a
    return Binary("*", a, b)


def _div(a: Node, b: Node) -> Node:
    if a == ZERO:
        return ZERO
    return a if b == ONE else Binary("/", a, b)


def derivative(tree: Node, d: Mapping[str, Node]) -> Node:
    """d(tree)/dx, where ``d`` gives the derivative of each name that depends on x (``ONE``
    for x itself, a :class:`Name` of its derivative's equation otherwise); other names are
    constants."""
    if isinstance(tree, Num):
        return ZERO
    if isinstance(tree, Name):
        return d.get(tree.name, ZERO)
    if isinstance(tree, Unary):
        inner = derivative(tree.arg, d)
        return ZERO if inner == ZERO else Unary("-", inner)
    if isinstance(tree, Compare):
        raise ValueError("a comparison has no derivative (only the condition of where())")
    if isinstance(tree, Binary):
        u, v = tree.left, tree.right
        du, dv = derivative(u, d), derivative(v, d)
        if tree.op == "+":
            return _add(du, dv)
        if tree.op == "-":
            return _sub(du, dv)
        if tree.op == "*":
            return _add(_mul(du, v), _mul(u, dv))
        if tree.op == "/":
            return _div(_sub(du, _mul(_div(u, v), dv)), v)
        return _power(u, v, du, dv, tree)
    args = tree.args
    if tree.func == "where":
        yes, no = derivative(args[1], d), derivative(args[2], d)
        return ZERO if yes == ZERO and no == ZERO else Call("where", (args[0], yes, no))
    if tree.func == "pow":
        return _power(args[0], args[1], derivative(args[0], d), derivative(args[1], d), tree)
    if tree.func in ("min", "max"):
        du, dv = derivative(args[0], d), derivative(args[1], d)
        if du == ZERO and dv == ZERO:
            return ZERO
        return Call("where", (Compare("<=" if tree.func == "min" else ">=", args[0], args[1]), du, dv))
    (u,) = args
    du = derivative(u, d)
    if du == ZERO:
        return ZERO
    if tree.func in ("exp", "expm1"):
        return _mul(Call("exp", (u,)), du)
    if tree.func == "log":
        return _div(du, u)
    if tree.func == "sqrt":
        return _div(du, _mul(Num(2.0), tree))
    if tree.func == "abs":
        return Call("where", (Compare("<", u, ZERO), Unary("-", du), du))
    raise ValueError(f"no derivative rule for {tree.func}()")


def _power(u: Node, v: Node, du: Node, dv: Node, tree: Node) -> Node:
    if dv == ZERO:
        if du == ZERO:
            return ZERO
        if isinstance(v, Num):
            return _mul(_mul(v, Binary("**", u, Num(v.value - 1.0))), du)
        return _mul(_mul(v, Binary("**", u, Binary("-", v, ONE))), du)
    return _mul(tree, _add(_mul(dv, Call("log", (u,))), _div(_mul(v, du), u)))


def _check_prefix(equations: Sequence[tuple[str, Node]], prefix: str) -> None:
    known = {name for name, _ in equations} | set().union(*(names_used(t) for _, t in equations))
    if any(n.startswith(prefix) for n in known):
        raise ValueError(f"the derivative prefix {prefix!r} starts a name of the program")


def _read_by(equations: Sequence[tuple[str, Node]], outputs: Sequence[str]) -> set[str]:
    """The names the ``outputs`` read, directly or not (themselves included)."""
    index = {name for name, _ in equations}
    reads = {name: names_used(tree) for name, tree in equations}
    needed: set[str] = set()
    todo = list(outputs)
    while todo:
        name = todo.pop()
        if name in needed or name not in index:
            continue
        needed.add(name)
        todo.extend(reads[name])
    return needed


def _forward(equations: Sequence[tuple[str, Node]], needed: set[str], state: str,
             prefix: str) -> tuple[list[tuple[str, Node]], dict[str, Node]]:
    """Forward mode by ``state`` over the ``needed`` equations: the derivative equations
    (named ``prefix + name``) and each name's derivative (absent: 0)."""
    out_eqs: list[tuple[str, Node]] = []
    d: dict[str, Node] = {state: ONE}
    for name, tree in equations:
        if name not in needed or not (names_used(tree) & d.keys()):
            continue
        dt = derivative(tree, d)
        if isinstance(dt, (Num, Name)):
            if dt != ZERO:
                d[name] = dt
            continue
        out_eqs.append((f"{prefix}{name}", dt))
        d[name] = Name(f"{prefix}{name}")
    return out_eqs, d


def jacobian_entries(equations: Sequence[tuple[str, Node]], pairs: Sequence[tuple[str, str]],
                      prefix: str) -> tuple[list[tuple[str, Node]], list[Node]]:
    """The equations of ∂output/∂state for each ``(output, state)`` of ``pairs`` (names in
    ``equations``; the state an input), and each derivative as a tree (a :class:`Name` of
    its equation, or a number). Derivative equations of pair k are named
    ``f"{prefix}{k}_{name}"``; ``prefix`` must start no name of the program."""
    _check_prefix(equations, prefix)
    out_eqs: list[tuple[str, Node]] = []
    results: list[Node] = []
    for k, (output, state) in enumerate(pairs):
        eqs, d = _forward(equations, _read_by(equations, [output]), state, f"{prefix}{k}_")
        out_eqs += eqs
        results.append(d.get(output, ZERO) if output != state else ONE)
    return out_eqs, results


def jacobian_columns(equations: Sequence[tuple[str, Node]], outputs: Sequence[str], states: Sequence[str],
                     prefix: str) -> tuple[list[tuple[str, Node]], list[tuple[int, int, Node]]]:
    """The whole Jacobian ∂outputs/∂states, one forward pass per state (column), so the
    derivatives of what several outputs share are made once: the derivative equations
    (column j's named ``f"{prefix}{j}_{name}"``) and the entries ``(row, column, tree)`` that
    are not identically 0, by column. ``prefix`` must start no name of the program."""
    _check_prefix(equations, prefix)
    needed = _read_by(equations, outputs)
    out_eqs: list[tuple[str, Node]] = []
    entries: list[tuple[int, int, Node]] = []
    for j, state in enumerate(states):
        eqs, d = _forward(equations, needed, state, f"{prefix}{j}_")
        out_eqs += eqs
        entries += [(i, j, ONE if output == state else d[output])
                    for i, output in enumerate(outputs) if output == state or d.get(output, ZERO) != ZERO]
    return out_eqs, entries
