"""Voltage-clamp protocols: families of sweeps of piecewise-constant voltage.

Each sweep starts from the steady state at the holding potential and runs its segments in
order; the segment whose voltage is ``step`` takes the family's step voltage. Segments marked
``record`` are the fitted window: the current is sampled at the end of every ``dt``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from app.sims.common.config import ConfigError, Document, spec


@dataclass(frozen=True)
class Segment:
    """``duration`` ms at ``voltage`` mV (a number, or 'step' for the family's step voltage)."""

    voltage: float | str
    duration: float = field(metadata=spec(range=(1e-6, 1e6)))
    record: bool = False


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


@dataclass(frozen=True)
class Sweep:
    """One sweep: holding voltage and operations (voltage, tau, samples); samples = 0 means
    'advance by tau once', samples = n means 'n recorded steps of tau'."""

    label: str
    holding: float
    ops: tuple[tuple[float, float, int], ...]

    @property
    def n_points(self) -> int:
        return sum(op[2] for op in self.ops)

    def times(self) -> np.ndarray:
        """Sample times (ms) from the sweep start."""
        t, out = 0.0, []
        for _, tau, n in self.ops:
            if n:
                out.append(t + tau * np.arange(1, n + 1))
                t += tau * n
            else:
                t += tau
        return np.concatenate(out) if out else np.zeros(0)

    def voltages(self) -> np.ndarray:
        """Command voltage at each sample."""
        return np.concatenate([np.full(n, v) for v, _, n in self.ops if n]) if self.n_points else np.zeros(0)


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
        uses_step = any(s.voltage == "step" for s in p.segments)
        for q, s in enumerate(p.segments):
            if isinstance(s.voltage, str) and s.voltage != "step":
                raise fail(f"voltage is a number (mV) or 'step', got '{s.voltage}'", (k, "segments", q, "voltage"))
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
                n = int(round(s.duration / p.dt)) if s.record else 0
                ops.append((v, p.dt if s.record else float(s.duration), n))
            label = p.name if level is None else f"{p.name} {level:g} mV"
            sweeps.append(Sweep(label, float(p.holding), tuple(ops)))
    return Protocol(tuple(sweeps))
