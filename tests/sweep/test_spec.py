"""The sweep block: validation with located messages, and its expansion into points."""

import math

import pytest

from app.sims.common.config import ConfigError, parse_yaml
from app.sweep.spec import Point, apply_point, parse_sweep


def _spec(text: str):
    doc = parse_yaml(text, "sweep.yaml")
    return parse_sweep(doc.data["sweep"], doc)


def test_grid_of_list_and_log_range():
    spec = _spec("""
sweep:
  parameters:
    - {key: a.x, values: [1, 2]}
    - {key: a.y, range: {start: 1, stop: 100, num: 3, scale: log}}
""")
    rows = spec.value_rows()
    assert len(rows) == 6
    assert [r["a.y"] for r in rows[:3]] == pytest.approx([1, 10, 100])
    assert [r["a.x"] for r in rows] == [1, 1, 1, 2, 2, 2]


def test_zip_and_replicates_seeds():
    spec = _spec("""
sweep:
  parameters:
    - {key: a.x, values: [1, 2, 3]}
    - {key: a.y, range: {start: 0, stop: 1, num: 3}}
  combine: zip
  replicates: 2
""")
    points = spec.points(base_seed=10)
    assert [(p.values["a.x"], p.values["a.y"]) for p in points[::2]] == [(1, 0), (2, 0.5), (3, 1)]
    assert [p.seed for p in points[:2]] == [10, 11]
    assert len({p.name for p in points}) == 6


@pytest.mark.parametrize("method", ["lhs", "sobol"])
def test_samples_stay_in_their_box(method):
    spec = _spec(f"""
sweep:
  sample: {{method: {method}, n: 16, seed: 3}}
  parameters:
    - {{key: a.x, bounds: [0.001, 0.1], scale: log}}
    - {{key: a.y, bounds: [-1, 1]}}
""")
    rows = spec.value_rows()
    assert len(rows) == 16
    xs = [r["a.x"] for r in rows]
    assert all(0.001 <= x <= 0.1 for x in xs) and all(-1 <= r["a.y"] <= 1 for r in rows)
    # a Latin hypercube puts exactly one sample in each of 16 equal strata of log(x)
    if method == "lhs":
        strata = sorted(int(16 * (math.log(x) - math.log(0.001)) / (math.log(0.1) - math.log(0.001)))
                        for x in xs)
        assert strata == list(range(16))


@pytest.mark.parametrize("block, message, line", [
    ("sweep: [1]", "is a mapping", 1),
    ("sweep:\n  parameters: []", "non-empty list", 2),
    ("sweep:\n  parameters:\n    - {key: a.x}", "exactly one of values or range", 3),
    ("sweep:\n  parameters:\n    - {key: a.x, values: [1, .nan]}", "finite number", 3),
    ("sweep:\n  parameters:\n    - {key: 'a;x', values: [1]}", "dotted config path", 3),
    ("sweep:\n  parameters:\n    - {key: domain, values: [1]}", "cannot be swept", 3),
    ("sweep:\n  parameters:\n    - {key: a.x, range: {start: 0, stop: 1, num: 3, scale: log}}",
     "log range", 3),
    ("sweep:\n  parameters:\n    - {key: a.x, values: [1]}\n  combine: cross", "not one of", 4),
    ("sweep:\n  parameters:\n    - {key: a.x, values: [1]}\n    - {key: a.y, values: [1, 2]}\n"
     "  combine: zip", "same number of values", 5),
    ("sweep:\n  parameters:\n    - {key: a.x, values: [1]}\n  replicates: 0", "replicates", 4),
    ("sweep:\n  parameters:\n    - {key: a.x, range: {start: 0, stop: 1, num: 2000000}}", "range.num", 3),
    ("sweep:\n  sample: {method: lhs, n: 4}\n  parameters:\n    - {key: a.x, values: [1]}",
     "exactly one of bounds", 4),
])
def test_bad_blocks_are_refused_with_their_line(block, message, line):
    with pytest.raises(ConfigError) as err:
        _spec(block)
    assert message in str(err.value)
    assert err.value.source == "sweep.yaml" and err.value.line == line


def test_apply_point_keeps_integers_whole_and_sets_the_seed():
    data = {"ensemble": {"realizations": 64, "seed": 1}, "model": {"parameters": {"c": 1.0}}}
    p = Point(0, 1, {"ensemble.realizations": 128.0, "model.parameters.c": 2.5}, seed=9)
    out = apply_point(data, p, "ensemble.seed")
    assert out["ensemble"] == {"realizations": 128, "seed": 9}
    assert isinstance(out["ensemble"]["realizations"], int)
    assert out["model"]["parameters"]["c"] == 2.5
    assert data["ensemble"]["realizations"] == 64          # the base is not touched
