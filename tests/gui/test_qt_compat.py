"""The GUI's garbage-collection settings: what exists at start-up is frozen, later garbage is not."""

import gc

import pytest

pytest.importorskip("PySide6", reason="the GUI extra is not installed")

from app.gui.qt_compat import freeze_startup_objects


class Node:
    def __init__(self) -> None:
        self.other: "Node | None" = None


def test_startup_objects_are_frozen_and_later_cycles_still_collected():
    tracked = len(gc.get_objects())
    try:
        freeze_startup_objects()
        assert gc.get_freeze_count() >= tracked // 2       # start-up objects: out of every collection
        assert len(gc.get_objects(generation=2)) < tracked // 2
        a, b = Node(), Node()
        a.other, b.other = b, a                             # a cycle made after the start
        del a, b
        assert gc.collect() >= 2                            # still found and freed
    finally:
        gc.unfreeze()
