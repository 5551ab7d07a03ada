"""The decay domain's panel and main plot (the GUI half of the example domain)."""

from __future__ import annotations

from pathlib import Path

import pyqtgraph as pg
from PySide6.QtCore import Qt

from app.gui.forms import ConfigForm
from app.gui.panels.base import DeviceProvider, Panel, cpu_device
from app.sims.common.output import save_npz
from app.sims.common.registry import Domain
from app.sims.common.simulation import presets
from tests.plugins.decay import Config


class DecayView(pg.PlotWidget):
    def __init__(self):
        super().__init__(labels={"bottom": "t (s)", "left": "atoms"})
        self.plot_item = self.getPlotItem()
        self.expected = self.plot([], [], pen=pg.mkPen("#888", style=Qt.PenStyle.DashLine), name="expected")
        self.mean = self.plot([], [], pen="#1f77b4", name="mean")

    def set_frame(self, frame) -> None:
        self.mean.setData(frame.times, frame.mean)
        self.expected.setData(frame.times, frame.expected)

    def clear_data(self) -> None:
        self.mean.setData([], [])
        self.expected.setData([], [])


class DecayPanel(Panel):
    def __init__(self, domain: Domain, device: DeviceProvider = cpu_device, parent=None):
        super().__init__(domain, device, parent)
        self.cfg = Config()
        box, self.preset_combo, self.description = self.preset_picker("Preset", presets(domain.name))
        self.form = ConfigForm(Config)
        self.controls_layout.addWidget(box)
        self.controls_layout.addWidget(self.form.group("Decay", [
            "decay.atoms", "decay.rate", "decay.t_end", "decay.steps", "decay.realizations", "decay.seed"]))
        self.controls_layout.addStretch(1)
        self.view = DecayView()
        self.views.addWidget(self.view)
        self.open_default_preset()

    def apply_config(self, cfg: Config) -> None:
        self.cfg = cfg
        self.description.setText(cfg.description)
        self.form.show(cfg)

    def current_config(self) -> Config:
        return self.validate(self.form.read(self.cfg))

    def on_frame(self, frame) -> None:
        self.view.set_frame(frame)

    def clear_views(self) -> None:
        self.view.clear_data()

    def export_data(self, path: str | Path) -> Path:
        if self.last_frame is None:
            raise RuntimeError("nothing to export yet: run the simulation first")
        return save_npz(path, {"times": self.last_frame.times, "mean": self.last_frame.mean})


def main_plot(frame) -> DecayView:
    view = DecayView()
    view.set_frame(frame)
    view.resize(900, 520)
    return view
