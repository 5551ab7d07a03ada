"""Work around PySide6 refcount bugs that abort the process on Python < 3.12.

PySide6-Essentials 6.12.0 (seen on this image, CPython 3.11.7) drops a reference to
``True`` on every Python-side ``SignalInstance.emit()`` and one to ``None`` whenever a
wrapped C++ call returns a null object (``QObject.parent()`` of a top-level object,
``QObject.property()`` of an unset name; pyqtgraph does both all the time). After a few
thousand calls CPython aborts with "Fatal Python error: bool_dealloc" / "none_dealloc".
CPython 3.12+ makes these singletons immortal, which is exactly the cure:
:func:`guard_singleton_refcounts` probes for the bugs once and, if either shows, raises the
reference counts of ``None``, ``True`` and ``False`` by 2**40 so they never reach zero.
Nothing else changes (the singletons are static objects that are never freed anyway).
"""

from __future__ import annotations

import ctypes
import logging
import sys

log = logging.getLogger(__name__)

_CUSHION = 1 << 40
_applied = False


def pyside_drops_singletons() -> list[str]:
    """Names of the singletons this PySide6 loses references to (empty when it is sound)."""
    from PySide6.QtCore import QObject, Signal

    class _Probe(QObject):
        ping = Signal()

    probe = _Probe()
    lost = []
    before = sys.getrefcount(True)
    for _ in range(8):
        probe.ping.emit()
    if sys.getrefcount(True) < before - 4:
        lost.append("True")
    before = sys.getrefcount(None)
    for _ in range(8):
        probe.parent()
    if sys.getrefcount(None) < before - 4:
        lost.append("None")
    return lost


def guard_singleton_refcounts() -> bool:
    """Apply the cushion if this PySide6 has the bugs; returns whether it is applied."""
    global _applied
    if _applied or sys.version_info >= (3, 12) or sys.implementation.name != "cpython":
        return _applied
    try:
        lost = pyside_drops_singletons()
    except ImportError:
        return False
    if not lost:
        return False
    # ob_refcnt is the first field of every object in a release build (after two list
    # pointers in a Py_TRACE_REFS debug build).
    offset = 2 * ctypes.sizeof(ctypes.c_void_p) if hasattr(sys, "getobjects") else 0
    for singleton in (None, True, False):
        ctypes.c_ssize_t.from_address(id(singleton) + offset).value += _CUSHION
    _applied = True
    import PySide6
    log.info("PySide6 %s loses references to %s; refcount cushion applied",
             PySide6.__version__, " and ".join(lost))
    return True


def collect_garbage_in_gui_thread(interval: float = 1.0):
    """Turn automatic garbage collection off and collect on a timer in the GUI thread.

    Otherwise a collection triggered in a simulation worker can delete leftover Qt widgets
    there; Qt then takes a mutex the GUI thread holds while it waits for the GIL (a deadlock
    seen with py-spy). Keep the returned object alive as long as the application runs.
    """
    from pyqtgraph.util.garbage_collector import GarbageCollector

    return GarbageCollector(interval=interval)


def freeze_startup_objects() -> None:
    """Move the objects that exist once the window is built (modules, widgets, plot items:
    about 120,000) to the collector's permanent generation.

    A full collection then walks only what was made since: 0.1 ms instead of 55 ms on the
    2-core VM, in the GUI thread, holding the GIL a running simulation also needs. Call it
    once, after the main window is shown.
    """
    import gc

    gc.collect()
    gc.freeze()
