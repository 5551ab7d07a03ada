"""Recorded data per family: own sampling, sweep maps, ABF command waveforms as protocols
(steps and ramps), leak subtraction, capacitive masks and weights."""

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from app.sims.channel import cpu, recordings
from app.sims.channel.config import load_config
from app.sims.channel.data import save_csv_traces
from app.sims.channel.protocol import ProtocolSpec, Segment, StepRange, compile_protocols
from app.sims.channel.recordings import FamilyData, LeakSpec, Recording, ops_from_command
from app.sims.common.config import ConfigError, parse_yaml

from .helpers import MODELS, model

ACT = ProtocolSpec("act", -100.0, [Segment("step", 20.0, True)], steps=StepRange(-60.0, 40.0, 20.0), dt=0.1)
TAIL = ProtocolSpec("tail", -100.0, [Segment(40.0, 10.0), Segment("step", 10.0, True)],
                    steps=StepRange(-120.0, -20.0, 25.0), dt=0.02)


def config_text(families: str, protocols: str = "") -> str:
    return f"""domain: channel
model: {MODELS / 'model-a.yaml'}
{protocols or '''protocols:
  - {name: act, holding: -100, dt: 0.1, segments: [{voltage: step, duration: 20, record: true}],
     steps: {start: -60, stop: 40, increment: 20}}
  - {name: tail, holding: -100, dt: 0.02,
     segments: [{voltage: 40, duration: 10}, {voltage: step, duration: 10, record: true}],
     steps: {start: -120, stop: -20, increment: 25}}'''}
data:
  source: recordings
  families:
{families}
"""


def load(text: str, folder: Path):
    return load_config(parse_yaml(text, str(folder / "fit.yaml")))


def test_families_with_their_own_sampling_and_a_sweep_map(tmp_path):
    m = model("model-a")
    act = compile_protocols([ACT])
    save_csv_traces(tmp_path / "act.csv", act, cpu.simulate(m, act, m.true_values[None])[0])
    # the tail file holds two extra sweeps (a junk sweep first and one at the end): a sweep map picks
    full = compile_protocols([replace(TAIL, segments=[Segment(40.0, 10.0, True), Segment("step", 10.0, True)])])
    currents = cpu.simulate(m, full, m.true_values[None])[0].reshape(len(full.sweeps), -1)
    table = np.column_stack([full.sweeps[0].times(), np.full(len(currents[0]), 7.0), *currents,
                             np.zeros(len(currents[0]))])
    np.savetxt(tmp_path / "tail.csv", table, delimiter=",", header="t,junk," + ",".join("s" * 6), comments="")
    cfg = load(config_text("    - {family: act, path: act.csv}\n"
                           "    - {family: tail, path: tail.csv, sweeps: [1, 2, 3, 4, 5]}"), tmp_path)
    fit = cfg.fit_data(m)
    assert fit.protocol.families() == ["act", "tail"]
    assert fit.protocol.n_points == 6 * 200 + 5 * 500
    expected = cpu.simulate(m, fit.protocol, m.true_values[None])[0]
    assert np.abs(fit.target - expected).max() < 1e-7 * np.abs(expected).max()     # CSV: 8 digits
    assert (fit.weights == 1.0).all()
    bad = load(config_text("    - {family: act, path: act.csv}\n    - {family: tail, path: tail.csv}"), tmp_path)
    with pytest.raises(ConfigError, match="has 7 sweeps; family 'tail' has 5"):
        bad.fit_data(m)
    missing = load(config_text("    - {family: act, path: act.csv}"), tmp_path)
    with pytest.raises(ConfigError, match="protocol family 'tail' has no recording"):
        missing.fit_data(m)


def test_command_waveform_becomes_steps_and_ramps():
    dt = 0.05
    command = np.concatenate([np.full(40, -100.0), np.full(100, 20.0), np.linspace(20.0, -80.0, 201)[1:],
                              np.full(60, -80.0)])
    ops = ops_from_command(command, dt, first=40, last=len(command) - 1)
    # holding (unrecorded, one exact step), the step at sample 40, the ramp, the last level
    assert [(op.v, op.n, op.record, op.ramp) for op in ops] == [
        (-100.0, 1, False, False), (20.0, 99, True, False), (20.0, 200, True, True), (-80.0, 60, True, False)]
    assert ops[0].tau == pytest.approx(40 * dt) and ops[2].v_end == pytest.approx(-80.0)
    # the ops reproduce the command at every recorded sample
    from app.sims.channel.protocol import Sweep
    sweep = Sweep("s", -100.0, ops)
    t = np.arange(len(command)) * dt
    assert np.allclose(sweep.command(t[41:]), command[41:], atol=1e-9)
    assert sweep.n_points == len(command) - 1 - 40


class FakeABF:
    """pyabf's reading interface over arrays (pyabf writes ABF1 without a command waveform)."""

    def __init__(self, currents, command, rate_hz):
        self.currents, self.command = currents, command
        self.sweepList, self.channelCount, self.sweepUnitsY = list(range(len(currents))), 1, "nA"
        self.sweepX = np.arange(currents.shape[1]) / rate_hz

    def setSweep(self, k, channel=0):
        self.sweepY, self.sweepC = self.currents[k] / 1000.0, self.command[k]


def test_abf_protocol_from_the_command_with_leak_and_masks(tmp_path, monkeypatch):
    pyabf = pytest.importorskip("pyabf")
    m = model("model-a")
    rate, n = 20_000.0, 1200
    levels = [-40.0, 0.0, 40.0]
    command = np.full((3, n), -100.0)
    for k, level in enumerate(levels):
        command[k, 100:700] = level                                      # a step at 5 ms
        command[k, 700:1100] = np.linspace(level, -120.0, 401)[1:]        # a ramp to -120 mV
        command[k, 1100:] = -120.0
    spec = FamilyData("steps", "x.abf", protocol="file", window=[4.0, 59.0], mask=0.2,
                      leak=LeakSpec("linear", windows=[[0.0, 4.9], [56.0, 60.0]]))
    rec0 = Recording("x.abf", np.arange(n) * 1000 / rate, np.zeros((3, n)), command)
    sweeps = recordings.sweeps_from_command(rec0, spec)
    from app.sims.channel.protocol import Protocol
    truth = cpu.simulate(m, Protocol(sweeps), m.true_values[None])[0]
    # the "recording": the channel (a full trace of each sweep) plus a linear leak
    full = Protocol(tuple(recordings.Sweep(s.label, s.holding, recordings.ops_from_command(c, 1000 / rate, 0, n - 1))
                          for s, c in zip(sweeps, command)))
    channel = cpu.simulate(m, full, m.true_values[None])[0].reshape(3, n - 1)
    leak_g, leak_e = 0.3, -70.0
    currents = np.concatenate([np.zeros((3, 1)), channel], axis=1) + leak_g * (command - leak_e)
    monkeypatch.setattr(pyabf, "ABF", lambda path: FakeABF(currents, command, rate))
    (tmp_path / "x.abf").write_bytes(b"")
    fit = recordings.prepare_family(spec, (), str(tmp_path))
    # the channel is not quite closed at -120 mV (open probability ~6e-6): a small leak bias
    assert fit.leak == pytest.approx((leak_g, leak_e), rel=1e-3)
    assert np.abs(fit.target - truth)[fit.weights > 0].max() < 1e-5 * np.abs(truth).max()
    times = np.concatenate([s.times() for s in fit.sweeps])
    masked = fit.weights == 0
    # masked: from the step at 5 ms to 5.2 ms (the step sample included); the ramp start is no step
    assert set(np.round(times[masked], 6)) == set(np.round(np.arange(5.0, 5.2 + 1e-9, 0.05), 6))
    assert any(op.ramp for op in fit.sweeps[0].ops)


def test_pn_leak_weights_and_errors(tmp_path):
    m = model("model-a")
    act = compile_protocols([ACT])
    data = cpu.simulate(m, act, m.true_values[None])[0]
    leak = np.linspace(1.0, 2.0, len(data))
    save_csv_traces(tmp_path / "act.csv", act, data + 4.0 * leak)
    save_csv_traces(tmp_path / "pn.csv", act, leak)
    spec = FamilyData("act", "act.csv", leak=LeakSpec("pn", path="pn.csv", scale=4.0), weight=2.0,
                      sweep_weights=[1, 1, 0, 1, 1, 1])
    fit = recordings.prepare_family(spec, act.sweeps, str(tmp_path))
    assert np.abs(fit.target - data).max() < 1e-5
    assert set(fit.weights) == {0.0, 2.0} and (fit.weights == 0).sum() == 200
    with pytest.raises(ConfigError, match="only -60 mV"):
        recordings.prepare_family(replace(spec, leak=LeakSpec("linear", windows=[[0, 0.35]])),
                                  tuple(replace(s, holding=-100.0) for s in act.sweeps[:1]) * 6, str(tmp_path))
    with pytest.raises(ConfigError, match="sweep weights must be >= 0"):
        recordings.prepare_family(replace(spec, sweep_weights=[1, 1, -1, 1, 1, 1]), act.sweeps, str(tmp_path))
    with pytest.raises(ConfigError, match="3 sweep weights for 6 sweeps"):
        recordings.prepare_family(replace(spec, sweep_weights=[1, 1, 1]), act.sweeps, str(tmp_path))
    with pytest.raises(ConfigError, match="file not found: nope.csv"):
        recordings.prepare_family(replace(spec, path="nope.csv"), act.sweeps, str(tmp_path))
    with pytest.raises(ConfigError, match="no command waveform"):
        recordings.prepare_family(replace(spec, protocol="file"), act.sweeps, str(tmp_path))


def test_weighted_fit_ignores_masked_garbage(tmp_path):
    """A huge artefact under the mask changes nothing: chi^2 of the truth stays ~0."""
    m = model("model-a")
    act, tail = compile_protocols([ACT]), compile_protocols([TAIL])
    a = cpu.simulate(m, act, m.true_values[None])[0]
    a[::200] = 1e4        # the first sample after every step: a capacitive spike
    save_csv_traces(tmp_path / "act.csv", act, a)
    save_csv_traces(tmp_path / "tail.csv", tail, cpu.simulate(m, tail, m.true_values[None])[0])
    cfg = load(config_text("    - {family: act, path: act.csv, mask: 0.1}\n"
                           "    - {family: tail, path: tail.csv}"), tmp_path)
    fit = cfg.fit_data(m)
    assert fit.weights.sum() == fit.protocol.n_points - 6
    score = cpu.evaluate(m, fit.protocol, m.true_values[None], fit.target, weights=fit.weights)[0]
    assert score < 1e-10
