"""Work around a PySide6 refcount bug that aborts the process on Python < 3.12.

PySide6-Essentials 6.12.0 (seen on this image, CPython 3.11) drops one reference to
``True`` on every Python-side ``SignalInstance.emit()`` (pyqtgraph emits several per
``setData``). After a few thousand emits CPython aborts with "Fatal Python error:
bool_dealloc: deallocating True or False". CPython 3.12+ makes ``True`` immortal, which is
exactly the cure: :func:`guard_true_refcount` probes for the bug once and, if present,
raises ``True``'s reference count by 2**40 so it can never reach zero. Nothing else
changes (``True`` is a static singleton that is never freed anyway).
"""

from __future__ import annotations

import ctypes
import logging
import sys

log = logging.getLogger(__name__)

_CUSHION = 1 << 40
_applied = False


def emit_drops_true() -> bool:
    """True when a Python-side signal emit loses a reference to ``True``."""
    from PySide6.QtCore import QObject, Signal

    class _Probe(QObject):
        ping = Signal()

    probe = _Probe()
    before = sys.getrefcount(True)
    for _ in range(8):
        probe.ping.emit()
    return sys.getrefcount(True) < before - 4


def guard_true_refcount() -> bool:
    """Apply the cushion if this PySide6 has the bug; returns whether it was applied."""
    global _applied
    if _applied or sys.version_info >= (3, 12) or sys.implementation.name != "cpython":
        return _applied
    try:
        if not emit_drops_true():
            return False
    except ImportError:
        return False
    # ob_refcnt is the first field of every object in a release build (after two list
    # pointers in a Py_TRACE_REFS debug build).
    offset = 2 * ctypes.sizeof(ctypes.c_void_p) if hasattr(sys, "getobjects") else 0
    ctypes.c_ssize_t.from_address(id(True) + offset).value += _CUSHION
    _applied = True
    import PySide6
    log.info("PySide6 %s drops a reference to True per signal emit; cushion applied",
              PySide6.__version__)
    return True
