"""What the workbench remembers between starts, through ``QSettings`` (INI format).

One place makes the settings object, so tests isolate it with
``QSettings.setPath(QSettings.IniFormat, QSettings.UserScope, tmp_path)`` (or
``BIOGPU_SETTINGS_DIR``) and never touch the user's file.
"""

from __future__ import annotations

import os

from PySide6.QtCore import QSettings

ORGANIZATION = "BioGPU"
APPLICATION = "BioGPU Studio"


def settings() -> QSettings:
    """The application's settings (an INI file in the user's config folder)."""
    folder = os.environ.get("BIOGPU_SETTINGS_DIR")
    if folder:
        return QSettings(os.path.join(folder, "biogpu-studio.ini"), QSettings.Format.IniFormat)
    return QSettings(QSettings.Format.IniFormat, QSettings.Scope.UserScope, ORGANIZATION, APPLICATION)


def measured_rates() -> dict[tuple[str, str], float]:
    """{(domain, 'cpu' | 'cuda'): work per wall second} of the last finished runs here."""
    store = settings()
    store.beginGroup("rates")
    rates = {}
    for key in store.childKeys():
        domain, _, engine = key.partition(".")
        try:
            rates[(domain, engine)] = float(store.value(key))
        except (TypeError, ValueError):
            continue
    store.endGroup()
    return rates


def record_rate(domain: str, engine: str, rate: float) -> None:
    """Remember a finished run's work per wall second for later estimates."""
    if rate > 0:
        settings().setValue(f"rates/{domain}.{engine}", float(rate))
