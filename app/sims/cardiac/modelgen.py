"""One text of a cell model's equations, two programs made from it: a NumPy function and a
CUDA device function.

A model is written as ordered assignments ``name = expression`` in a small language that is
a common subset of Python and C (see :data:`FUNCTIONS`)::

    E_Na = RTF * log(Na_o / Na_i)
    alpha_h = where(V < -40.0, 0.135 * exp((V + 80.0) / -6.8), 0.0)

Each line is parsed with :mod:`ast` and checked against a whitelist (numbers, names already
defined, ``+ - * /``, unary minus, the functions below, one comparison as the first argument
of ``where``). Nothing else is accepted, and both programs are printed from the checked tree,
so the NumPy engine and the CUDA engine evaluate the same expressions in the same order.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping

import numpy as np

FUNCTIONS = {"exp": 1, "log": 1, "sqrt": 1, "fabs": 1, "pow": 2, "expm1": 1, "where": 3}
_NP = {"exp": "np.exp", "log": "np.log", "sqrt": "np.sqrt", "fabs": "np.abs", "pow": "np.power",
       "expm1": "np.expm1", "where": "np.where"}
_C = {"exp": "exp", "log": "log", "sqrt": "sqrt", "fabs": "fabs", "pow": "pow", "expm1": "expm1"}
_COMPARE = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "=="}
_BINOP = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}


class ModelError(ValueError):
    """A rejected model line, naming the line and the problem."""


@dataclass(frozen=True)
class Equation:
    name: str
    tree: ast.expr
    text: str
    line: int


@dataclass
class ModelSource:
    """Checked equations plus the names they may read.

    ``inputs`` are per-cell values given to the function (the states and e.g. the stimulus),
    ``constants`` are fixed numbers inlined into both programs, ``parameters`` are run-time
    values (one for all cells) passed by name.
    """

    inputs: tuple[str, ...]
    constants: Mapping[str, float]
    parameters: tuple[str, ...]
    equations: list[Equation] = field(default_factory=list)
    outputs: tuple[str, ...] = ()

    @classmethod
    def parse(cls, text: str, inputs: Iterable[str], constants: Mapping[str, float],
              parameters: Iterable[str], outputs: Iterable[str]) -> "ModelSource":
        src = cls(tuple(inputs), dict(constants), tuple(parameters))
        known = set(src.inputs) | set(src.constants) | set(src.parameters)
        clash = (set(src.inputs) & set(src.constants)) | (set(src.parameters) & set(src.constants))
        if clash:
            raise ModelError(f"names defined twice: {sorted(clash)}")
        for lineno, raw in enumerate(text.splitlines(), 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            name, sep, expr = line.partition("=")
            name = name.strip()
            if not sep or not name.isidentifier():
                raise ModelError(f"line {lineno}: expected 'name = expression': {raw.strip()}")
            if name in known:
                raise ModelError(f"line {lineno}: '{name}' is already defined")
            try:
                tree = ast.parse(expr.strip(), mode="eval").body
            except SyntaxError as exc:
                raise ModelError(f"line {lineno}: syntax error in '{expr.strip()}': {exc.msg}") from None
            _check(tree, known, lineno, top=True)
            src.equations.append(Equation(name, tree, expr.strip(), lineno))
            known.add(name)
        missing = [o for o in outputs if o not in known]
        if missing:
            raise ModelError(f"outputs never defined: {missing}")
        src.outputs = tuple(outputs)
        return src

    # ---- NumPy ------------------------------------------------------------------------------
    def numpy_source(self, func_name: str = "model") -> str:
        args = ", ".join([*self.inputs, *self.parameters])
        body = [f"def {func_name}({args}):"]
        for eq in self.equations:
            body.append(f"    {eq.name} = {_emit(eq.tree, 'np', self.constants)}")
        outs = [_emit(ast.Name(o), "np", self.constants) for o in self.outputs]
        body.append(f"    return ({', '.join(outs)},)")
        return "\n".join(body) + "\n"

    def numpy_function(self, func_name: str = "model") -> Callable:
        namespace: dict = {"np": np}
        exec(compile(self.numpy_source(func_name), f"<{func_name}>", "exec"), namespace)  # noqa: S102
        raw = namespace[func_name]

        def wrapped(*args):
            with np.errstate(all="ignore"):     # where() evaluates both branches
                return raw(*args)
        wrapped.__name__ = func_name
        return wrapped

    def scalar_source(self, func_name: str = "model_scalar") -> str:
        """The equations on scalars, calling ``math`` and the helpers ``_exp``, ``_expm1``,
        ``_pow``, ``_div``: run as Python floats (:meth:`scalar_function`) or compiled by numba
        with numba versions of the helpers (``app/sims/cardiac/compiled.py``)."""
        args = ", ".join([*self.inputs, *self.parameters])
        body = [f"def {func_name}({args}):"]
        for eq in self.equations:
            body.append(f"    {eq.name} = {_emit(eq.tree, 'py', self.constants)}")
        outs = [_emit(ast.Name(o), "py", self.constants) for o in self.outputs]
        body.append(f"    return ({', '.join(outs)},)")
        return "\n".join(body) + "\n"

    def scalar_function(self, func_name: str = "model_scalar") -> Callable:
        """The same equations on Python floats (``math``), for one cell at a time: ~50x less
        overhead than NumPy on 1-element arrays. Overflowing exponentials give inf as in C."""
        namespace: dict = {"_exp": _safe_exp, "_expm1": _safe_expm1, "math": math,
                           "_pow": _safe_pow, "_div": _safe_div}
        exec(compile(self.scalar_source(func_name), f"<{func_name}>", "exec"), namespace)  # noqa: S102
        return namespace[func_name]

    # ---- CUDA -------------------------------------------------------------------------------
    def cuda_source(self, func_name: str, real: str = "float") -> str:
        """A ``__device__`` function: inputs by value, parameters from ``params[]``, outputs by
        pointer, all in type ``real`` ('float' or 'double')."""
        if real not in ("float", "double"):
            raise ValueError("real must be float or double")
        sig = [f"const {real} {n}" for n in self.inputs]
        sig.append(f"const {real}* __restrict__ params")
        sig += [f"{real}* __restrict__ out_{n}" for n in self.outputs]
        lines = [f"__device__ __forceinline__ void {func_name}({', '.join(sig)})", "{"]
        for i, p in enumerate(self.parameters):
            lines.append(f"    const {real} {p} = params[{i}];")
        for eq in self.equations:
            lines.append(f"    const {real} {eq.name} = {_emit(eq.tree, real, self.constants)};"
                         f"  // l.{eq.line}")
        for n in self.outputs:
            lines.append(f"    *out_{n} = {_emit(ast.Name(n), real, self.constants)};")
        lines.append("}")
        return "\n".join(lines) + "\n"


def _check(node: ast.AST, known: set[str], lineno: int, top: bool = False, in_where: bool = False) -> None:
    where = f"line {lineno}"
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
            raise ModelError(f"{where}: only numbers are allowed as constants")
        return
    if isinstance(node, ast.Name):
        if node.id not in known:
            raise ModelError(f"{where}: unknown name '{node.id}'")
        return
    if isinstance(node, ast.BinOp):
        if type(node.op) not in _BINOP:
            raise ModelError(f"{where}: operator {type(node.op).__name__} is not allowed (use pow())")
        _check(node.left, known, lineno)
        _check(node.right, known, lineno)
        return
    if isinstance(node, ast.UnaryOp):
        if not isinstance(node.op, (ast.USub, ast.UAdd)):
            raise ModelError(f"{where}: unary {type(node.op).__name__} is not allowed")
        _check(node.operand, known, lineno)
        return
    if isinstance(node, ast.Compare):
        if not in_where or len(node.ops) != 1 or type(node.ops[0]) not in _COMPARE:
            raise ModelError(f"{where}: a single comparison is allowed only as where()'s condition")
        _check(node.left, known, lineno)
        _check(node.comparators[0], known, lineno)
        return
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
            raise ModelError(f"{where}: function not allowed; allowed: {', '.join(FUNCTIONS)}")
        if node.keywords or len(node.args) != FUNCTIONS[node.func.id]:
            raise ModelError(f"{where}: {node.func.id}() takes {FUNCTIONS[node.func.id]} arguments")
        for i, arg in enumerate(node.args):
            _check(arg, known, lineno, in_where=node.func.id == "where" and i == 0)
        if node.func.id == "where" and not isinstance(node.args[0], ast.Compare):
            raise ModelError(f"{where}: where()'s first argument must be a comparison")
        return
    raise ModelError(f"{where}: {type(node).__name__} is not allowed")


def _safe_exp(x: float) -> float:
    return math.exp(x) if x < 709.0 else math.inf


def _safe_expm1(x: float) -> float:
    return math.expm1(x) if x < 709.0 else math.inf


def _safe_pow(x: float, y: float) -> float:
    try:
        return math.pow(x, y)
    except (OverflowError, ValueError):
        return math.inf if x > 0 else math.nan


def _safe_div(x: float, y: float) -> float:
    if y == 0.0:
        return math.copysign(math.inf, x) * math.copysign(1.0, y) if x else math.nan
    return x / y


_PY = {"exp": "_exp", "log": "math.log", "sqrt": "math.sqrt", "fabs": "abs", "pow": "_pow",
       "expm1": "_expm1"}


def _literal(value: float, real: str) -> str:
    text = repr(float(value))
    if real == "float":
        return f"{text}f"
    return text


def _emit(node: ast.AST, real: str, constants: Mapping[str, float]) -> str:
    """Print ``node`` for NumPy (``real == 'np'``) or C (``'float'`` / ``'double'``)."""
    if isinstance(node, ast.Constant):
        return repr(float(node.value)) if real in ("np", "py") else _literal(node.value, real)
    if isinstance(node, ast.Name):
        if node.id in constants:
            value = float(constants[node.id])
            return f"({value!r})" if real in ("np", "py") else f"({_literal(value, real)})"
        return node.id
    if isinstance(node, ast.BinOp):
        left, right = _emit(node.left, real, constants), _emit(node.right, real, constants)
        if real == "py" and isinstance(node.op, ast.Div):
            return f"_div({left}, {right})"
        return f"({left} {_BINOP[type(node.op)]} {right})"
    if isinstance(node, ast.UnaryOp):
        sign = "-" if isinstance(node.op, ast.USub) else "+"
        return f"({sign}{_emit(node.operand, real, constants)})"
    if isinstance(node, ast.Compare):
        return (f"({_emit(node.left, real, constants)} {_COMPARE[type(node.ops[0])]} "
                f"{_emit(node.comparators[0], real, constants)})")
    assert isinstance(node, ast.Call)
    name = node.func.id
    args = [_emit(a, real, constants) for a in node.args]
    if name == "pow" and isinstance(node.args[1], ast.Constant) and float(node.args[1].value) in (2.0, 3.0):
        n = int(node.args[1].value)                       # small integer powers as products
        return "(" + " * ".join([args[0]] * n) + ")"
    if real == "np":
        return f"{_NP[name]}({', '.join(args)})"
    if real == "py":
        if name == "where":
            return f"({args[1]} if {args[0]} else {args[2]})"
        return f"{_PY[name]}({', '.join(args)})"
    if name == "where":
        return f"({args[0]} ? {args[1]} : {args[2]})"
    fn = _C[name] + ("f" if real == "float" else "")
    return f"{fn}({', '.join(args)})"
