import math
import shutil
import subprocess

import numpy as np
import pytest

from app.compute.codegen import ExprError, evaluate, names_used, parse, to_c

NAMES = {"a1", "a2", "a3", "v", "k21"}


@pytest.mark.parametrize("text", [
    "a1*exp(a2*v)", "4*a1*(a2-v)/(exp((a2-v)/a3)-1)", "3*k21/4", "-v**2 + pow(v, 2)",
    "max(min(v, a1), -a2)", "sqrt(abs(v)) + log(a3)", "1.5e-3*v", ".5*-v",
])
def test_accepts_and_evaluates_like_python(text):
    tree = parse(text, NAMES)
    env = {"a1": 0.3, "a2": 7.0, "a3": 2.5, "v": -12.0, "k21": 0.8}
    py = eval(text.replace("exp", "math.exp").replace("sqrt", "math.sqrt").replace("log", "math.log")
              .replace("pow", "math.pow"), {"math": math, "min": min, "max": max, "abs": abs}, dict(env))
    got = evaluate(tree, {k: np.array(v) for k, v in env.items()})
    assert np.isclose(got, py, rtol=1e-12)
    assert names_used(tree) <= NAMES


@pytest.mark.parametrize("text,message,position", [
    ("exp(v);}", "character ';' is not allowed", 6),
    ("v; system(1)", "character ';' is not allowed", 1),
    ("__import__(v)", "unknown name '__import__'", 0),
    ("__import__('os')", "character ''' is not allowed", 11),
    ("v[0]", "character '[' is not allowed", 1),
    ("a1 + ", "unexpected end of expression", 5),
    ("exp(v", "unexpected end of expression", 5),
    ("max(v)", "max() takes 2 arguments", 0),
    ("printf(v)", "unknown name 'printf'", 0),
    ("a1 a2", "unexpected 'a2'", 3),
    ("v /* comment */", "unexpected '*'", 3),
    ('"x"', "character '\"' is not allowed", 0),
])
def test_rejects_with_text_and_position(text, message, position):
    with pytest.raises(ExprError) as info:
        parse(text, NAMES)
    assert message in str(info.value)
    assert info.value.position == position
    assert text in str(info.value)


def test_c_is_printed_from_the_tree():
    tree = parse("a1*exp(-a2*v) + min(v, 2)", NAMES)
    c = to_c(tree, lambda n: f"s_{n}", single=True)
    assert c == "((s_a1 * expf(((-s_a2) * s_v))) + fminf(s_v, 2.0f))"
    assert to_c(tree, lambda n: f"s_{n}") == "((s_a1 * exp(((-s_a2) * s_v))) + fmin(s_v, 2.0))"


# --- printers against each other, and the limits -------------------------------------------

from app.compute.codegen import (
    MAX_DEPTH,
    MAX_TREE_DEPTH,
    Code,
    fill_template,
    to_python,
)

_LEAVES = ["a1", "a2", "a3", "v", "k21", "0.5", "2", "1.5e-3"]


def _random_expression(rng, depth: int) -> str:
    """A random expression whose every operation is defined for the test's positive inputs."""
    if depth == 0 or rng.random() < 0.2:
        return str(rng.choice(_LEAVES))
    a, b = _random_expression(rng, depth - 1), _random_expression(rng, depth - 1)
    form = rng.integers(11)
    return [f"({a} + {b})", f"({a} - {b})", f"({a} * {b})", f"({a}) / (1 + abs({b}))",
            f"exp(-abs({a}) / 10)", f"sqrt(abs({a}))", f"log(1 + abs({a}))",
            f"max({a}, -{b})", f"min({a}, {b}) ** 2",
            f"where({a} < {b}, {a}, 2 * {b})", f"expm1(-abs({a}) / 10) + where({a} >= 1, 1, 0)"][form]


def test_numpy_and_python_printers_agree_on_random_expressions():
    rng = np.random.default_rng(18)
    for _ in range(300):
        text = _random_expression(rng, 4)
        tree = parse(text, NAMES)
        env = {n: float(rng.uniform(0.1, 3.0)) for n in NAMES}
        source = to_python(tree, lambda n: f"env[{n!r}]")
        py = eval(source, {"math": math, "min": min, "max": max, "abs": abs}, {"env": env})
        got = evaluate(tree, {k: np.array(v) for k, v in env.items()})
        assert np.isclose(got, py, rtol=1e-12, atol=1e-300), text


def test_python_printer_compiles_with_numba():
    numba = pytest.importorskip("numba")
    tree = parse("max(a1*exp(-a2*v), sqrt(abs(v))) - min(v, 2) ** 2", NAMES)
    body = to_python(tree, lambda n: n)
    scope = {"math": math}
    exec(f"def f(a1, a2, a3, v, k21):\n    return {body}\n", scope)
    compiled = numba.njit(scope["f"])
    args = (0.3, 7.0, 2.5, -1.2, 0.8)
    assert compiled(*args) == pytest.approx(scope["f"](*args), rel=1e-14)


def test_python_printer_can_print_min_max_as_evaluate_computes_them():
    """NumPy's evaluate() ignores a NaN argument of min/max (fmin/fmax); Python's min/max do
    not, so numba printers that must match evaluate() print NAN_IGNORING_MINMAX."""
    numba = pytest.importorskip("numba")
    from app.compute.codegen import NAN_IGNORING_MINMAX
    tree = parse("min(sqrt(v), a1) + max(a2, sqrt(v))", NAMES)
    body = to_python(tree, lambda n: n, NAN_IGNORING_MINMAX)
    assert "np.fmin(" in body and "np.fmax(" in body and "math.sqrt(v)" in body
    scope = {"math": math, "np": np}
    exec(f"def f(a1, a2, v):\n    return {body}\n", scope)
    compiled = numba.njit(error_model="numpy")(scope["f"])
    for v in (-1.0, 4.0):      # sqrt(-1) is NaN
        expected = evaluate(tree, {"a1": np.array(5.0), "a2": np.array(3.0), "v": np.array(v)})
        assert compiled(5.0, 3.0, v) == expected == (8.0 if v < 0 else 5.0)


def test_deep_nesting_is_refused_with_a_position_not_a_recursion_error():
    text = "(" * (MAX_DEPTH + 5) + "v" + ")" * (MAX_DEPTH + 5)
    with pytest.raises(ExprError, match="nested deeper") as info:
        parse(text, NAMES)
    assert 0 < info.value.position <= MAX_DEPTH + 5
    assert parse("(" * (MAX_DEPTH - 5) + "v" + ")" * (MAX_DEPTH - 5), NAMES) == parse("v", NAMES)
    with pytest.raises(ExprError, match="nested deeper"):
        parse("-" * (MAX_DEPTH + 1) + "v", NAMES)
    with pytest.raises(ExprError, match="tree deeper"):
        parse("+".join(["v"] * (MAX_TREE_DEPTH + 5)), NAMES)
    long_sum = parse("+".join(["v"] * (MAX_TREE_DEPTH - 5)), NAMES)
    assert evaluate(long_sum, {"v": np.array(1.0)}) == MAX_TREE_DEPTH - 5


def test_fill_template_admits_only_printed_code_identifiers_and_numbers():
    code = to_c(parse("a1*v", NAMES), lambda n: n)
    out = fill_template("{{TYPE}} f() { return {{BODY}} + {{N}}; }", {"TYPE": "double", "BODY": code, "N": 3})
    assert out == "double f() { return (a1 * v) + 3; }"
    assert isinstance(code, Code)
    for bad in ["x); system(1", "a b", "1;"]:
        with pytest.raises(ValueError, match="BODY"):
            fill_template("{{BODY}}", {"BODY": bad})
    with pytest.raises(ValueError, match="N"):
        fill_template("{{N}}", {"N": float("nan")})
    with pytest.raises(ValueError, match="without a value"):
        fill_template("{{A}} {{B}}", {"A": 1})
    with pytest.raises(ValueError, match="does not have"):
        fill_template("{{A}}", {"A": 1, "B": 2})


def test_where_takes_a_comparison_and_prints_to_c_and_python():
    tree = parse("where(v <= a1, expm1(v), -v)", NAMES)
    assert to_c(tree, lambda n: n) == "((v <= a1) ? expm1(v) : (-v))"
    assert to_python(tree, lambda n: n) == "(math.expm1(v) if (v <= a1) else (-v))"
    env = {"v": np.array([-1.0, 2.0]), "a1": np.array(0.5)}
    assert np.allclose(evaluate(tree, env), [math.expm1(-1.0), -2.0])
    with pytest.raises(ExprError, match="needs a comparison"):
        parse("where(v, 1, 2)", NAMES)
    with pytest.raises(ExprError, match="unexpected '<'"):
        parse("v < 1", NAMES)


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler to run the C printer's output")
def test_c_printer_agrees_with_python_printer_when_compiled(tmp_path):
    """The double C printer, compiled by the host C compiler (as nvcc compiles the same text),
    against the Python printer on random expressions; float printing is checked to 1e-5."""
    rng = np.random.default_rng(7)
    env = {n: float(rng.uniform(0.1, 3.0)) for n in sorted(NAMES)}
    trees = [parse(_random_expression(rng, 4), NAMES) for _ in range(60)]
    decls = "".join(f"    const double {n} = {v!r};\n    const float {n}_f = {v!r}f;\n" for n, v in env.items())
    body = "".join(f'    printf("%.17g %.9g\\n", (double)({to_c(t, lambda n: n)}), '
                   f'(double)({to_c(t, lambda n: n + "_f", single=True)}));\n' for t in trees)
    (tmp_path / "p.c").write_text(f"#include <math.h>\n#include <stdio.h>\nint main(void) {{\n{decls}{body}    return 0;\n}}\n")
    subprocess.run(["cc", "-O0", "-o", str(tmp_path / "p"), str(tmp_path / "p.c"), "-lm"], check=True)
    lines = subprocess.run([str(tmp_path / "p")], check=True, capture_output=True, text=True).stdout.split("\n")
    assert len(lines) == len(trees) + 1
    for tree, line in zip(trees, lines[:-1], strict=True):
        py = eval(to_python(tree, lambda n: f"env[{n!r}]"), {"math": math, "min": min, "max": max, "abs": abs},
                  {"env": env})
        double, single = (float(x) for x in line.split())
        assert double == pytest.approx(py, rel=1e-12, abs=1e-300)
        assert single == pytest.approx(py, rel=1e-5, abs=1e-6)


def test_numpy_source_printer_agrees_with_evaluate_on_random_expressions():
    from app.compute.codegen import to_numpy
    rng = np.random.default_rng(81)
    env = {n: rng.uniform(0.1, 3.0, 7) for n in NAMES}
    for _ in range(200):
        tree = parse(_random_expression(rng, 4), NAMES)
        source = to_numpy(tree, lambda n: f"env[{n!r}]")
        with np.errstate(all="ignore"):
            got = eval(source, {"np": np}, {"env": env})
        np.testing.assert_allclose(got, evaluate(tree, env), rtol=1e-13)


def test_simd_printer_agrees_with_evaluate_in_a_vectorised_loop():
    """The fast-CPU printer (SIMD_FUNCTIONS: jit_math's functions, where() as a select, ``**``
    as vm.pow) compiled into loops over cells, against evaluate() on random expressions (within
    a few float64 roundings: the functions are within 1-2 ulp); a loop with one output row (few
    run-time alias checks) is vectorised."""
    numba = pytest.importorskip("numba")
    from app.compute.codegen import SIMD_FUNCTIONS
    rng = np.random.default_rng(27)
    names = sorted(NAMES)
    trees = [parse(_random_expression(rng, 4) + " + a1 ** v", NAMES) for _ in range(40)]
    symbol = {n: f"x[{k}, c]" for k, n in enumerate(names)}.__getitem__
    body = [f"        out[{q}, c] = {to_python(t, symbol, SIMD_FUNCTIONS)}" for q, t in enumerate(trees)]
    assert all("math.exp" not in b and " if " not in b for b in body) and any("vm.select(" in b for b in body)
    scope: dict = {"np": np, "math": math}
    total = " + ".join(to_python(t, symbol, SIMD_FUNCTIONS) for t in trees[:4])
    exec("from app.compute import jit_math as vm\n"
         "def cells(x, out):\n    for i in range(x.shape[1]):\n        c = np.uint64(i)\n" + "\n".join(body) +
         f"\ndef one_row(x, out):\n    for i in range(x.shape[1]):\n        c = np.uint64(i)\n        out[c] = {total}", scope)
    cells, one_row = (numba.njit(error_model="numpy", fastmath={"contract"})(scope[f]) for f in ("cells", "one_row"))
    x = rng.uniform(0.1, 3.0, (len(names), 203))
    out = np.empty((len(trees), x.shape[1]))
    cells(x, out)
    env = {n: x[k] for k, n in enumerate(names)}
    for q, tree in enumerate(trees):
        np.testing.assert_allclose(out[q], evaluate(tree, env), rtol=1e-13, atol=1e-300)
    one_row(x, out[0])
    np.testing.assert_allclose(out[0], sum(evaluate(t, env) for t in trees[:4]), rtol=1e-12)
    assert " x double>" in one_row.inspect_llvm(one_row.signatures[0])
