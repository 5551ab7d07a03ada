"""Figures for the README drawn from benchmark JSON files (pyqtgraph, offscreen).

    python -m app.gui.figures channel-fig7 bench-results/channel.json resources/figures/channel-fig7.png
    xvfb-run -a python -m app.gui.figures epidermis-tissue OUT/results.npz resources/figures/epidermis.png
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from app.gui.export import ensure_application, save_png, save_rgba_png

COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd"]


def channel_fig7(bench_json: str | Path, png: str | Path) -> Path:
    """Best chi^2 against generation and against wall time for each population (paper Fig. 7)."""
    ensure_application()
    import pyqtgraph as pg
    from PySide6.QtWidgets import QHBoxLayout, QWidget

    doc = json.loads(Path(bench_json).read_text())
    rows = doc.get("results", doc)["fig7"]        # a bench record, or an older bare result
    widget = QWidget()
    layout = QHBoxLayout(widget)
    plots = []
    for x_key, label in (("generation", "generation"), ("wall", "wall time (s)")):
        plot = pg.PlotWidget(background="w")
        plot.setLogMode(x=x_key == "wall", y=True)
        plot.setLabel("bottom", label)
        plot.setLabel("left", "best chi² (pA²)")
        plot.addLegend(offset=(-10, 10))
        plot.addLine(y=np.log10(0.6), pen=pg.mkPen("k", style=pg.QtCore.Qt.PenStyle.DashLine))
        for colour, row in zip(COLOURS, rows):
            chi = np.asarray(row["best_chi2"])
            x = np.arange(len(chi)) if x_key == "generation" else np.maximum(np.asarray(row["wall"]), 1e-4)
            plot.plot(x, chi, pen=pg.mkPen(colour, width=2), name=f"{row['population']:,}")
        layout.addWidget(plot)
        plots.append(plot)
    plots[0].setXRange(0, 400)
    widget.resize(1200, 450)
    return save_png(widget.grab(), png)


def epidermis_tissue(results_npz: str | Path, png: str | Path, size: tuple[int, int] = (1000, 700)) -> Path:
    """The tissue of an epidermis run's results.npz in 3D, as the panel draws it (a vispy
    canvas: needs a display, e.g. xvfb-run). The periodic box comes from the config.yaml
    beside the NPZ, if there is one."""
    import os
    from types import SimpleNamespace

    if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        raise RuntimeError("the 3D figure needs a display: run it under xvfb-run -a")
    app = ensure_application()
    from app.gui.views.epidermis_tissue import TissueView3D
    from app.sims.epidermis.frame import element_colours

    box = 0.0
    config = Path(results_npz).with_name("config.yaml")
    if config.exists():
        from app.sims.common.simulation import load_run_config
        _, cfg = load_run_config(config)
        box = cfg.box if cfg.tissue.boundary == "periodic" else 0.0
    with np.load(results_npz) as data:      # a run's results.npz or the bench's final tissue
        cell, etype = data["element_cell"], data["element_type"]
        if "element_colour" in data:
            colour = data["element_colour"]
        else:
            colour = element_colours(etype, cell, data["cell_suprabasal"])
        box = float(data["box"]) if "box" in data else box
        frame = SimpleNamespace(positions=data["positions"], element_cell=cell, element_colour=colour, box=box)
    view = TissueView3D()
    view.resize(*size)
    view.show()
    app.processEvents()
    view.set_frame(frame)
    image = view.render()
    view.close_canvas()
    view.close()
    view.deleteLater()      # tear the GL widgets down now, not during interpreter exit
    app.processEvents()
    return save_rgba_png(image, png)


def main(argv: list[str]) -> int:
    figures = {"channel-fig7": channel_fig7, "epidermis-tissue": epidermis_tissue}
    if len(argv) != 3 or argv[0] not in figures:
        print(__doc__)
        return 2
    print(figures[argv[0]](argv[1], argv[2]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
