"""The cardiac panel's model group: the cell model (a shipped CellML model or any CellML file),
its annotated parameters editable before a run, and one region of a sheet or sphere where
parameters take other values (a scar, an ACh-affected region)."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QComboBox, QFormLayout, QGroupBox, QInputDialog, QLineEdit,
                               QPushButton, QTableWidget, QTableWidgetItem, QWidget)

from app.gui.tables import fit_columns

from app.gui.labels import short_path
from app.sims.cardiac.cellml import CellMLImportError
from app.sims.cardiac.config import ModelSettings, ParameterRegion
from app.sims.cardiac.model import CellModel, load_model, shipped_models
from app.sims.common.config import ConfigError

REGION_KINDS = ("none", "rect", "circle")
QNAME = Qt.ItemDataRole.UserRole       # a name cell's and the region combo's full parameter name


def display_names(qnames: list[str]) -> list[str]:
    """Each ``component.variable`` as its variable name where that is unique in the model (CellML
    component names run to 40 characters), else in full."""
    short = [q.rpartition(".")[2] for q in qnames]
    counts = Counter(short)
    return [s if counts[s] == 1 else q for q, s in zip(qnames, short)]


def _numbers(text: str, count: int, what: str) -> list[float]:
    try:
        values = [float(x) for x in text.replace(";", ",").split(",") if x.strip()]
    except ValueError:
        values = []
    if len(values) != count:
        raise ConfigError(f"parameter region: {what} needs {count} numbers, got '{text}'")
    return values


class ModelGroup(QGroupBox):
    """Model picker, parameter table and parameter region; :meth:`settings` gives the config's
    ``model:`` block, :meth:`set_settings` shows one."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__("Cell model", parent)
        self.model: CellModel | None = None
        self.picker = QComboBox()
        for name, path in shipped_models().items():
            self.picker.addItem(name, str(path))
        self.open_button = QPushButton("CellML file…")
        self.voltage = QLineEdit()
        self.voltage.setPlaceholderText("from the oxmeta annotation")
        self.stimulus = QLineEdit()
        self.stimulus.setPlaceholderText("from the oxmeta annotation")
        self.table = QTableWidget(0, 3)
        self.table.setHorizontalHeaderLabels(["parameter", "default", "value"])
        self.table.verticalHeader().setVisible(False)
        self.table.setMinimumHeight(140)
        self.region_kind = QComboBox()
        self.region_kind.addItems(REGION_KINDS)
        self.region_shape = QLineEdit()
        self.region_shape.setPlaceholderText("rect: x0, x1, y0, y1 (mm); circle: x, y, radius (mm)")
        self.region_param = QComboBox()
        self.region_value = QLineEdit()
        self.region_value.setPlaceholderText("value inside the region")
        form = QFormLayout(self)
        for label, widget in (("Model", self.picker), ("", self.open_button), ("V variable", self.voltage),
                              ("Stimulus variable", self.stimulus), ("Parameters", self.table),
                              ("Region", self.region_kind), ("Region shape", self.region_shape),
                              ("Region parameter", self.region_param), ("Region value", self.region_value)):
            form.addRow(label, widget)
        self.picker.currentIndexChanged.connect(lambda _: self.reload())
        self.region_kind.currentTextChanged.connect(self._update_region)
        self._update_region()

    # ---- the model ----------------------------------------------------------------------
    def add_file(self, path: str) -> None:
        """Pick a CellML file (also what the 'CellML file…' button does)."""
        index = self.picker.findData(path)
        if index < 0:
            self.picker.addItem(short_path(path), path)
            index = self.picker.count() - 1
            self.picker.setItemData(index, path, Qt.ItemDataRole.ToolTipRole)
        self.picker.setCurrentIndex(index)

    def reload(self) -> CellModel | None:
        """Import the picked model and list its parameters; where the voltage cannot be found,
        ask which state it is."""
        path = self.picker.currentData()
        if not path:
            return None
        try:
            model = load_model(path, self.voltage.text().strip() or None, self.stimulus.text().strip() or None)
        except CellMLImportError as exc:
            if "membrane voltage" in str(exc) and self._ask_voltage(path):
                return self.reload()
            raise
        self.model = model
        self._fill_table(model, {})
        return model

    def _ask_voltage(self, path: str) -> bool:
        import myokit.formats.cellml as mcellml
        states = [v.qname() for v in mcellml.CellMLImporter().model(path).states()]
        name, ok = QInputDialog.getItem(self, "Membrane voltage",
                                        "The file names no membrane voltage; which state is it?", states, 0, False)
        if ok and name:
            self.voltage.setText(name)
        return bool(ok and name)

    def _fill_table(self, model: CellModel, values: dict[str, float]) -> None:
        self.table.setRowCount(len(model.parameters))
        self.region_param.clear()
        shown = display_names([p.qname for p in model.parameters])
        for row, (p, text) in enumerate(zip(model.parameters, shown)):
            name = QTableWidgetItem(text)
            name.setData(QNAME, p.qname)
            name.setToolTip(f"{p.qname}: {p.annotation or 'no annotation'} [{p.unit}]")
            default = QTableWidgetItem(repr(float(p.default)))
            for item in (name, default):
                item.setFlags(item.flags() & ~item.flags().ItemIsEditable)
            self.table.setItem(row, 0, name)
            self.table.setItem(row, 1, default)
            self.table.setItem(row, 2, QTableWidgetItem(repr(float(values.get(p.qname, p.default)))))
            self.region_param.addItem(text, p.qname)
        fit_columns(self.table, stretch=0)

    def _update_region(self, *_: object) -> None:
        on = self.region_kind.currentText() != "none"
        for w in (self.region_shape, self.region_param, self.region_value):
            w.setEnabled(on)

    # ---- config in and out --------------------------------------------------------------
    def set_settings(self, settings: ModelSettings) -> None:
        from app.sims.cardiac.model import model_path
        self.voltage.setText(settings.voltage)
        self.stimulus.setText(settings.stimulus)
        path = str(model_path(settings.file))
        self.picker.blockSignals(True)
        self.add_file(path)
        self.picker.blockSignals(False)
        keys = set(settings.parameters) | {k for r in settings.regions for k in r.parameters}
        self.model = load_model(path, settings.voltage or None, settings.stimulus or None, tuple(sorted(keys)))
        self._fill_table(self.model, settings.parameters)
        region = next((r for r in settings.regions if r.kind in REGION_KINDS and r.parameters), None)
        self.region_kind.setCurrentText(region.kind if region else "none")
        if region is not None:
            key, value = next(iter(region.parameters.items()))
            self.region_param.setCurrentIndex(max(self.region_param.findData(key), 0))
            self.region_value.setText(f"{value:g}")
            shape = (region.x0, region.x1, region.y0, region.y1) if region.kind == "rect" else \
                (*region.center[:2], region.radius_mm)
            self.region_shape.setText(", ".join(f"{v:g}" for v in shape))

    def settings(self, base: ModelSettings) -> ModelSettings:
        """The config's ``model:`` block: parameters that differ from the defaults, and the region."""
        if self.model is None:
            self.reload()
        model = self.model
        values = {}
        for row, p in enumerate(model.parameters):
            text = self.table.item(row, 2).text()
            try:
                value = float(text)
            except ValueError:
                raise ConfigError(f"parameter {p.qname}: '{text}' is not a number") from None
            if value != p.default:
                values[p.qname] = value
        regions = []
        kind = self.region_kind.currentText()
        if kind != "none":
            value = _numbers(self.region_value.text(), 1, "the value")[0]
            param = {self.region_param.currentData(): value}
            if kind == "rect":
                x0, x1, y0, y1 = _numbers(self.region_shape.text(), 4, "a rectangle")
                regions.append(ParameterRegion(kind="rect", x0=x0, x1=x1, y0=y0, y1=y1, parameters=param))
            else:
                x, y, r = _numbers(self.region_shape.text(), 3, "a circle")
                regions.append(ParameterRegion(kind="circle", center=[x, y, 0.0], radius_mm=r, parameters=param))
        path = self.picker.currentData()
        shipped = {str(v): k for k, v in shipped_models().items()}
        return replace(base, file=shipped.get(path, path), voltage=self.voltage.text().strip(),
                       stimulus=self.stimulus.text().strip(), parameters=values, regions=regions)
