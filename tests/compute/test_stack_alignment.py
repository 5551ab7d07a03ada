"""``align_stack()``: the frame of a compiled function is 64-byte aligned at any call depth,
in the main thread and in a worker thread alike."""

from __future__ import annotations

import threading

from llvmlite import ir
from numba import njit
from numba.core import cgutils, types
from numba.extending import intrinsic

from app.compute.stack_alignment import STACK_ALIGNMENT, align_stack


@intrinsic
def _stack_pointer(typingctx):
    """The stack pointer where it is called (llvm.stacksave)."""

    def codegen(context, builder, signature, args):
        save = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(cgutils.voidptr_t, []), "llvm.stacksave.p0")
        return builder.ptrtoint(builder.call(save, []), ir.IntType(64))
    return types.uint64(), codegen


@njit
def _aligned_frame():
    align_stack()
    return _stack_pointer()


@njit
def _plain_frame():
    return _stack_pointer()


def _nested(depth: int, func):
    """``func()`` called under ``depth`` more C frames (each shifts the stack pointer)."""
    return func() if depth == 0 else list(map(lambda _: _nested(depth - 1, func), [0]))[0]


def _offsets(func) -> set[int]:
    """The stack pointer modulo the alignment, at call depths 0-5, in this thread and in a new one."""
    seen: set[int] = set()
    for depth in range(6):
        seen.add(_nested(depth, func) % STACK_ALIGNMENT)
        box: list[int] = []
        thread = threading.Thread(target=lambda d, out: out.append(_nested(d, func) % STACK_ALIGNMENT),
                                  args=(depth, box))
        thread.start()
        thread.join()
        seen.update(box)
    return seen


def test_aligned_frame_at_every_depth_and_thread():
    assert _offsets(_aligned_frame) == {0}


def test_plain_frame_depends_on_the_caller():
    """The control: without ``align_stack`` the frame's alignment follows the caller's (so the
    test above could fail)."""
    assert len(_offsets(_plain_frame)) > 1


def test_attribute_reaches_the_compiled_function():
    llvm_ir = _aligned_frame.inspect_llvm(_aligned_frame.signatures[0])
    assert f"alignstack={STACK_ALIGNMENT}" in llvm_ir or f"alignstack({STACK_ALIGNMENT})" in llvm_ir
