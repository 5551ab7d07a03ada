"""Symbolic derivatives (app.compute.codegen.differentiate) against central differences."""

import numpy as np
import pytest

from app.compute.codegen import Name, Num, evaluate, parse
from app.compute.codegen.differentiate import ONE, ZERO, derivative, jacobian_entries

X = np.linspace(0.3, 2.7, 25)        # away from every kink and pole of the expressions below
H = 1e-6


@pytest.mark.parametrize("text", [
    "3*x*x - 2*x + 1", "x/(1 + x*x)", "-exp(-x/2)", "expm1(x) * log(x)", "sqrt(x) + abs(x - 1.55)",
    "x ** 2.5 + pow(x, 3)", "pow(2, x) + x ** x", "min(x, 1.25) + max(x*x, 2)", "where(x < 1.05, x*x, 1/x)",
    "c * x / (c + x)",
])
def test_derivative_matches_central_differences(text):
    """Every rule: the printed derivative against (f(x + h) − f(x − h))/2h, whose error is
    O(h²·f''') + O(ε·|f|/h): with h = 1e-6 both below 1e-8 relative here."""
    tree = parse(text, {"x", "c"})
    d = derivative(tree, {"x": ONE})
    env = {"c": np.float64(0.7)}
    exact = evaluate(d, {**env, "x": X}) * np.ones_like(X)
    numeric = (evaluate(tree, {**env, "x": X + H}) - evaluate(tree, {**env, "x": X - H})) / (2 * H)
    np.testing.assert_allclose(exact, numeric, rtol=1e-7, atol=1e-8)


def test_terms_without_the_variable_fold_away():
    assert derivative(parse("c * exp(c) + 4", {"c"}), {"x": ONE}) == ZERO
    assert derivative(parse("2 * x", {"x"}), {"x": ONE}) == Num(2.0)


def test_diagonal_jacobian_follows_the_chain_and_prunes():
    """y' = k·(a − y)·s with a = exp(-y), s = 2·y; z' = -z·y: ∂y'/∂y and ∂z'/∂z by the chain
    rule through the program's equations, and nothing for what the output does not read."""
    names = {"y", "z", "k", "a", "s", "dy", "dz", "unused"}
    program = [("a", parse("exp(-y)", names)), ("s", parse("2*y", names)),
               ("unused", parse("y*y*y", names)),
               ("dy", parse("k*(a - y)*s", names)), ("dz", parse("-z*y", names))]
    eqs, diag = jacobian_entries(program, [("dy", "y"), ("dz", "z")], "jac")
    assert not any("unused" in name for name, _ in eqs)
    env = {"y": np.float64(0.4), "z": np.float64(1.3), "k": np.float64(3.0)}
    for name, tree in program + eqs:
        env[name] = evaluate(tree, env)
    y, k = 0.4, 3.0
    assert evaluate(diag[0], env) == pytest.approx(k * ((-np.exp(-y) - 1) * 2 * y + (np.exp(-y) - y) * 2))
    assert evaluate(diag[1], env) == pytest.approx(-0.4)
    assert isinstance(diag[0], Name)


def test_a_prefix_that_starts_a_name_is_refused():
    program = [("jac_x", parse("2*y", {"y"})), ("dy", parse("-jac_x", {"jac_x"}))]
    with pytest.raises(ValueError, match="prefix 'jac'"):
        jacobian_entries(program, [("dy", "y")], "jac")
