"""Strength reduction (app.compute.codegen.strength) keeps every value: random inputs."""

import numpy as np
import pytest

from app.compute.codegen import Binary, Call, evaluate, parse, to_c
from app.compute.codegen.strength import reduce_strength

NAMES = {"x", "y"}


@pytest.mark.parametrize("text", [
    "pow(x, 2)", "pow(x, 3)", "pow(x, 8)", "pow(x, -1)", "pow(x, -3)", "pow(x, 0.5)", "pow(x, -0.5)",
    "pow(x, 1.5)", "x**4", "pow(x, 1.4)", "x / 3.0", "x / 0.0", "x / 1e-310", "(1 * x) * 1 + y / 200",
    "where(x < 2, pow(x, 2) / 7, y)", "y / (exp(y / 13) - 1)", "(1 - exp(-y)) * x",
])
def test_values_kept(text):
    tree = parse(text, NAMES)
    reduced = reduce_strength(tree)
    rng = np.random.default_rng(3)
    env = {"x": rng.uniform(0.01, 5.0, 200), "y": rng.uniform(-3.0, 3.0, 200)}
    np.testing.assert_allclose(evaluate(reduced, env), evaluate(tree, env), rtol=1e-13)  # exp(u)-1 cancels


def test_rewrites_what_it_should():
    assert to_c(reduce_strength(parse("pow(x, 2)", NAMES)), str) == "(x * x)"
    assert to_c(reduce_strength(parse("pow(x, 0.5)", NAMES)), str) == "sqrt(x)"
    assert to_c(reduce_strength(parse("x / 4", NAMES)), str) == "(x * 0.25)"
    assert to_c(reduce_strength(parse("1 * x * 1", NAMES)), str) == "x"
    assert to_c(reduce_strength(parse("exp(2 * x) - 1", NAMES)), str) == "expm1((2.0 * x))"
    assert to_c(reduce_strength(parse("1 - exp(x)", NAMES)), str) == "(-expm1(x))"


def test_expm1_keeps_digits_where_exp_minus_one_cancels():
    tree = reduce_strength(parse("y / (exp(y / 13) - 1)", NAMES))
    y = np.array([1e-9, -1e-12, 1e-15], np.float32)
    got = evaluate(tree, {"y": y})
    np.testing.assert_allclose(got, 13.0, rtol=1e-6)


def test_numbers_and_small_powers_kept():
    kept = reduce_strength(parse("pow(x, 1.4) + x / 0 + x / 1e-310", NAMES))
    assert isinstance(kept, Binary) and isinstance(kept.left.left, Call)
    assert "/ 0.0" in to_c(kept, str) and "/ 1e-310" in to_c(kept, str)
