"""Where the channel config's file names point."""

from __future__ import annotations

from pathlib import Path

from app.sims.common.config import ConfigError
from app.sims.common.simulation import RESOURCES


def resolve(path: str, base_dir: str) -> Path:
    """A relative path against the config's folder, then against ``resources/``."""
    p = Path(path)
    if p.exists() and not p.is_file():
        raise ConfigError(f"{path} is not a regular file (a folder, a device or a pipe?)")
    if p.is_absolute():
        return p
    for root in (Path(base_dir or "."), RESOURCES):
        if (root / p).exists():
            return root / p
    raise ConfigError(f"file not found: {path} (looked in {base_dir or '.'} and {RESOURCES})")
