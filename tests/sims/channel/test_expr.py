import math

import numpy as np
import pytest

from app.sims.channel.expr import ExprError, names_used, parse, to_c, evaluate

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
