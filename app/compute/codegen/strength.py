"""Strength reduction on expression trees: the same value from cheaper (or better conditioned)
operations, for every printer at once (a generator applies it to its trees before printing).

* ``pow(x, n)`` for an integer ``n`` with ``|n| <= 8``: products by repeated squaring (``1/…``
  for ``n < 0``); ``pow(x, ±0.5)``, ``pow(x, 1.5)``: through ``sqrt``;
* ``x / c`` for a number ``c`` whose reciprocal is a normal float: ``x * (1/c)`` (within an ulp;
  a division costs ~10 multiplications in float64 on a GPU);
* ``1 * x`` and ``x * 1``: ``x``;
* ``exp(u) - 1`` and ``1 - exp(u)``: ``±expm1(u)``, exact near u = 0 where the difference
  cancels (a GHK flux's ``V/(exp(2VF/RT) - 1)`` in float32 with fast-math exponentials
  divides by 0 for |V| below ~1e-6 mV, and loses all digits near it).

Compilers may not do these themselves: ``x/c`` and ``pow`` are exact IEEE operations that they
must keep without fast-math, and numba has no fast-math in the engines here.
"""

from __future__ import annotations

import math
import sys

from app.compute.codegen import Binary, Call, Compare, Node, Num, Unary

MAX_INTEGER_POWER = 8


def reduce_strength(node: Node) -> Node:
    """``node`` with the rewrites above applied bottom-up."""
    if isinstance(node, Unary):
        return Unary(node.op, reduce_strength(node.arg))
    if isinstance(node, Compare):
        return Compare(node.op, reduce_strength(node.left), reduce_strength(node.right))
    if isinstance(node, Call):
        args = tuple(reduce_strength(a) for a in node.args)
        if node.func == "pow" and isinstance(args[1], Num):
            return _power(args[0], args[1].value) or Call("pow", args)
        return Call(node.func, args)
    if isinstance(node, Binary):
        left, right = reduce_strength(node.left), reduce_strength(node.right)
        if node.op == "**" and isinstance(right, Num):
            return _power(left, right.value) or Binary("**", left, right)
        if node.op == "/" and isinstance(right, Num) and _reciprocal_is_normal(right.value):
            return _times(left, Num(1.0 / right.value))
        if node.op == "*":
            return _times(left, right)
        if node.op == "-" and _is_one(right) and isinstance(left, Call) and left.func == "exp":
            return Call("expm1", left.args)
        if node.op == "-" and _is_one(left) and isinstance(right, Call) and right.func == "exp":
            return Unary("-", Call("expm1", right.args))
        return Binary(node.op, left, right)
    return node


def _is_one(node: Node) -> bool:
    return isinstance(node, Num) and node.value == 1.0


def _reciprocal_is_normal(c: float) -> bool:
    if c == 0.0 or not math.isfinite(c):
        return False
    r = 1.0 / c
    return math.isfinite(r) and abs(r) >= sys.float_info.min


def _times(left: Node, right: Node) -> Node:
    if isinstance(left, Num) and left.value == 1.0:
        return right
    if isinstance(right, Num) and right.value == 1.0:
        return left
    return Binary("*", left, right)


def _power(base: Node, exponent: float) -> Node | None:
    if exponent == 0.5:
        return Call("sqrt", (base,))
    if exponent == -0.5:
        return Binary("/", Num(1.0), Call("sqrt", (base,)))
    if exponent == 1.5:
        return Binary("*", base, Call("sqrt", (base,)))
    if exponent != int(exponent) or not 1 <= abs(exponent) <= MAX_INTEGER_POWER:
        return None
    n = int(abs(exponent))
    result: Node | None = None
    square = base
    while n:
        if n & 1:
            result = square if result is None else Binary("*", result, square)
        n >>= 1
        if n:
            square = Binary("*", square, square)
    assert result is not None
    return result if exponent > 0 else Binary("/", Num(1.0), result)
