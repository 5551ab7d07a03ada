"""The main window: panel list, device selector, log dock, status bar and File menu."""

from __future__ import annotations

import logging
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QCloseEvent, QKeySequence
from PySide6.QtWidgets import (QComboBox, QFileDialog, QLabel, QListWidget, QMainWindow,
                               QSplitter, QStackedWidget, QToolBar, QWidget)

from app.compute.device import list_devices, resolve_backend
from app.gui import errors
from app.gui.log_dock import LogDock
from app.gui.panels import Panel, panel_class
from app.gui.views.base import configure_pyqtgraph
from app.sims.common.simulation import DOMAINS, default_preset, load_run_config

log = logging.getLogger(__name__)

FIRST_PANEL = "ssa"        # the page the window opens on (where its default preset belongs)


class MainWindow(QMainWindow):
    """BioGPU Studio's window; File menu actions delegate to the current panel."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        configure_pyqtgraph()
        self.setWindowTitle("BioGPU Studio")
        self.resize(1400, 900)
        self.log_dock = LogDock(self)
        self.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, self.log_dock)
        self._build_device_selector()
        self._build_pages()
        self._build_status_bar()
        self._build_menu()
        self.resizeDocks([self.log_dock], [110], Qt.Orientation.Vertical)
        self.select_panel(FIRST_PANEL if FIRST_PANEL in self.pages else next(iter(self.pages)))
        self._device_changed()

    # ---- construction -------------------------------------------------------------------
    def _build_device_selector(self) -> None:
        toolbar = QToolBar("Device")
        toolbar.setObjectName("deviceToolbar")
        toolbar.setMovable(False)
        self.device_combo = QComboBox()
        self.device_combo.setMinimumContentsLength(28)
        self.device_combo.addItem("auto", ("auto", 0))
        for dev in list_devices():
            self.device_combo.addItem(dev.label, (dev.backend, dev.index))
            self.device_combo.setItemData(self.device_combo.count() - 1, dev.detail,
                                          Qt.ItemDataRole.ToolTipRole)
        self.device_combo.addItem("CPU reference (NumPy)", ("cpu-reference", 0))
        toolbar.addWidget(QLabel(" Device: "))
        toolbar.addWidget(self.device_combo)
        self.addToolBar(toolbar)
        self.device_combo.currentIndexChanged.connect(self._device_changed)

    def _build_pages(self) -> None:
        self.panel_list = QListWidget()
        self.panel_list.setObjectName("panelList")
        self.stack = QStackedWidget()
        self.pages: dict[str, QWidget] = {}
        for name, domain in DOMAINS.items():         # the registry's order
            cls = panel_class(domain)
            if cls is None:
                continue
            self.panel_list.addItem(domain.label)
            page = cls(domain, self.selected_device)
            page.status_changed.connect(self._panel_status)
            self.pages[name] = page
            self.stack.addWidget(page)
        self.panel_list.setMaximumWidth(190)
        splitter = QSplitter()
        splitter.addWidget(self.panel_list)
        splitter.addWidget(self.stack)
        splitter.setStretchFactor(1, 1)
        splitter.setSizes([170, 1230])
        self.setCentralWidget(splitter)
        self.panel_list.currentRowChanged.connect(self._page_changed)

    def _build_status_bar(self) -> None:
        self.device_label = QLabel()
        self.throughput_label = QLabel()
        self.statusBar().addWidget(self.device_label)
        self.statusBar().addPermanentWidget(self.throughput_label)

    def _build_menu(self) -> None:
        menu = self.menuBar().addMenu("&File")
        self.panel_actions: list[QAction] = []
        for text, slot, key, needs_panel in (
                ("&Open run config…", self._ask_open, QKeySequence.StandardKey.Open, False),
                ("&Save run config…", self._ask_save, QKeySequence.StandardKey.Save, True),
                ("&Export data…", self._ask_export, None, True),
                ("Save screens&hot…", self._ask_screenshot, None, True)):
            action = menu.addAction(text)
            action.triggered.connect(slot)
            if key is not None:
                action.setShortcut(key)
            if needs_panel:
                self.panel_actions.append(action)
        menu.addSeparator()
        menu.addAction("&Quit", QKeySequence.StandardKey.Quit, self.close)
        sweep = self.menuBar().addMenu("S&weep")
        action = sweep.addAction("Sweep this panel's config…")
        action.triggered.connect(self.open_sweep)
        self.panel_actions.append(action)

    def open_sweep(self):
        """The Sweep dialog for the current panel (non-modal; returns it, or None)."""
        panel = self.current_panel()
        if panel is None:
            return None
        from app.gui.sweep_dialog import SweepDialog
        try:
            dialog = SweepDialog(panel, self)
        except Exception as exc:
            errors.report_exception(self, "Cannot sweep this panel", exc)
            return None
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose, True)
        dialog.show()
        return dialog

    # ---- devices ------------------------------------------------------------------------
    def selected_device(self) -> tuple[str, int, str]:
        """(backend, device index, reason) of the toolbar choice; 'auto' is resolved here."""
        backend, index = self.device_combo.currentData()
        if backend == "auto":
            backend, reason = resolve_backend("auto")
            return backend, 0, f"auto: {reason}"
        if backend == "cuda":
            return "cuda", index, f"CUDA device {index} (chosen)"
        if backend == "cpu-reference":
            return "cpu-reference", 0, "NumPy reference engine (chosen)"
        return "cpu", 0, "compiled CPU engine (chosen)"

    def _device_changed(self) -> None:
        backend, index, reason = self.selected_device()
        name = f"CUDA {index}" if backend == "cuda" else "CPU"
        self.device_label.setText(f"{name} — {reason}")
        log.info("device: %s (%s)", name, reason)

    # ---- pages --------------------------------------------------------------------------
    def current_page(self) -> QWidget:
        return self.stack.currentWidget()

    def current_panel(self) -> Panel | None:
        page = self.current_page()
        return page if isinstance(page, Panel) else None

    def select_panel(self, name: str) -> QWidget:
        self.panel_list.setCurrentRow(list(self.pages).index(name))
        return self.pages[name]

    def _page_changed(self, row: int) -> None:
        self.stack.setCurrentIndex(row)
        for action in self.panel_actions:
            action.setEnabled(self.current_panel() is not None)
        self.throughput_label.setText("")

    def _panel_status(self, text: str) -> None:
        if self.sender() is self.current_page():
            self.throughput_label.setText(text)

    # ---- file actions (path given: used by tests and the menu alike) --------------------
    def open_config(self, path: str | Path) -> bool:
        """Open a run config in its domain's panel; errors are reported, never raised."""
        try:
            domain, _ = load_run_config(path)
            self.select_panel(domain.name).load_config(path)
        except Exception as exc:
            errors.report_exception(self, "Cannot open the run config", exc)
            return False
        self.setWindowTitle(f"BioGPU Studio — {Path(path).name}")
        return True

    def _delegate(self, title: str, method: str, path: str | Path) -> bool:
        panel = self.current_panel()
        if panel is None:
            return False
        try:
            getattr(panel, method)(path)
        except Exception as exc:
            errors.report_exception(self, title, exc)
            return False
        self.statusBar().showMessage(f"wrote {path}", 5000)
        return True

    def save_config(self, path: str | Path) -> bool:
        return self._delegate("Cannot save the run config", "save_config", path)

    def export_data(self, path: str | Path) -> bool:
        return self._delegate("Cannot export data", "export_data", path)

    def save_screenshot(self, path: str | Path) -> bool:
        return self._delegate("Cannot save the screenshot", "save_screenshot", path)

    def _ask_open(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open run config", "", "YAML (*.yaml *.yml)")
        if path:
            self.open_config(path)

    def _ask_save(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Save run config", "run.yaml", "YAML (*.yaml)")
        if path:
            self.save_config(path)

    def _ask_export(self) -> None:
        path, chosen = QFileDialog.getSaveFileName(self, "Export data", "results.npz",
                                                   "NumPy archive (*.npz);;CSV table (*.csv)")
        if path:
            if not Path(path).suffix:
                path += ".csv" if "csv" in chosen else ".npz"
            self.export_data(path)

    def _ask_screenshot(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Save screenshot", "views.png", "PNG (*.png)")
        if path:
            self.save_screenshot(path)

    # ---- closing ------------------------------------------------------------------------
    def closeEvent(self, event: QCloseEvent) -> None:
        for page in self.pages.values():
            if isinstance(page, Panel):
                page.shutdown()
        self.log_dock.detach()
        super().closeEvent(event)


def open_default(window: MainWindow, config_path: str | Path | None = None) -> bool:
    """Open ``config_path``, or the default preset of the first panel."""
    return window.open_config(config_path or default_preset(FIRST_PANEL))
