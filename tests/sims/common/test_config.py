from dataclasses import dataclass, field

import pytest

from app.sims.common.config import ConfigError, build, dump_yaml, load_yaml, parse_yaml, spec
from app.sims.common.simulation import load_run_config


@dataclass(frozen=True)
class Inner:
    rate: float = field(default=1.0, metadata=spec(range=(0.0, 10.0)))
    mode: str = field(default="a", metadata=spec(choices=("a", "b")))


@dataclass(frozen=True)
class Outer:
    count: int = 1
    inner: Inner = field(default_factory=Inner)
    names: list[str] = field(default_factory=list)


def build_text(text: str) -> Outer:
    doc = parse_yaml(text, "test.yaml")
    return build(Outer, doc.data, doc)


def test_valid_config_builds():
    cfg = build_text("count: 3\ninner:\n  rate: 2.5\n  mode: b\nnames: [x, y]\n")
    assert cfg == Outer(3, Inner(2.5, "b"), ["x", "y"])


def test_unknown_key_names_line_and_valid_keys():
    with pytest.raises(ConfigError) as info:
        build_text("count: 3\ninner:\n  rat: 2.5\n")
    assert str(info.value).startswith("test.yaml:3: inner.rat: unknown key 'rat'")
    assert "rate, mode" in str(info.value)


def test_out_of_range_names_the_valid_range():
    with pytest.raises(ConfigError) as info:
        build_text("inner:\n  rate: 12\n")
    assert info.value.line == 2
    assert "valid range is [0, 10]" in str(info.value)


def test_wrong_type_and_bad_choice():
    with pytest.raises(ConfigError, match="test.yaml:1: count: expected a whole number"):
        build_text("count: many\n")
    with pytest.raises(ConfigError, match="is not one of: a, b"):
        build_text("inner: {mode: c}\n")


def test_yaml_syntax_error_points_at_line():
    with pytest.raises(ConfigError) as info:
        parse_yaml("count: 1\ninner: {rate: 2\nnames: []\n", "bad.yaml")
    assert info.value.source == "bad.yaml" and info.value.line is not None
    assert "YAML syntax error" in str(info.value)


def test_duplicate_key_is_rejected():
    with pytest.raises(ConfigError, match="duplicate key 'count'"):
        parse_yaml("count: 1\ncount: 2\n")


def test_missing_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot read file"):
        load_yaml(tmp_path / "nope.yaml")


def test_run_config_domain_checks(tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text("domain: weather\n")
    with pytest.raises(ConfigError, match="unknown domain 'weather'"):
        load_run_config(path)


def test_dump_round_trip():
    cfg = Outer(2, Inner(3.0, "b"), ["q"])
    doc = parse_yaml(dump_yaml(cfg))
    assert build(Outer, doc.data, doc) == cfg
