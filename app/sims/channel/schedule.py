"""The order in which the CUDA kernel computes a protocol: each exp(Q tau) and steady state
once per individual, however many sweeps use it.

Sweeps that start from the same holding voltage and share their first unrecorded segments
share those states (a prefix tree of sweeps); the exponentials of constant-voltage segments
are grouped by (voltage, tau), so the paper's 25 sweeps (37 segments, one holding voltage)
need 17 exponentials and one steady state instead of 37 and 25. Node states live in a few
slots between their computation and their last use; a protocol that would need more slots
than the kernel has runs sweep by sweep (one slot), as written.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from app.sims.channel.protocol import Op, Protocol

STEADY, EXPM, APPLY, RAMP = 0, 1, 2, 3
NO_SLOT = 255          # an application whose end state nothing reads
SLOTS = 8              # CH_SLOTS in kernels/channel.cu


@dataclass(frozen=True)
class Instr:
    """One kernel instruction: ``kind`` with its voltage(s), tau, steps, state slots and the
    first data point it records (-1: unrecorded)."""

    kind: int
    v: float = 0.0
    v_end: float = 0.0
    tau: float = 0.0
    n: int = 0
    src: int = NO_SLOT
    dst: int = NO_SLOT
    record: int = -1


@dataclass
class _Edge:
    src: int                 # node whose state the op starts from
    op: Op
    dst: int                 # node after the op
    record: int              # first data point, or -1
    key: tuple = field(default=())


def _tree(protocol: Protocol) -> tuple[list[float], list[_Edge], list[int]]:
    """Holding voltages, edges (op applications) and the root node of each holding voltage."""
    holds: list[float] = []
    nodes: dict[tuple, int] = {}
    edges: list[_Edge] = []
    offset = 0
    for sweep in protocol.sweeps:
        key: tuple = ("hold", float(sweep.holding))
        if key not in nodes:
            nodes[key] = len(nodes)
            holds.append(float(sweep.holding))
        for op in sweep.ops:
            parent = nodes[key]
            if op.record:                 # recorded applications are never shared
                key = key + (("rec", offset),)
                record, offset = offset, offset + op.n
            else:
                key = key + ((op.v, op.v_end, op.tau, op.n),)
                record = -1
            if key not in nodes:
                nodes[key] = len(nodes)
                edges.append(_Edge(parent, op, nodes[key], record,
                                   ("ramp", len(edges)) if op.ramp else (op.v, op.tau)))
    roots = [nodes[("hold", h)] for h in holds]
    return holds, edges, roots


def schedule(protocol: Protocol, slots: int = SLOTS) -> list[Instr]:
    """Instructions computing every recorded point of ``protocol`` (see module doc)."""
    shared = _shared(protocol, slots)
    return shared if shared is not None else sequential(protocol)


def sequential(protocol: Protocol) -> list[Instr]:
    """Sweep by sweep, segment by segment, in slot 0 (every exponential recomputed)."""
    out, offset = [], 0
    for sweep in protocol.sweeps:
        out.append(Instr(STEADY, v=sweep.holding, dst=0))
        for op in sweep.ops:
            record = offset if op.record else -1
            offset += op.n if op.record else 0
            if not op.ramp:
                out.append(Instr(EXPM, v=op.v, tau=op.tau))
            out.append(Instr(RAMP if op.ramp else APPLY, v=op.v, v_end=op.v_end, tau=op.tau, n=op.n,
                             src=0, dst=0, record=record))
    return out


def _shared(protocol: Protocol, slots: int) -> list[Instr] | None:
    holds, edges, roots = _tree(protocol)
    children: dict[int, int] = {}
    for e in edges:
        children[e.src] = children.get(e.src, 0) + 1
    slot_of: dict[int, int] = {}
    free = list(range(slots - 1, -1, -1))
    out: list[Instr] = []

    def take(node: int) -> int:
        if not children.get(node):
            return NO_SLOT
        if not free:
            raise _OutOfSlots
        slot_of[node] = free.pop()
        return slot_of[node]

    def release(node: int) -> int:
        children[node] -= 1
        slot = slot_of[node]
        if children[node] == 0:
            free.append(slot)
        return slot

    try:
        for hold, root in zip(holds, roots):
            out.append(Instr(STEADY, v=hold, dst=take(root)))
        pending = list(edges)
        while pending:
            ready = [e for e in pending if e.src in slot_of]
            by_key: dict[tuple, list[_Edge]] = {}
            for e in ready:
                by_key.setdefault(e.key, []).append(e)
            # a key all of whose applications are ready first (its exponential is then
            # computed once), else the key with the most ready applications
            waiting = {e.key for e in pending if e.src not in slot_of}
            key = max(by_key, key=lambda k: (k not in waiting, len(by_key[k])))
            group = by_key[key]
            first = group[0].op
            if not first.ramp:
                out.append(Instr(EXPM, v=first.v, tau=first.tau))
            for e in group:
                src = release(e.src)
                # a finished node's slot may be reused at once: the kernel reads src before
                # it writes dst
                out.append(Instr(RAMP if e.op.ramp else APPLY, v=e.op.v, v_end=e.op.v_end,
                                 tau=e.op.tau, n=e.op.n, src=src, dst=take(e.dst), record=e.record))
                pending.remove(e)
    except _OutOfSlots:
        return None
    return out


class _OutOfSlots(Exception):
    pass
