"""Domain panels by domain name."""

from __future__ import annotations

from app.gui.panels.base import Panel
from app.gui.panels.cardiac import CardiacPanel
from app.gui.panels.channel import ChannelPanel
from app.gui.panels.epidermis import EpidermisPanel
from app.gui.panels.network import NetworkPanel
from app.gui.panels.ssa import SSAPanel

PANEL_CLASSES: dict[str, type[Panel]] = {"cardiac": CardiacPanel, "channel": ChannelPanel,
                                          "epidermis": EpidermisPanel, "network": NetworkPanel,
                                          "ssa": SSAPanel}

__all__ = ["PANEL_CLASSES", "CardiacPanel", "ChannelPanel", "EpidermisPanel", "NetworkPanel", "Panel",
           "SSAPanel"]
