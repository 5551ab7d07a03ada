"""Voltage-clamp protocols: families of sweeps of piecewise-linear voltage.

Each sweep starts from the steady state at the holding potential and runs its segments in
order; the segment whose voltage is ``step`` takes the family's step voltage. A segment with
``to`` is a ramp from ``voltage`` to ``to``. Segments marked ``record`` are the fitted window:
the current is sampled at the end of every ``dt``.

A sweep is a sequence of :class:`Op`: ``n`` steps of ``tau`` ms, the voltage going linearly
from ``v`` to ``v_end`` over the op (constant when they are equal). Step k of a ramp is
propagated by the fourth-order Magnus exponential (:func:`magnus_points`), exact to O(tau^5)
per step; a constant op is propagated exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from app.sims.common.config import ConfigError, Document, spec


@dataclass(frozen=True)
class Segment:
    """``duration`` ms at ``voltage`` mV (a number, or 'step' for the family's step voltage)."""

    voltage: float | str
    duration: float = field(metadata=spec(range=(1e-6, 1e6)))
    record: bool = False
    to: float | str | None = None     # a ramp from ``voltage`` to ``to`` (mV or 'step')


@dataclass(frozen=True)
class StepRange:
    """Step voltages start, start + increment, ... up to and including stop (mV)."""

    start: float
    stop: float
    increment: float = field(metadata=spec(range=(1e-6, 1e4)))


@dataclass(frozen=True)
class ProtocolSpec:
    """One family of sweeps."""

    name: str
    holding: float = field(metadata=spec(range=(-300.0, 300.0)))
    segments: list[Segment]
    steps: StepRange | None = None
    step_list: list[float] | None = None
    dt: float = field(default=0.1, metadata=spec(range=(1e-5, 100.0)))


class Op(NamedTuple):
    """``n`` steps of ``tau`` ms with the voltage linear from ``v`` to ``v_end`` over the op;
    ``record``: the current at the end of every step is a data point."""

    v: float
    tau: float
    n: int
    record: bool
    v_end: float

    @property
    def ramp(self) -> bool:
        return self.v_end != self.v

    def step_voltages(self) -> np.ndarray:
        """Voltage at the end of each step (n,)."""
        return self.v + (self.v_end - self.v) * np.arange(1, self.n + 1) / self.n

    def magnus_voltages(self) -> np.ndarray:
        """(n, 2) voltages at the two Gauss points of each step (ramps)."""
        k = np.arange(self.n)[:, None] + np.array(GAUSS)[None, :]
        return self.v + (self.v_end - self.v) * k / self.n


GAUSS = (0.5 - np.sqrt(3.0) / 6.0, 0.5 + np.sqrt(3.0) / 6.0)   # Gauss-Legendre points in a step
MAGNUS_C = np.sqrt(3.0) / 12.0   # Omega = tau/2 (A1 + A2) + sqrt(3)/12 tau^2 [A2, A1]


def magnus_generator(q1: np.ndarray, q2: np.ndarray, tau: float) -> np.ndarray:
    """Fourth-order Magnus exponent for dP/dt = Q(t) P over one step from Q at the two Gauss
    points (Blanes, Casas, Oteo & Ros 2009): its columns sum to zero like a generator's."""
    comm = q2 @ q1 - q1 @ q2
    return 0.5 * tau * (q1 + q2) + MAGNUS_C * tau * tau * comm


@dataclass(frozen=True)
class Sweep:
    """One sweep: holding voltage and operations (:class:`Op`)."""

    label: str
    holding: float
    ops: tuple[Op, ...]
    family: str = ""

    @property
    def n_points(self) -> int:
        return sum(op.n for op in self.ops if op.record)

    def times(self) -> np.ndarray:
        """Sample times (ms) from the sweep start."""
        t, out = 0.0, []
        for op in self.ops:
            if op.record:
                out.append(t + op.tau * np.arange(1, op.n + 1))
            t += op.tau * op.n
        return np.concatenate(out) if out else np.zeros(0)

    def voltages(self) -> np.ndarray:
        """Command voltage at each sample."""
        parts = [op.step_voltages() for op in self.ops if op.record]
        return np.concatenate(parts) if parts else np.zeros(0)

    def duration(self) -> float:
        return float(sum(op.tau * op.n for op in self.ops))

    def command(self, t: np.ndarray) -> np.ndarray:
        """Command voltage at times ``t`` (ms from the sweep start; the holding before 0)."""
        t = np.asarray(t, float)
        out = np.full(t.shape, float(self.holding))
        start = 0.0
        for op in self.ops:
            length = op.tau * op.n
            inside = (t > start) & (t <= start + length + 1e-9 * max(length, 1.0))
            out[inside] = op.v + (op.v_end - op.v) * (t[inside] - start) / length
            start += length
        return out

    def step_times(self) -> np.ndarray:
        """Times (ms) where the command jumps (the holding -> first op included)."""
        t, last, out = 0.0, float(self.holding), []
        for op in self.ops:
            if abs(op.v - last) > 1e-9:
                out.append(t)
            t += op.tau * op.n
            last = op.v_end
        return np.array(out)


@dataclass(frozen=True)
class Protocol:
    """All sweeps of all families of a fit, in order."""

    sweeps: tuple[Sweep, ...]

    @property
    def n_points(self) -> int:
        return sum(s.n_points for s in self.sweeps)

    def offsets(self) -> np.ndarray:
        """Start of each sweep's samples in the flat data vector."""
        return np.concatenate([[0], np.cumsum([s.n_points for s in self.sweeps])]).astype(np.int64)

    def voltages(self) -> np.ndarray:
        return np.concatenate([s.voltages() for s in self.sweeps])

    def families(self) -> list[str]:
        """Family names in order of first appearance."""
        return list(dict.fromkeys(s.family for s in self.sweeps))

    def has_ramps(self) -> bool:
        return any(op.ramp for s in self.sweeps for op in s.ops)


MAX_SWEEPS = 100_000          # sweeps of all families together
MAX_POINTS = 2**31 - 1        # recorded samples of all sweeps (int32 offsets on the GPU)


def _levels(p: ProtocolSpec) -> int:
    """Number of sweeps of family ``p`` (arithmetic: nothing is expanded)."""
    if p.steps is not None:
        return int(np.floor((p.steps.stop - p.steps.start) / p.steps.increment + 1e-9)) + 1
    return len(p.step_list) if p.step_list is not None else 1


def protocol_size(specs: list[ProtocolSpec]) -> tuple[int, int]:
    """(sweeps, recorded points) of all families, computed without expanding them."""
    sweeps = points = 0
    for p in specs:
        n = max(_levels(p), 0)
        sweeps += n
        points += n * sum(int(round(s.duration / p.dt)) for s in p.segments if s.record)
    return sweeps, points


def compile_protocols(specs: list[ProtocolSpec], doc: Document | None = None,
                      path: tuple = ("protocols",)) -> Protocol:
    """Expand families into sweeps and check the recorded windows fit the sampling grid."""
    def fail(message: str, sub: tuple) -> ConfigError:
        return doc.error(message, path + sub) if doc is not None else ConfigError(message, path=path + sub)

    if not specs:
        raise fail("at least one protocol is needed", ())
    n_sweeps, n_points = 0, 0
    for k, p in enumerate(specs):
        for q, s in enumerate(p.segments):
            if isinstance(s.voltage, float) and not np.isfinite(s.voltage):
                raise fail(f"voltage must be a finite number (mV), got {s.voltage}", (k, "segments", q, "voltage"))
        levels = [p.steps.start, p.steps.stop] if p.steps is not None else list(p.step_list or [])
        if not all(np.isfinite(levels)):
            raise fail("step voltages must be finite numbers (mV)", (k, "steps" if p.steps else "step_list"))
        one_sweeps, one_points = protocol_size([p])
        n_sweeps, n_points = n_sweeps + one_sweeps, n_points + one_points
        if n_sweeps > MAX_SWEEPS:
            raise fail(f"the protocols expand to {n_sweeps:,} sweeps; at most {MAX_SWEEPS:,}",
                       (k, "steps" if p.steps is not None else "step_list"))
        if n_points > MAX_POINTS:
            raise fail(f"the protocols record {n_points:,} samples; at most {MAX_POINTS:,} "
                       "(lengthen dt or shorten the recorded segments)", (k, "dt"))
    sweeps = []
    for k, p in enumerate(specs):
        uses_step = any(s.voltage == "step" or s.to == "step" for s in p.segments)
        for q, s in enumerate(p.segments):
            for key in ("voltage", "to"):
                value = getattr(s, key)
                if isinstance(value, str) and value != "step":
                    raise fail(f"{key} is a number (mV) or 'step', got '{value}'", (k, "segments", q, key))
            if s.record and abs(s.duration / p.dt - round(s.duration / p.dt)) > 1e-6:
                raise fail(f"a recorded segment must last a whole number of dt = {p.dt:g} ms, "
                           f"got {s.duration:g} ms", (k, "segments", q, "duration"))
        if not any(s.record for s in p.segments):
            raise fail("no segment is recorded (set record: true on the fitted window)", (k, "segments"))
        if uses_step == (p.steps is None and p.step_list is None):
            raise fail("give 'steps' or 'step_list' exactly when a segment has voltage 'step'", (k,))
        if p.steps is not None and p.step_list is not None:
            raise fail("give either 'steps' or 'step_list', not both", (k,))
        if p.steps is not None:
            count = int(np.floor((p.steps.stop - p.steps.start) / p.steps.increment + 1e-9)) + 1
            if count < 1:
                raise fail("steps: stop is below start", (k, "steps"))
            levels = [p.steps.start + i * p.steps.increment for i in range(count)]
        else:
            levels = list(p.step_list) if p.step_list is not None else [None]
        for level in levels:
            ops = []
            for s in p.segments:
                v = float(level) if s.voltage == "step" else float(s.voltage)
                end = v if s.to is None else float(level) if s.to == "step" else float(s.to)
                ops.append(segment_op(v, end, float(s.duration), p.dt, s.record))
            label = p.name if level is None else f"{p.name} {level:g} mV"
            sweeps.append(Sweep(label, float(p.holding), tuple(ops), p.name))
    return Protocol(tuple(sweeps))


def segment_op(v: float, v_end: float, duration: float, dt: float, record: bool) -> Op:
    """The op of one segment: recorded and ramp segments in steps of dt (an unrecorded ramp
    in the fewest steps of at most dt), an unrecorded constant segment in one step."""
    if record:
        return Op(v, dt, int(round(duration / dt)), True, v_end)
    if v_end == v:
        return Op(v, duration, 1, False, v)
    n = max(1, int(np.ceil(duration / dt - 1e-9)))
    return Op(v, duration / n, n, False, v_end)
