"""Forms built from config specs: the control, range and tooltip of a field come from its spec,
and every shipped preset shows and reads back unchanged in its panel (no rounding, no clipping)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

pytest.importorskip("PySide6", reason="the GUI extra is not installed")
from PySide6.QtWidgets import QCheckBox, QComboBox, QDoubleSpinBox, QLineEdit, QSpinBox

from app.gui.forms import ConfigForm
from app.gui.panels import panel_class
from app.sims.common.config import ConfigError, spec
from app.sims.common.registry import DOMAINS
from app.sims.common.simulation import presets

pytestmark = pytest.mark.gui


@dataclass(frozen=True)
class Inner:
    rate: float = field(default=0.25, metadata=spec(range=(0.0, 10.0), doc="how fast", unit="1/s"))
    tiny: float = field(default=1e-3, metadata=spec(range=(0.0, 1e30)))


@dataclass(frozen=True)
class Example:
    count: int = field(default=5, metadata=spec(range=(1, 1000), doc="how many"))
    seed: int = field(default=7, metadata=spec(range=(0, 2**64 - 1)))
    kind: str = field(default="a", metadata=spec(choices=("a", "b")))
    on: bool = False
    label: str = ""
    inner: Inner = field(default_factory=Inner)


def test_controls_follow_the_specs(qtbot):
    form = ConfigForm(Example)
    box = form.group("Example", ["count", "seed", "kind", "on", "label", "inner.rate", "inner.tiny"])
    qtbot.addWidget(box)
    count, seed, rate = form["count"], form["seed"], form["inner.rate"]
    assert isinstance(count, QSpinBox) and (count.minimum(), count.maximum()) == (1, 1000)
    assert isinstance(seed, QLineEdit)                       # beyond a 32-bit spin box
    assert isinstance(form["kind"], QComboBox) and isinstance(form["on"], QCheckBox)
    assert isinstance(rate, QDoubleSpinBox) and rate.maximum() == 10.0
    assert isinstance(form["inner.tiny"], QLineEdit)         # thirty decades
    assert count.toolTip() == "How many; valid: 1 to 1000"
    assert rate.toolTip() == "How fast; unit: 1/s; valid: 0 to 10"

    cfg = Example(count=9, seed=2**64 - 1, kind="b", on=True, label="x",
                  inner=Inner(rate=0.123456789, tiny=3e-17))
    form.show(cfg)
    assert form.read(Example()) == cfg                       # exact, 64-bit seed and 9 decimals included
    seed.setText("")
    with pytest.raises(ConfigError, match="seed: enter a whole number"):
        form.read(cfg)
    seed.setText(str(2**64))
    with pytest.raises(ConfigError, match="seed: .* out of range"):
        form.read(cfg)


def test_two_fields_cannot_share_an_attribute(qtbot):
    form = ConfigForm(Example)
    form.add("count")
    form.add("inner.rate")
    form.expose(owner := type("Owner", (), {})())
    assert owner.count is form["count"] and owner.rate is form["inner.rate"]
    form.add("seed")
    with pytest.raises(ValueError, match="both be exposed"):
        form.expose(owner, {"seed": "count"})


@pytest.mark.parametrize("name", list(DOMAINS))
def test_every_preset_reads_back_unchanged(qtbot, name):
    domain = DOMAINS[name]
    panel = panel_class(domain)(domain)
    qtbot.addWidget(panel)
    for path in presets(name):
        panel.load_config(path)
        cfg = panel.base_cfg
        forms = [f for f in (getattr(panel, "form", None), getattr(panel, "ga_form", None)) if f]
        for form in forms:
            part = cfg if form.root is type(cfg) else cfg.ga
            assert form.read(part) == part, path.name
    panel.shutdown()
