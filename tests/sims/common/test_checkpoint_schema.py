"""Checkpoint schemas: every array of a real checkpoint of each domain (network, epidermis,
cardiac, SSA) is corrupted in each way a hand edit or a damaged file can (missing, wrong
rank or shape, text, NaN, fractional values in integer arrays, values out of range) and the
load refuses it, naming the checkpoint and the array, before any array is used; the embedded
config is validated like a user's file and its errors name the checkpoint. Plus the CLI
reproducers of the report (exit 2, nothing run)."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.sims.common.checkpoint import CheckpointError, write_checkpoint
from app.sims.common.checkpoint_schema import ArraySpec, check_arrays, checked_config
from app.sims.common.config import parse_yaml
from app.sims.common.simulation import load_run_config

PRESETS = Path(__file__).resolve().parents[3] / "resources" / "presets"


@functools.cache
def real_state(domain: str):
    """(state, schema) of a freshly built simulation of a small preset of ``domain``."""
    if domain == "network":
        from app.sims.network.simulation import NetworkSimulation, checkpoint_schema
        _, cfg = load_run_config(PRESETS / "network" / "00-development-10x10-fast.yaml")
        state = NetworkSimulation(cfg, "cpu-reference").state()
        state["engine_syn_pre"] = np.array([0, 5, 7])           # a few synapses, as after growth
        state["engine_syn_post"] = np.array([1, 2, 3])
        state["engine_syn_u"] = np.full(3, 0.2)
        state["engine_syn_r"] = np.ones(3)
        state["engine_syn_last"] = np.zeros(3, np.int64)
        state["spike_steps"], state["spike_neurons"] = np.array([3, 9]), np.array([4, 8], np.int32)
        return state, checkpoint_schema(cfg, state)
    if domain == "ssa":
        from app.sims.ssa.simulation import SSASimulation, checkpoint_schema
        _, cfg = load_run_config(PRESETS / "ssa" / "birth-death.yaml",
                                 overrides=["ensemble.realizations=16"])
        return SSASimulation(cfg, "cpu-reference").state(), checkpoint_schema(cfg)
    if domain == "epidermis":
        from app.sims.epidermis.simulation import EpidermisSimulation, checkpoint_schema
        _, cfg = load_run_config(PRESETS / "epidermis" / "small-cpu-demo.yaml",
                                 overrides=["run.relax_steps=0"])
        state = EpidermisSimulation(cfg, "cpu-reference").state()
        return state, checkpoint_schema(cfg, state)
    from app.sims.cardiac.simulation import CardiacSimulation, checkpoint_schema
    _, cfg = load_run_config(PRESETS / "cardiac" / "00-single-cell-1hz.yaml")
    sim = CardiacSimulation(cfg, "cpu-reference")
    state = sim.state()
    return state, checkpoint_schema(sim.engine.state(), state)


DOMAINS = ("network", "ssa", "epidermis", "cardiac")


def corruptions(spec: ArraySpec, a: np.ndarray) -> dict[str, object]:
    """Ways to break array ``a`` of ``spec`` (only those that break it)."""
    out: dict[str, object] = {"missing": None, "text": np.full(a.shape, "x")}
    if spec.shape is not None:
        out["rank"] = a.reshape(-1)[:1].reshape(1, 1, 1) if a.size else np.zeros((1, 1, 1))
        fixed = [i for i, d in enumerate(spec.shape) if d is not None]
        if fixed:
            shape = list(a.shape)
            shape[fixed[0]] += 1
            out["shape"] = np.zeros(shape, a.dtype)
    if a.size and spec.kind in ("float", "int") and spec.finite:
        out["nan"] = np.where(np.arange(a.size).reshape(a.shape) == 0, np.nan, a.astype(float))
    if a.size and spec.kind == "int":
        out["fraction"] = a.astype(float) + 0.5
        out["huge"] = np.full(a.shape, 2.0**70)
    if a.size and spec.hi is not None:
        out["above"] = np.full(a.shape, float(spec.hi) + max(1.0, abs(spec.hi) * 1e-9))
    if a.size and spec.lo is not None:
        out["below"] = np.full(a.shape, float(spec.lo) - 1.0)
    return out


def cases():
    for domain in DOMAINS:
        yield from ((domain, how) for how in ("missing", "rank", "shape", "text", "nan", "fraction",
                                               "huge", "above", "below"))


@pytest.mark.parametrize("domain,how", list(cases()))
def test_every_array_of_every_domain_refuses_each_corruption(domain, how):
    state, schema = real_state(domain)
    check_arrays(state, schema, "ok.npz")                  # the real state passes
    tried = 0
    for spec in schema:
        if spec.name not in state:
            continue
        broken = corruptions(spec, np.asarray(state[spec.name])).get(how, "skip")
        if isinstance(broken, str):
            continue
        edited = dict(state)
        if broken is None:
            if spec.optional:
                continue
            del edited[spec.name]
        else:
            edited[spec.name] = broken
        with pytest.raises(CheckpointError) as info:
            check_arrays(edited, schema, "edited.npz")
        text = str(info.value)
        assert text.startswith("checkpoint edited.npz:") and f"'{spec.name}'" in text, text
        tried += 1
    if how in ("missing", "text", "rank"):
        assert tried >= 5


@settings(derandomize=True, max_examples=80, deadline=None)
@given(domain=st.sampled_from(DOMAINS), pick=st.integers(0, 10**6), value=st.one_of(
    st.floats(allow_nan=True, allow_infinity=True), st.integers(-2**40, 2**40), st.text(max_size=3)))
def test_generated_single_value_edits_are_refused_or_in_range(domain, pick, value):
    """Any one element set to any value: either the schema refuses it naming the array, or the
    value is one the schema allows (finite, integral where integer, inside the range)."""
    state, schema = real_state(domain)
    specs = [s for s in schema if s.name in state and np.asarray(state[s.name]).size]
    spec = specs[pick % len(specs)]
    a = np.array(state[spec.name])
    edited = dict(state)
    try:
        flat = a.astype(object if isinstance(value, str) else np.result_type(a.dtype, type(value))).reshape(-1)
        flat[pick % flat.size] = value
        edited[spec.name] = np.array(flat.tolist()).reshape(a.shape)
    except (OverflowError, ValueError, TypeError):
        return
    try:
        check_arrays(edited, schema, "gen.npz")
    except CheckpointError as exc:
        assert f"'{spec.name}'" in str(exc) and "gen.npz" in str(exc)
        return
    v = np.asarray(edited[spec.name])
    assert v.dtype.kind in "biuf"
    if spec.finite and v.dtype.kind == "f":
        assert np.isfinite(v).all()
    if spec.kind == "int":
        assert (v == np.round(v)).all()


# ---- the embedded config -------------------------------------------------------------------
@pytest.mark.parametrize("text,words", [
    ("domain: ssa\nmodel: &m {<<: *m}\n", "contains it"),
    ("domain: ssa\n  : bad: [\n", "YAML syntax error"),
    ("domain: ssa\nmodel: !!python/object:os.system {}\n", "not a plain YAML value"),
    ("domain: ssa\nensemble: {realizations: -4}\n", "ensemble"),
])
def test_embedded_config_errors_name_the_checkpoint(text, words):
    from app.sims.ssa.config import load_config

    with pytest.raises(Exception) as info:
        checked_config({"config_yaml": np.array(text)}, load_config, "/runs/c.npz")
    message = str(info.value)
    assert message.startswith("checkpoint /runs/c.npz (its embedded config)") and words in message


@pytest.mark.parametrize("value", [np.array([b"x"]), np.array(3.0), np.zeros((2, 2))])
def test_embedded_config_of_the_wrong_kind(value):
    from app.sims.ssa.config import load_config

    with pytest.raises(CheckpointError, match="config_yaml"):
        checked_config({"config_yaml": value}, load_config, "c.npz")


# ---- end to end: the CLI refuses, exit 2, the run does not start ----------------------------------
@pytest.mark.parametrize("name,expr,words", [
    ("spike_neurons", lambda a: np.full_like(a, 2**31 - 1), "above its largest allowed value"),
    ("engine_V", lambda a: np.where(np.arange(a.size) == 3, np.nan, a), "nan at index (3,)"),
    ("engine_syn_pre", lambda a: a + 1000, "above its largest allowed value 99"),
    ("engine_counts", lambda a: a.astype(float) + 0.5, "fractional"),
    ("engine_V", lambda a: a[:99], "shape (99,); expected 100"),
])
def test_network_cli_resume_of_an_edited_checkpoint(tmp_path, capsys, name, expr, words):
    from app.cli import main

    state, _ = real_state("network")
    edited = dict(state)
    edited[name] = expr(np.asarray(state[name]))
    path = tmp_path / "net.npz"
    write_checkpoint(path, edited, "network")
    code = main(["run", str(PRESETS / "network" / "00-development-10x10-fast.yaml"), "--backend",
                 "cpu-reference", "--set", f"run.checkpoint={path}", "--out", str(tmp_path / "o"), "--no-png"])
    err = capsys.readouterr().err
    assert code == 2 and f"checkpoint {path}" in err and name in err and words in err, err
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())   # no results written


def test_ssa_restore_checks_before_building(tmp_path):
    from app.sims.ssa.simulation import SSASimulation

    state, _ = real_state("ssa")
    edited = dict(state, engine_x=np.full_like(state["engine_x"], -1))
    with pytest.raises(CheckpointError, match="'engine_x' holds -1, below"):
        SSASimulation.restore(edited, "cpu-reference", path="s.npz")


def test_parse_of_a_real_state_round_trips():
    state, schema = real_state("ssa")
    assert parse_yaml(str(state["config_yaml"])).data["domain"] == "ssa"
    check_arrays(state, schema, None)
