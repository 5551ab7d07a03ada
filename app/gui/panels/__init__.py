"""Domain panels: each domain's manifest names its panel class (``panel="pkg.module:Class"``)."""

from __future__ import annotations

from app.gui.panels.base import Panel
from app.sims.common.registry import Domain, resolve

__all__ = ["Panel", "panel_class"]


def panel_class(domain: Domain) -> type[Panel] | None:
    """The panel class the domain's manifest names, or None for a domain without a panel."""
    if domain.panel is None:
        return None
    cls = resolve(domain.panel)
    if not (isinstance(cls, type) and issubclass(cls, Panel)):
        raise TypeError(f"{domain.name}: the manifest's panel {domain.panel} is not a Panel subclass")
    return cls
