"""Shared loaders for the channel tests."""

from __future__ import annotations

from dataclasses import replace

from app.sims.channel.config import ChannelConfig, load_config
from app.sims.channel.model import ChannelModel, ChannelSpec, compile_model
from app.sims.common.config import build, load_yaml
from app.sims.common.simulation import PRESETS, RESOURCES

MODELS = RESOURCES / "models" / "channel"
PROTOCOLS = RESOURCES / "protocols" / "channel"


def model(name: str) -> ChannelModel:
    doc = load_yaml(MODELS / f"{name}.yaml")
    return compile_model(build(ChannelSpec, doc.data, doc), doc, ())


def preset(name: str = "00-model-b-surrogate", dt: float | None = None, **ga) -> ChannelConfig:
    cfg = load_config(load_yaml(PRESETS / "channel" / f"{name}.yaml"))
    if dt is not None:
        cfg = replace(cfg, protocols=[replace(p, dt=dt) for p in cfg.protocols])
    if ga:
        cfg = replace(cfg, ga=replace(cfg.ga, **ga))
    return cfg


def generated_recordings(folder, act_window: float = 150.0, tail_window: float = 55.72,
                         increment: float = 10.0) -> "tuple":
    """The issue's test case: a known two-state K channel (Model A's true values) on the
    Gurkiewicz & Korngreen (2007) families, activation sampled at 0.1 ms and deactivation at
    0.02 ms, integrated by scipy's Radau (a different integrator from our exponentials) and
    written as recorded: activation as a CSV with its own time column, deactivation as an ABF1
    file (int16 samples) covering the whole sweep. Returns (config text, model, folder).
    Smaller windows and coarser steps give the scaled-down CI case."""
    import numpy as np
    import pyabf.abfWriter

    from app.sims.channel.data import save_csv_traces
    from app.sims.channel.protocol import ProtocolSpec, Segment, StepRange, compile_protocols
    from app.sims.channel.reference import ivp_currents

    m = model("model-a")
    activation = ProtocolSpec("activation", -110.0, [Segment("step", act_window, True)],
                              steps=StepRange(-40.0, 60.0, increment), dt=0.1)
    full_tail = ProtocolSpec("deactivation", -110.0, [Segment(80.0, 20.0, True), Segment("step", 0.18, True),
                                                       Segment("step", tail_window, True)],
                             steps=StepRange(-120.0, -10.0, increment), dt=0.02)
    act = compile_protocols([activation])
    tail = compile_protocols([full_tail])
    save_csv_traces(folder / "activation.csv", act, ivp_currents(m, act, m.true_values, rtol=1e-10, atol=1e-12))
    currents = ivp_currents(m, tail, m.true_values, rtol=1e-10, atol=1e-12)
    sweeps = currents.reshape(len(tail.sweeps), -1)
    sweeps = np.concatenate([np.zeros((len(sweeps), 1)), sweeps], axis=1)    # the sample at t = 0
    pyabf.abfWriter.writeABF1(sweeps.astype(np.float32), str(folder / "deactivation.abf"), 50_000.0)
    text = f"""domain: channel
name: generated two-state K channel
model: {MODELS / 'model-a.yaml'}
protocols:
  - name: activation
    holding: -110
    dt: 0.1
    segments: [{{voltage: step, duration: {act_window}, record: true}}]
    steps: {{start: -40, stop: 60, increment: {increment}}}
  - name: deactivation
    holding: -110
    dt: 0.02
    segments:
      - {{voltage: 80, duration: 20}}
      - {{voltage: step, duration: 0.18}}
      - {{voltage: step, duration: {tail_window}, record: true}}
    steps: {{start: -120, stop: -10, increment: {increment}}}
data:
  source: recordings
  families:
    - {{family: activation, path: activation.csv}}
    - {{family: deactivation, path: deactivation.abf}}
ga: {{population: 64, generations: 100, seed: 3}}
fit: {{optimizer: cmaes, refine: lm}}
"""
    return text, m
