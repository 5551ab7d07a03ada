"""The main window: panel list, device selector, log dock, status bar, menus (File, Run, Sweep,
Help), keyboard shortcuts, remembered settings and workbench sessions."""

from __future__ import annotations

import logging
from pathlib import Path

from PySide6.QtCore import QByteArray, QSize, Qt, QUrl
from PySide6.QtGui import QAction, QCloseEvent, QDesktopServices, QGuiApplication, QKeySequence
from PySide6.QtWidgets import (QComboBox, QFileDialog, QLabel, QListWidget, QMainWindow,
                               QMessageBox, QSplitter, QStackedWidget, QToolBar, QWidget)

from app.compute.device import list_devices, resolve_backend
from app.gui import errors
from app.gui import help as help_text
from app.gui.labels import ElidedLabel
from app.gui.log_dock import LogDock
from app.gui.panels import Panel, panel_class
from app.gui.presets import default_for_engine
from app.gui.runner import RunState
from app.gui.settings import restore_splitter, settings, splitter_text
from app.gui.views.base import configure_pyqtgraph
from app.gui.workbench import SUFFIX, PanelState, WorkbenchSession, load_session, save_session
from app.sims.common.config import dump_yaml
from app.sims.common.simulation import DOMAINS, load_run_config

log = logging.getLogger(__name__)

FIRST_PANEL = "ssa"        # the page the window opens on (where its default preset belongs)
RECENT_MAX = 10            # File › Open Recent holds this many files
# dropped or recent files by suffix: what opens them
CONFIG_SUFFIXES = (".yaml", ".yml")
SUFFIX_PANEL = {".xml": "ssa", ".sbml": "ssa", ".omex": "ssa", ".cellml": "cardiac",
                ".abf": "channel"}


def panel_order(names) -> list[str]:
    """The panel list's order: the page the window opens on first (Ctrl+1), then the registry's."""
    names = list(names)
    return ([FIRST_PANEL] if FIRST_PANEL in names else []) + [n for n in names if n != FIRST_PANEL]


class MainWindow(QMainWindow):
    """BioGPU Studio's window; File menu actions delegate to the current panel."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        configure_pyqtgraph()
        self.setWindowTitle("BioGPU Studio")
        self.setAcceptDrops(True)
        self.session_name = ""          # the session file the panels came from, if any
        self.resize(self.default_size())
        self.log_dock = LogDock(self)
        self.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, self.log_dock)
        self._build_device_selector()
        self._build_pages()
        self._build_status_bar()
        self._build_menu()
        self.resizeDocks([self.log_dock], [110], Qt.Orientation.Vertical)
        self.select_panel(FIRST_PANEL if FIRST_PANEL in self.pages else next(iter(self.pages)))
        self._device_changed()
        self.restored = self.restore_settings()

    # ---- construction -------------------------------------------------------------------
    @staticmethod
    def default_size() -> QSize:
        """1400×900, or less where the screen's available area is smaller: ``restoreGeometry``
        shrinks a window as wide or high as the screen (by 2 px, plus the title bar), which
        narrowed every panel's views on the next start."""
        size = QSize(1400, 900)
        screen = QGuiApplication.primaryScreen()
        if screen is None:
            return size
        return size.boundedTo(screen.availableSize() - QSize(16, 48))

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
        for name in panel_order(DOMAINS):
            domain = DOMAINS[name]
            cls = panel_class(domain)
            if cls is None:
                continue
            self.panel_list.addItem(domain.label)
            page = cls(domain, self.selected_device)
            page.status_changed.connect(self._panel_status)
            page.loaded_changed.connect(lambda _text, p=page: self._loaded_changed(p))
            self.pages[name] = page
            self.stack.addWidget(page)
        self.panel_list.setMaximumWidth(190)
        self.splitter = splitter = QSplitter()
        splitter.setObjectName("mainSplitter")
        splitter.addWidget(self.panel_list)
        splitter.addWidget(self.stack)
        splitter.setStretchFactor(1, 1)
        splitter.setSizes([170, 1230])
        self.setCentralWidget(splitter)
        self.panel_list.currentRowChanged.connect(self._page_changed)

    def _build_status_bar(self) -> None:
        self.device_label = ElidedLabel()           # long texts end in "…" (whole in the tooltip)
        self.throughput_label = ElidedLabel(least=240)
        self.statusBar().addWidget(self.device_label)
        self.statusBar().addPermanentWidget(self.throughput_label)

    def _build_menu(self) -> None:
        menu = self.menuBar().addMenu("&File")
        self.panel_actions: list[QAction] = []
        self.include_results = QAction("Include &results in sessions", self, checkable=True)
        self.include_results.setChecked(True)
        for text, slot, key, needs_panel in (
                ("&Open run config…", self._ask_open, QKeySequence.StandardKey.Open, False),
                ("recent", None, None, False),
                ("&Save run config…", self._ask_save, QKeySequence.StandardKey.Save, True),
                (None, None, None, False),
                ("Open sessio&n…", self._ask_open_session, "Ctrl+Shift+O", False),
                ("Save sess&ion…", self._ask_save_session, "Ctrl+Shift+S", False),
                (self.include_results, None, None, False),
                (None, None, None, False),
                ("&Export data…", self._ask_export, "Ctrl+E", True),
                ("Export &movie (MP4)…", self._ask_movie, None, True),
                ("Save screens&hot / figure (PNG, SVG, PDF)…", self._ask_screenshot, None, True)):
            if text is None:
                menu.addSeparator()
                continue
            if isinstance(text, QAction):
                menu.addAction(text)
                continue
            if text == "recent":
                self.recent_menu = menu.addMenu("Open &Recent")
                self.recent_menu.aboutToShow.connect(self._fill_recent_menu)
                self._fill_recent_menu()
                continue
            action = menu.addAction(text)
            action.triggered.connect(slot)
            if key is not None:
                action.setShortcut(key)
            if needs_panel:
                self.panel_actions.append(action)
            if slot == self._ask_movie:
                self.movie_action = action
        menu.addSeparator()
        menu.addAction("&Quit", QKeySequence.StandardKey.Quit, self.close)
        self._build_run_menu()
        sweep = self.menuBar().addMenu("S&weep")
        action = sweep.addAction("Sweep this panel's config…")
        action.triggered.connect(self.open_sweep)
        self.panel_actions.append(action)
        self._build_help_menu()

    def _build_run_menu(self) -> None:
        menu = self.menuBar().addMenu("&Run")
        self.run_actions: dict[str, QAction] = {}
        for name, text, key in (("run", "&Run", "Ctrl+R"), ("pause", "&Pause / resume", "Space"),
                                ("stop", "&Stop", "Esc"), ("reset", "Rese&t", None)):
            action = menu.addAction(text)
            action.setObjectName(f"{name}Action")
            if key:
                action.setShortcut(QKeySequence(key))
                action.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
            action.triggered.connect(lambda _=False, n=name: self.run_command(n))
            self.run_actions[name] = action
        menu.addSeparator()
        self.record_movie = menu.addAction("Record a &movie of the next runs")
        self.record_movie.setCheckable(True)
        self.record_movie.setToolTip("Cardiac, network and epidermis: the live view as MP4 "
                                     "(File › Export movie)")
        self.record_movie.setStatusTip(self.record_movie.toolTip())
        self.record_movie.toggled.connect(self.set_movie_recording)
        menu.addSeparator()
        for row, name in enumerate(self.pages):
            action = menu.addAction(f"Go to {DOMAINS[name].label}")
            action.setShortcut(QKeySequence(f"Ctrl+{row + 1}"))
            action.triggered.connect(lambda _=False, n=name: self.select_panel(n))

    def _build_help_menu(self) -> None:
        menu = self.menuBar().addMenu("&Help")
        menu.addAction("&Documentation").triggered.connect(lambda: self.open_documentation())
        method = menu.addAction("This panel's &method and reference")
        method.setShortcut(QKeySequence.StandardKey.HelpContents)
        method.triggered.connect(lambda: self.show_method())
        methods = menu.addMenu("Methods of every panel")
        for name in self.pages:
            methods.addAction(DOMAINS[name].label).triggered.connect(
                lambda _=False, n=name: self.show_method(n))
        menu.addAction("&Keyboard shortcuts").triggered.connect(self.show_shortcuts)
        menu.addSeparator()
        menu.addAction("&About BioGPU Studio").triggered.connect(self.show_about)

    # ---- run commands (menu and shortcuts) ------------------------------------------------
    def run_command(self, name: str) -> bool:
        """Run, pause/resume, stop or reset the current panel; False when it does not apply."""
        panel = self.current_panel()
        if panel is None:
            return False
        state = panel.run_controls.state
        if name == "run" and not panel.running:
            return panel.start_run()
        if name == "pause" and panel.running:
            if state is RunState.PAUSED:
                panel.resume_run()
            else:
                panel.pause_run()
            return True
        if name == "stop" and panel.running:
            panel.stop_run()
            return True
        if name == "reset" and not panel.running:
            panel.reset()
            return True
        return False

    def set_movie_recording(self, on: bool) -> None:
        """Record the live view of the next runs in every panel that has a moving picture."""
        for page in self.pages.values():
            if isinstance(page, Panel) and page.supports_movie():
                page.set_movie_recording(on)

    def save_movie(self, path: str | Path) -> bool:
        return self._delegate("Cannot export the movie", "save_movie", path)

    def _ask_movie(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Export movie", "run.mp4", "MP4 (*.mp4)")
        if path:
            self.save_movie(path if Path(path).suffix else path + ".mp4")

    # ---- help ---------------------------------------------------------------------------
    def _message(self, title: str, html: str) -> QMessageBox:
        box = QMessageBox(QMessageBox.Icon.NoIcon, title, html, QMessageBox.StandardButton.Close, self)
        box.setTextFormat(Qt.TextFormat.RichText)
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose, True)
        box.show()
        return box

    def show_about(self) -> QMessageBox:
        from app.compute.device import driver_version

        return self._message("About BioGPU Studio",
                             help_text.about_html(self.device_label.text(), driver_version()))

    def show_shortcuts(self) -> QMessageBox:
        return self._message("Keyboard shortcuts", help_text.shortcuts_html())

    def open_documentation(self) -> QMessageBox | None:
        """Open the built HTML documentation in the web browser (offline, local files); where it
        is not built, a message saying how to build it (returned)."""
        index = help_text.docs_index()
        if index is not None and QDesktopServices.openUrl(QUrl.fromLocalFile(str(index))):
            return None
        if index is not None:
            return self._message("Documentation", f"<p>No web browser opened "
                                 f"<code>{index}</code>; open it by hand.</p>")
        return self._message("Documentation", help_text.docs_missing_html())

    def show_method(self, name: str | None = None) -> QMessageBox:
        name = name or self.current_panel_name()
        page = self.pages.get(name)
        loaded = page.method_note() if isinstance(page, Panel) else ""
        return self._message(f"Method: {DOMAINS[name].label}",
                             help_text.method_html(name, DOMAINS[name].label, loaded))

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
    def selected_device(self, prefer_cpu: str | None = None) -> tuple[str, int, str]:
        """(backend, device index, reason) of the toolbar choice; 'auto' is resolved here
        (``prefer_cpu``: why the run is faster on the CPU, see :func:`resolve_backend`)."""
        backend, index = self.device_combo.currentData()
        if backend == "auto":
            backend, reason = resolve_backend("auto", prefer_cpu)
            return backend, 0, f"auto: {reason}"
        if backend == "cuda":
            return "cuda", index, f"CUDA device {index} (chosen)"
        if backend == "cpu-reference":
            return "cpu-reference", 0, "NumPy reference engine (chosen)"
        return "cpu", 0, "compiled CPU engine (chosen)"

    def _device_changed(self) -> None:
        backend, index, reason = self.selected_device()
        name = f"CUDA {index}" if backend == "cuda" else "CPU"
        if self.device_combo.currentData()[0] == "auto" and backend != "cuda":
            # no usable NVIDIA GPU: a fact about this machine, not a task for the user
            self.device_label.setText(f"{name} — compiled CPU engines (no usable NVIDIA GPU)")
            if not getattr(self, "_told_cpu", False):
                self._told_cpu = True
                log.info("No usable NVIDIA GPU here (%s): every panel runs on the CPU engines; "
                         "Help › About says more.", reason.removeprefix("auto: "))
        else:
            self.device_label.setText(f"{name} — {reason}")
            log.info("device: %s (%s)", name, reason)
        for page in getattr(self, "pages", {}).values():
            if isinstance(page, Panel):
                page.refresh_estimates()

    # ---- pages --------------------------------------------------------------------------
    def current_page(self) -> QWidget:
        return self.stack.currentWidget()

    def current_panel(self) -> Panel | None:
        page = self.current_page()
        return page if isinstance(page, Panel) else None

    def select_panel(self, name: str) -> QWidget:
        self.panel_list.setCurrentRow(list(self.pages).index(name))
        return self.pages[name]

    def current_panel_name(self) -> str:
        """The name of the domain whose panel is shown."""
        return list(self.pages)[max(self.panel_list.currentRow(), 0)]

    def _page_changed(self, row: int) -> None:
        self.stack.setCurrentIndex(row)
        panel = self.current_panel()
        for action in self.panel_actions:
            action.setEnabled(panel is not None)
        if hasattr(self, "movie_action"):         # only panels with a moving picture record one
            self.movie_action.setEnabled(panel is not None and panel.supports_movie())
        self.throughput_label.setText("")
        self.update_title()

    def update_title(self) -> None:
        """"BioGPU Studio — <panel> — <what it holds>" for the panel shown."""
        page = self.current_page()
        if page is None:
            return
        parts = ["BioGPU Studio", DOMAINS[self.current_panel_name()].label]
        loaded = getattr(page, "loaded", "")
        if loaded:
            parts.append(loaded)
        self.setWindowTitle(" — ".join(parts))

    def _loaded_changed(self, page) -> None:
        if page is self.current_page():
            self.update_title()

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
        self.add_recent(path)
        self.update_title()
        return True

    # ---- recent files and dropped files ----------------------------------------------------
    def recent_files(self) -> list[str]:
        """Files opened lately, newest first (remembered across starts in QSettings)."""
        value = settings().value("recent/files") or []
        files = [value] if isinstance(value, str) else list(value)
        return [str(f) for f in files if f][:RECENT_MAX]

    def add_recent(self, path: str | Path) -> None:
        text = str(Path(path).expanduser().resolve()) if Path(path).exists() else str(path)
        files = [text] + [f for f in self.recent_files() if f != text]
        store = settings()
        store.setValue("recent/files", files[:RECENT_MAX])
        store.sync()

    def _fill_recent_menu(self) -> None:
        self.recent_menu.clear()
        files = self.recent_files()
        for k, path in enumerate(files):
            action = self.recent_menu.addAction(f"&{k + 1 if k < 9 else 0} {Path(path).name}")
            action.setToolTip(path)
            action.setStatusTip(path)
            action.triggered.connect(lambda _=False, p=path: self.open_file(p))
        if not files:
            self.recent_menu.addAction("(no recent files)").setEnabled(False)
            return
        self.recent_menu.addSeparator()
        self.recent_menu.addAction("Clear the list").triggered.connect(self._clear_recent)

    def _clear_recent(self) -> None:
        settings().setValue("recent/files", [])

    def open_file(self, path: str | Path) -> bool:
        """Open any file the app knows by its suffix: a run config or session, or a model or
        data file in its panel (SBML and OMEX: SSA, CellML: cardiac, ABF: channel)."""
        suffix = Path(path).suffix.lower()
        if suffix == SUFFIX:
            return self.open_session(path)
        if suffix in CONFIG_SUFFIXES or suffix in (".xml", ".sbml"):
            return self.open_config(path)
        name = SUFFIX_PANEL.get(suffix, "")
        opener = {"cardiac": "open_cellml", "channel": "open_recording", "ssa": "load_config"}.get(name, "")
        page = self.pages.get(name)
        supported = page is not None and hasattr(page, opener) and (
            suffix != ".omex" or "omex" in getattr(page, "open_filter", ""))
        if not supported:
            known = [*CONFIG_SUFFIXES, SUFFIX] + [s for s in SUFFIX_PANEL if s != ".omex"]
            why = ("this version's SSA panel does not open COMBINE archives: unzip it and open "
                   "its SBML model" if suffix == ".omex" else f"the files opened here are {', '.join(known)}")
            errors.report_error(self, "Cannot open the file", f"{Path(path).name}: {why}")
            return False
        self.select_panel(name)
        try:
            getattr(page, opener)(str(path))
        except Exception as exc:
            errors.report_exception(self, "Cannot open the file", exc)
            return False
        self.add_recent(path)
        self.update_title()
        return True

    def dragEnterEvent(self, event) -> None:
        urls = event.mimeData().urls() if event.mimeData().hasUrls() else []
        if urls and all(u.isLocalFile() for u in urls):
            event.acceptProposedAction()
        else:
            event.ignore()

    def dropEvent(self, event) -> None:
        for url in event.mimeData().urls():
            if url.isLocalFile():
                self.open_file(url.toLocalFile())
        event.acceptProposedAction()

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
        path, _ = QFileDialog.getOpenFileName(
            self, "Open run config", "",
            "Run configs and models (*.yaml *.yml *.xml *.sbml *.cellml *.abf *.omex);;YAML (*.yaml *.yml)")
        if path:
            self.open_file(path)

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
        path, chosen = QFileDialog.getSaveFileName(
            self, "Save screenshot or figure", "views.png",
            "PNG picture (*.png);;SVG figure (*.svg);;PDF figure (*.pdf)")
        if path:
            if not Path(path).suffix:
                path += "." + chosen.split("*.")[1].rstrip(")") if "*." in chosen else ".png"
            self.save_screenshot(path)

    # ---- workbench sessions -------------------------------------------------------------
    def session(self, include_results: bool | None = None) -> WorkbenchSession:
        """Every panel's config (and, if asked, its latest frame) as a session."""
        if include_results is None:
            include_results = self.include_results.isChecked()
        out = WorkbenchSession(current=self.current_panel_name())
        for name, page in self.pages.items():
            if not isinstance(page, Panel):
                continue
            try:
                text = dump_yaml(page.current_config())
            except Exception as exc:       # a panel with an invalid form keeps its last file
                log.warning("session: %s panel config not saved: %s", name, exc)
                continue
            out.panels[name] = PanelState(text, page.last_frame if include_results else None)
        return out

    def save_session(self, path: str | Path, include_results: bool | None = None) -> bool:
        try:
            try:
                written = save_session(path, self.session(include_results))
            except TypeError as exc:       # a frame that cannot be saved: configs only
                log.warning("session: results not saved (%s)", exc)
                written = save_session(path, self.session(False))
        except Exception as exc:
            errors.report_exception(self, "Cannot save the session", exc)
            return False
        self.statusBar().showMessage(f"wrote {written}", 5000)
        return True

    def open_session(self, path: str | Path) -> bool:
        """Restore every panel's config and latest results from a session file."""
        try:
            loaded = load_session(path)
            configs = {name: load_run_config(state.config_yaml, text=True,
                                             source=f"session {path} (panel {name})")
                       for name, state in loaded.panels.items()}
        except Exception as exc:
            errors.report_exception(self, "Cannot open the session", exc)
            return False
        for name, (domain, cfg) in configs.items():
            page = self.pages.get(domain.name)
            if not isinstance(page, Panel) or page.running:
                continue
            try:
                page.apply_config(cfg)
                page.config_path = None
                page.reset()
                page.mark_loaded(f"{getattr(cfg, 'name', '') or name} (session {Path(path).name})",
                                 f"session: {getattr(cfg, 'name', '') or name}")
                frame = loaded.panels[name].frame
                if frame is not None:
                    page.show_frame(frame)
            except Exception as exc:
                errors.report_exception(self, f"Cannot restore the {domain.label} panel from "
                                              f"the session {path}", exc)
        if loaded.current in self.pages:
            self.select_panel(loaded.current)
        self.add_recent(path)
        self.update_title()
        return True

    def _ask_open_session(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open session", "",
                                              f"BioGPU session (*{SUFFIX})")
        if path:
            self.open_session(path)

    def _ask_save_session(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Save session", f"workbench{SUFFIX}",
                                              f"BioGPU session (*{SUFFIX})")
        if path:
            if not Path(path).suffix:
                path += SUFFIX
            self.save_session(path)

    # ---- remembered settings --------------------------------------------------------------
    def save_settings(self) -> None:
        """Geometry, splitter sizes, the current panel and every panel's config."""
        store = settings()
        store.setValue("window/geometry", self.saveGeometry())
        store.setValue("window/state", self.saveState())
        store.setValue("window/splitter", splitter_text(self.splitter))
        store.setValue("window/panel", self.current_panel_name())
        for name, page in self.pages.items():
            if isinstance(page, Panel):
                if getattr(page, "_fitted", False):     # shown or restored: real sizes
                    store.setValue(f"panels/{name}/splitter", splitter_text(page.splitter))
                    store.setValue(f"panels/{name}/views", splitter_text(page.views))
                try:
                    store.setValue(f"panels/{name}/config", dump_yaml(page.current_config()))
                except Exception as exc:
                    log.debug("%s config not remembered: %s", name, exc)
        store.sync()

    def restore_settings(self) -> bool:
        """Restore what :meth:`save_settings` kept; True if a previous session was found."""
        store = settings()
        if store.value("window/panel") is None:
            return False
        for key, restore in (("window/geometry", self.restoreGeometry),
                             ("window/state", self.restoreState)):
            value = store.value(key)
            if isinstance(value, QByteArray):
                restore(value)
        restore_splitter(self.splitter, store.value("window/splitter"))
        for name, page in self.pages.items():
            if not isinstance(page, Panel):
                continue
            text = store.value(f"panels/{name}/config")
            if text:
                try:
                    _, cfg = load_run_config(str(text), text=True)
                    page.apply_config(cfg)
                    page.config_path = None
                    page.mark_loaded(f"{getattr(cfg, 'name', '') or name} (last session)",
                                     f"last session: {getattr(cfg, 'name', '') or name}")
                    page.refresh_estimates()
                except Exception as exc:   # a config of an older version: the preset stays
                    log.warning("%s panel: remembered config not restored: %s", name, exc)
            # after the config: its texts decide the controls' minimum width
            for key, widget in (("splitter", page.splitter), ("views", page.views)):
                if restore_splitter(widget, store.value(f"panels/{name}/{key}")):
                    page._fitted = True
        panel = store.value("window/panel")
        if panel in self.pages:
            self.select_panel(str(panel))
        return True

    # ---- closing ------------------------------------------------------------------------
    def closeEvent(self, event: QCloseEvent) -> None:
        try:
            self.save_settings()
        except Exception as exc:             # never keep the window from closing
            log.warning("settings not saved: %s", exc)
        for page in self.pages.values():
            if isinstance(page, Panel):
                page.shutdown()
        self.log_dock.detach()
        super().closeEvent(event)


def open_default(window: MainWindow, config_path: str | Path | None = None) -> bool:
    """Open ``config_path``; else keep what the last session left (remembered settings), or
    open the first panel's preset sized for the selected engine."""
    if config_path is not None:
        return window.open_config(config_path)
    if window.restored:
        return True
    backend = window.selected_device()[0]
    return window.open_config(default_for_engine(FIRST_PANEL, backend))
