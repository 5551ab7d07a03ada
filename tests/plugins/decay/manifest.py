"""The decay domain's manifest: all the application needs to know to list, run and show it."""

from pathlib import Path

from app.sims.common.registry import Domain

DOMAIN = Domain(
    name="decay",
    label="Decay (example)",
    module="tests.plugins.decay",
    description="Radioactive decay chains: the smallest complete domain.",
    order=90,
    engines={"cpu-reference": "tests.plugins.decay:DecayEngine"},
    panel="tests.plugins.decay.gui:DecayPanel",
    main_plot="tests.plugins.decay.gui:main_plot",
    presets=Path(__file__).parent / "presets",
)
