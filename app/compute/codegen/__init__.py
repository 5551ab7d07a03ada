"""The one expression core: a whitelist parser for model expressions, and every printer.

API (all generators print through this module; nothing else parses user text)::

    tree = parse(text, names)          # Node tree; ExprError (text + position) on anything else
    names_used(tree)                   # identifiers the tree reads
    evaluate(tree, env)                # NumPy float64 over arrays (errors become inf/nan)
    to_python(tree, symbol)            # Python source on floats using ``math``; numba-compatible
                                       # (functions=NAN_IGNORING_MINMAX: min/max as evaluate)
    to_c(tree, symbol, single=False)   # CUDA/C source, double (or float32 with ``single``)
    to_numpy(tree, symbol)             # NumPy source over arrays (``np.exp``, ``np.where``)
    # where(a < b, x, y) prints as np.where, (x if a < b else y) and (a < b ? x : y)
    fill_template(template, slots)     # put printed code into ``{{SLOT}}`` places of a kernel

``symbol`` maps a name in the tree to the target's variable (``lambda n: f"p[{k[n]}]"``).

Grammar (precedence low to high)::

    expr   := term (('+' | '-') term)*
    term   := factor (('*' | '/') factor)*
    factor := ('-' | '+') factor | power
    power  := atom ('**' factor)?
    atom   := NUMBER | NAME | FUNC '(' expr (',' expr)* ')' | '(' expr ')'
            | 'where' '(' expr CMP expr ',' expr ',' expr ')'     CMP: < <= > >= ==

Only numbers, known names and the functions in :data:`FUNCTIONS` are accepted; anything
else raises :class:`ExprError` with the offending text and its position. Expressions longer
than :data:`MAX_LENGTH` characters, nested deeper than :data:`MAX_DEPTH` or giving a tree
deeper than :data:`MAX_TREE_DEPTH` are refused the same way (never a RecursionError). No user text ever reaches C, Python or ``eval``: code is
printed from the tree, and :func:`fill_template` admits only printed code, checked
identifiers and numbers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Union

import numpy as np

FUNCTIONS: dict[str, tuple[int, int]] = {   # name -> (min args, max args)
    "exp": (1, 1), "log": (1, 1), "sqrt": (1, 1), "abs": (1, 1),
    "pow": (2, 2), "min": (2, 2), "max": (2, 2), "expm1": (1, 1), "where": (3, 3),
}
COMPARISONS = ("<=", ">=", "==", "<", ">")   # only as the first argument of where()
MAX_LENGTH = 100_000    # characters in one expression
MAX_DEPTH = 100         # nesting of parentheses, unary signs, powers and calls
MAX_TREE_DEPTH = 300    # depth of the tree (long chains of + or * included); printers recurse
_TOKEN = re.compile(r"\s*(?:(?P<num>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)|(?P<name>[A-Za-z_]\w*)"
                    r"|(?P<op>\*\*|<=|>=|==|[-+*/(),<>]))")


class ExprError(ValueError):
    """A rejected expression: ``text`` with the problem at ``position`` (0-based)."""

    def __init__(self, message: str, text: str, position: int):
        self.text, self.position = text, position
        prefix = f"{message} at position {position + 1}: "
        super().__init__(f"{prefix}{text}\n{' ' * (len(prefix) + position)}^")


@dataclass(frozen=True)
class Num:
    value: float


@dataclass(frozen=True)
class Name:
    name: str


@dataclass(frozen=True)
class Unary:
    op: str
    arg: "Node"


@dataclass(frozen=True)
class Binary:
    op: str
    left: "Node"
    right: "Node"


@dataclass(frozen=True)
class Call:
    func: str
    args: tuple["Node", ...]


@dataclass(frozen=True)
class Compare:
    """``left op right``; only the condition of ``where(cond, if_true, if_false)``."""

    op: str
    left: "Node"
    right: "Node"


Node = Union[Num, Name, Unary, Binary, Call, Compare]


def parse(text: str, names: set[str]) -> Node:
    """Parse ``text`` into a tree; ``names`` are the identifiers it may use."""
    if len(text) > MAX_LENGTH:
        raise ExprError(f"expression longer than {MAX_LENGTH} characters", text[:40] + "...", 40)
    tokens = _tokenize(text)
    parser = _Parser(text, tokens, names)
    node = parser.expr()
    if parser.i < len(tokens):
        raise ExprError(f"unexpected '{tokens[parser.i][1]}'", text, tokens[parser.i][2])
    if _tree_depth(node) > MAX_TREE_DEPTH:
        raise ExprError(f"expression tree deeper than {MAX_TREE_DEPTH} levels (split it)", text, 0)
    return node


def _tree_depth(root: Node) -> int:
    """Depth of the tree, without recursion."""
    deepest, stack = 0, [(root, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        if isinstance(node, Unary):
            stack.append((node.arg, depth + 1))
        elif isinstance(node, (Binary, Compare)):
            stack += [(node.left, depth + 1), (node.right, depth + 1)]
        elif isinstance(node, Call):
            stack += [(a, depth + 1) for a in node.args]
    return deepest


def _tokenize(text: str) -> list[tuple[str, str, int]]:
    tokens, pos = [], 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            bad = len(text) - len(text[pos:].lstrip())
            raise ExprError(f"character '{text[bad]}' is not allowed", text, bad)
        kind = m.lastgroup
        assert kind is not None          # every alternative of _TOKEN is a named group
        start = m.start(kind)
        tokens.append((kind, m.group(kind), start))
        pos = m.end()
    return tokens


class _Parser:
    def __init__(self, text: str, tokens: list, names: set[str]):
        self.text, self.tokens, self.names, self.i = text, tokens, names, 0
        self.depth = 0

    def _enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            tok = self._peek()
            pos = tok[2] if tok else len(self.text)
            raise ExprError(f"expression nested deeper than {MAX_DEPTH} levels", self.text, pos)

    def _peek(self) -> tuple[str, str, int] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def _take(self, value: str | None = None):
        tok = self._peek()
        if tok is None:
            raise ExprError("unexpected end of expression", self.text, len(self.text))
        if value is not None and tok[1] != value:
            raise ExprError(f"expected '{value}', found '{tok[1]}'", self.text, tok[2])
        self.i += 1
        return tok

    def expr(self) -> Node:
        node = self.term()
        while (tok := self._peek()) and tok[1] in "+-" and tok[0] == "op":
            self.i += 1
            node = Binary(tok[1], node, self.term())
        return node

    def comparison(self) -> Node:
        left = self.expr()
        tok = self._peek()
        if tok is None or tok[1] not in COMPARISONS:
            raise ExprError("where() needs a comparison (< <= > >= ==) first", self.text,
                            tok[2] if tok else len(self.text))
        self.i += 1
        return Compare(tok[1], left, self.expr())

    def term(self) -> Node:
        node = self.factor()
        while (tok := self._peek()) and tok[0] == "op" and tok[1] in ("*", "/"):
            self.i += 1
            node = Binary(tok[1], node, self.factor())
        return node

    def factor(self) -> Node:
        self._enter()
        try:
            tok = self._peek()
            if tok and tok[0] == "op" and tok[1] in ("-", "+"):
                self.i += 1
                arg = self.factor()
                return Unary("-", arg) if tok[1] == "-" else arg
            return self.power()
        finally:
            self.depth -= 1

    def power(self) -> Node:
        base = self.atom()
        tok = self._peek()
        if tok and tok[1] == "**":
            self.i += 1
            return Binary("**", base, self.factor())
        return base

    def atom(self) -> Node:
        kind, value, pos = self._take()
        if kind == "num":
            return Num(float(value))
        if kind == "name":
            if value in FUNCTIONS:
                self._take("(")
                args = [self.comparison() if value == "where" else self.expr()]
                while (tok := self._peek()) and tok[1] == ",":
                    self.i += 1
                    args.append(self.expr())
                self._take(")")
                lo, hi = FUNCTIONS[value]
                if not lo <= len(args) <= hi:
                    raise ExprError(f"{value}() takes {lo} argument{'s' if lo > 1 else ''}", self.text, pos)
                return Call(value, tuple(args))
            if value not in self.names:
                raise ExprError(f"unknown name '{value}'", self.text, pos)
            return Name(value)
        if value == "(":
            node = self.expr()
            self._take(")")
            return node
        raise ExprError(f"unexpected '{value}'", self.text, pos)


def names_used(node: Node) -> set[str]:
    if isinstance(node, Name):
        return {node.name}
    if isinstance(node, Unary):
        return names_used(node.arg)
    if isinstance(node, (Binary, Compare)):
        return names_used(node.left) | names_used(node.right)
    if isinstance(node, Call):
        return set().union(*(names_used(a) for a in node.args))
    return set()


_C_FUNCS = {"exp": "exp", "log": "log", "sqrt": "sqrt", "abs": "fabs", "pow": "pow",
            "min": "fmin", "max": "fmax", "expm1": "expm1"}


def to_c(node: Node, symbol: Callable[[str], str], single: bool = False) -> str:
    """C source of ``node`` in double (or float32 with ``single``); ``symbol`` maps a name to
    its C variable."""
    return Code(_c(node, symbol, single))


def _c(node: Node, symbol: Callable[[str], str], single: bool) -> str:
    suffix = "f" if single else ""
    if isinstance(node, Num):
        return f"{float(node.value)!r}{suffix}".replace("inf", "INFINITY")
    if isinstance(node, Name):
        return symbol(node.name)
    if isinstance(node, Unary):
        return f"(-{_c(node.arg, symbol, single)})"
    if isinstance(node, Binary):
        left, right = _c(node.left, symbol, single), _c(node.right, symbol, single)
        if node.op == "**":
            return f"pow{suffix}({left}, {right})"
        return f"({left} {node.op} {right})"
    if isinstance(node, Compare):
        return f"({_c(node.left, symbol, single)} {node.op} {_c(node.right, symbol, single)})"
    args = ", ".join(_c(a, symbol, single) for a in node.args)
    if node.func == "where":
        return f"({_c(node.args[0], symbol, single)} ? " \
               f"{_c(node.args[1], symbol, single)} : {_c(node.args[2], symbol, single)})"
    return f"{_C_FUNCS[node.func]}{suffix}({args})"


_NP_FUNCS: dict[str, Callable[..., Any]] = {
    "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "abs": np.abs, "pow": np.power,
    "min": np.fmin, "max": np.fmax, "expm1": np.expm1, "where": np.where}
_NP_COMPARE: dict[str, Callable[..., Any]] = {
    "<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal, "==": np.equal}


def evaluate(node: Node, env: Mapping[str, np.ndarray]) -> np.ndarray:
    """Evaluate ``node`` with NumPy over arrays in ``env`` (float64; errors become inf/nan)."""
    with np.errstate(all="ignore"):
        if isinstance(node, Num):
            return np.float64(node.value)
        if isinstance(node, Name):
            return env[node.name]
        if isinstance(node, Unary):
            return -evaluate(node.arg, env)
        if isinstance(node, Binary):
            a, b = evaluate(node.left, env), evaluate(node.right, env)
            return {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide,
                    "**": np.power}[node.op](a, b)
        if isinstance(node, Compare):
            return _NP_COMPARE[node.op](evaluate(node.left, env), evaluate(node.right, env))
        return _NP_FUNCS[node.func](*(evaluate(a, env) for a in node.args))


_PY_FUNCS = {"exp": "math.exp", "log": "math.log", "sqrt": "math.sqrt", "abs": "abs",
             "pow": "math.pow", "min": "min", "max": "max", "expm1": "math.expm1"}


class Code(str):
    """Source printed from a tree by this module (the only text :func:`fill_template` takes)."""


# min/max as NumPy's evaluate() computes them (a NaN argument is ignored, np.fmin/np.fmax);
# Python's min/max pass a NaN through or not depending on its position. For numba printers.
NAN_IGNORING_MINMAX = {"min": "np.fmin", "max": "np.fmax"}


# The fast-CPU target whose loops over cells LLVM vectorises (the module imports
# ``app.compute.jit_math as vm``): exp, expm1, log and pow (``**`` too) as jit_math's
# branch-free functions, where() as a select of both computed values (vm.select; both
# branches are evaluated, as np.where and the CUDA ?: of two values), min/max ignoring NaN.
SIMD_FUNCTIONS = {"exp": "vm.exp", "expm1": "vm.expm1", "log": "vm.log", "pow": "vm.pow", "**": "vm.pow",
                  "min": "vm.fmin", "max": "vm.fmax", "where": "vm.select"}


def to_python(node: Node, symbol: Callable[[str], str], functions: Mapping[str, str] | None = None) -> Code:
    """Python source of ``node`` on floats, calling ``math`` (so numba compiles it too);
    ``functions`` replaces the callee printed for some functions (e.g.
    :data:`NAN_IGNORING_MINMAX`, where the module imports ``numpy as np``, or
    :data:`SIMD_FUNCTIONS`; ``"**"`` and ``"where"`` there print as calls)."""
    return Code(_py(node, symbol, {**_PY_FUNCS, **(functions or {})}))


def _py(node: Node, symbol: Callable[[str], str], funcs: Mapping[str, str] = _PY_FUNCS) -> str:
    if isinstance(node, Num):
        return repr(float(node.value)).replace("inf", "math.inf")
    if isinstance(node, Name):
        return symbol(node.name)
    if isinstance(node, Unary):
        return f"(-{_py(node.arg, symbol, funcs)})"
    if isinstance(node, Binary) and node.op == "**" and "**" in funcs:
        return f"{funcs['**']}({_py(node.left, symbol, funcs)}, {_py(node.right, symbol, funcs)})"
    if isinstance(node, (Binary, Compare)):
        return f"({_py(node.left, symbol, funcs)} {node.op} {_py(node.right, symbol, funcs)})"
    if node.func == "where":
        cond, yes, no = (_py(a, symbol, funcs) for a in node.args)
        return f"{funcs['where']}({cond}, {yes}, {no})" if "where" in funcs else f"({yes} if {cond} else {no})"
    args = ", ".join(_py(a, symbol, funcs) for a in node.args)
    return f"{funcs[node.func]}({args})"


_NP_SOURCE = {"exp": "np.exp", "log": "np.log", "sqrt": "np.sqrt", "abs": "np.abs", "pow": "np.power",
              "min": "np.fmin", "max": "np.fmax", "expm1": "np.expm1", "where": "np.where"}


def to_numpy(node: Node, symbol: Callable[[str], str]) -> Code:
    """NumPy source of ``node`` over arrays (the source form of :func:`evaluate`; run it under
    ``np.errstate(all="ignore")``: ``np.where`` evaluates both branches)."""
    return Code(_np_src(node, symbol))


def _np_src(node: Node, symbol: Callable[[str], str]) -> str:
    if isinstance(node, Num):
        return repr(float(node.value)).replace("inf", "np.inf")
    if isinstance(node, Name):
        return symbol(node.name)
    if isinstance(node, Unary):
        return f"(-{_np_src(node.arg, symbol)})"
    if isinstance(node, (Binary, Compare)):
        return f"({_np_src(node.left, symbol)} {node.op} {_np_src(node.right, symbol)})"
    args = ", ".join(_np_src(a, symbol) for a in node.args)
    return f"{_NP_SOURCE[node.func]}({args})"


_SLOT = re.compile(r"\{\{([A-Z][A-Z0-9_]*)\}\}")
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")


def fill_template(template: str, slots: Mapping[str, "Code | int | float | str"]) -> str:
    """``template`` with each ``{{SLOT}}`` replaced by ``slots[SLOT]``.

    A value is printed code (:class:`Code`, from :func:`to_c`/:func:`to_python`), an int or
    float (printed with ``repr``), or a string that is a plain identifier; anything else, a
    missing slot or an unused one raises ``ValueError`` naming the slot.
    """
    used = set(_SLOT.findall(template))
    if missing := used - set(slots):
        raise ValueError(f"template slots without a value: {sorted(missing)}")
    if unused := set(slots) - used:
        raise ValueError(f"values for slots the template does not have: {sorted(unused)}")

    def text(name: str) -> str:
        value = slots[name]
        if isinstance(value, Code):
            return str(value)
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise ValueError(f"slot {name}: {type(value).__name__} is not code, a number or an identifier")
        if isinstance(value, (int, float)):
            if not np.isfinite(value):
                raise ValueError(f"slot {name}: {value!r} is not a finite number")
            return repr(value)
        if not _IDENTIFIER.fullmatch(value):
            raise ValueError(f"slot {name}: {value!r} is not an identifier")
        return value

    return _SLOT.sub(lambda m: text(m.group(1)), template)
