"""CUDA graphs captured from a PyCUDA stream (the driver API through ctypes: PyCUDA has no
graph calls). A run of many small launches issued from Python holds the GIL for each one
(about 8 us); captured once and replayed, the run costs one call, and the thread waits for the
GPU with the GIL released."""

from __future__ import annotations

import ctypes
import functools
import sys
from typing import Callable

CAPTURE_MODE_RELAXED = 2      # CUstreamCaptureMode: other threads' CUDA calls stay legal


@functools.cache
def _driver() -> ctypes.CDLL:
    lib = ctypes.CDLL("nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1")
    for name, args in (("cuStreamBeginCapture_v2", [ctypes.c_void_p, ctypes.c_int]),
                       ("cuStreamEndCapture", [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]),
                       ("cuGraphInstantiateWithFlags",
                        [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_ulonglong]),
                       ("cuGraphLaunch", [ctypes.c_void_p, ctypes.c_void_p]),
                       ("cuGraphExecDestroy", [ctypes.c_void_p]), ("cuGraphDestroy", [ctypes.c_void_p]),
                       ("cuGetErrorName", [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)])):
        getattr(lib, name).argtypes = args
        getattr(lib, name).restype = ctypes.c_int
    return lib


def _check(lib: ctypes.CDLL, code: int, what: str) -> None:
    if code:
        name = ctypes.c_char_p()
        lib.cuGetErrorName(code, ctypes.byref(name))
        raise RuntimeError(f"CUDA graph {what}: {(name.value or b'error %d' % code).decode()}")


class CapturedGraph:
    """The launches ``issue()`` queues on ``stream``, captured into an executable graph.

    Kernel arguments are copied at capture: a replay repeats them exactly, so whatever must
    change between replays lives in device memory the kernels read (e.g. a step counter a
    captured kernel advances)."""

    def __init__(self, stream, issue: Callable[[], None]):
        self.stream, self._lib = stream, _driver()
        handle = ctypes.c_void_p(stream.handle)
        _check(self._lib, self._lib.cuStreamBeginCapture_v2(handle, CAPTURE_MODE_RELAXED), "capture")
        graph = ctypes.c_void_p()
        try:
            issue()
        finally:
            _check(self._lib, self._lib.cuStreamEndCapture(handle, ctypes.byref(graph)), "end of capture")
        self._graph, self._exec = graph, ctypes.c_void_p()
        _check(self._lib, self._lib.cuGraphInstantiateWithFlags(ctypes.byref(self._exec), graph, 0),
               "instantiation")

    def launch(self) -> None:
        _check(self._lib, self._lib.cuGraphLaunch(self._exec, ctypes.c_void_p(self.stream.handle)), "launch")

    def close(self) -> None:
        if self._exec:
            self._lib.cuGraphExecDestroy(self._exec)
            self._lib.cuGraphDestroy(self._graph)
            self._exec = self._graph = ctypes.c_void_p()


class RepeatedPlan:
    """A fixed sequence of launches (``PackedLaunch``) run many times over: whole runs of
    ``per_graph`` repetitions are replayed from one captured graph, the rest are launched one by
    one. The graph is kept while the sequence's launches (kernels, shapes, argument bytes) stay
    the same, and captured again when they change."""

    def __init__(self, stream, per_graph: int):
        self.stream, self.per_graph = stream, int(per_graph)
        self._graph: CapturedGraph | None = None
        self._key: tuple = ()
        self.replays = 0

    def run(self, plan: list, times: int) -> None:
        """Queue ``times`` repetitions of ``plan`` on the stream."""
        whole, rest = divmod(int(times), self.per_graph)
        if whole:
            graph = self._graph_of(plan)
            for _ in range(whole):
                graph.launch()
            self.replays += whole
        for _ in range(rest):
            for launch in plan:
                launch()

    def _graph_of(self, plan: list) -> CapturedGraph:
        key = tuple(launch.key for launch in plan)
        if self._graph is None or key != self._key:
            self.close()

            def issue() -> None:
                for _ in range(self.per_graph):
                    for launch in plan:
                        launch()
            self._graph, self._key = CapturedGraph(self.stream, issue), key
        return self._graph

    def close(self) -> None:
        if self._graph is not None:
            self._graph.close()
            self._graph, self._key = None, ()
