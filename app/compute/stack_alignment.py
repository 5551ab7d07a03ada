"""``align_stack()``: a compiled function's stack frame aligned to 64 bytes.

LLVM keeps loop constants it has no register for in 64-byte stack slots, but aligns the frame
only to the ABI's 16 bytes and reads those slots with unaligned loads. Where a slot straddles two
cache lines every read of it costs a split load, so the same loop ran up to 35 % slower or faster
depending on how deep in the C stack it was called: in the main thread or in a worker thread
(the GUI's), by chance of the process. Calling ``align_stack()`` at the top of a function makes
LLVM align its frame in the prologue, so the loop's speed no longer depends on the caller.
"""

from __future__ import annotations

from numba.core import types
from numba.extending import intrinsic

STACK_ALIGNMENT = 64        # bytes: a cache line, and one AVX-512 register


@intrinsic
def align_stack(typingctx):
    """Mark the calling compiled function ``alignstack(64)``; emits no code of its own."""

    def codegen(context, builder, signature, args):
        attributes = builder.function.attributes
        attributes.alignstack = STACK_ALIGNMENT
        attributes.add("nounwind")      # true of compiled code; llvmlite prints no empty set's alignstack
        return context.get_dummy_value()
    return types.none(), codegen
