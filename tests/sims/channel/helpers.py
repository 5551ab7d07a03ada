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
                         increment: float = 10.0) -> tuple:
    """The issue's generated-traces case written to ``folder`` (see
    :func:`app.sims.channel.reference.write_generated_case`): (config text, model)."""
    from app.sims.channel.reference import write_generated_case
    return write_generated_case(folder, act_window, tail_window, increment)
