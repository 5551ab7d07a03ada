"""Recorded data as it comes: one file per protocol family with its own sampling.

Each family (``data.families`` in the run config) names a CSV (first column time in ms from the
sweep start, one column per sweep, pA), an Axon ABF file (pyabf) or an NWB file (pynwb, where
installed), optionally which of its sweeps belong to the family (the sweep-to-family map), and:

- ``protocol: file`` builds the family's sweeps from the ABF command waveform (``sweepC``):
  steps and ramps become ops of a piecewise-linear voltage (:func:`ops_from_command`), fitted
  over ``window``; ``protocol: config`` uses the config's family of that name;
- ``leak``: a linear leak ``I = g (V - E)`` fitted by least squares on the samples inside
  ``leak.windows`` of every sweep of the family (where the channel is closed), or P/N traces
  from ``leak.path`` times ``leak.scale``, subtracted before the fit;
- ``mask``: samples from each voltage step to ``mask`` ms after it get weight 0 (capacitive
  transients; the sample at the step instant itself always, since the command changes within it);
- ``weight`` and ``sweep_weights``: weights of the family's squared residuals.

The score is then sum(w r^2) / sum(w): the paper's mean squared residual when every weight is 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from app.sims.channel.files import resolve
from app.sims.channel.protocol import Op, Protocol, Sweep
from app.sims.common.config import ConfigError, spec

UNITS_TO_PA = {"pA": 1.0, "nA": 1e3, "uA": 1e6, "µA": 1e6, "fA": 1e-3}


@dataclass(frozen=True)
class LeakSpec:
    """Leak subtraction for one family."""

    method: str = field(default="none", metadata=spec(choices=("none", "linear", "pn")))
    windows: list[list[float]] = field(default_factory=list)   # [[t0, t1], ...] ms, linear leak
    path: str | None = None            # P/N leak traces (same layout and sweeps as the data)
    scale: float = field(default=1.0, metadata=spec(range=(-1e6, 1e6)))


@dataclass(frozen=True)
class FamilyData:
    """The recording of one protocol family."""

    family: str
    path: str
    format: str = field(default="auto", metadata=spec(choices=("auto", "csv", "abf", "nwb")))
    sweeps: list[int] | None = None    # 0-based sweeps of the file, in the family's order
    channel: int = field(default=0, metadata=spec(range=(0, 64)))
    protocol: str = field(default="config", metadata=spec(choices=("config", "file")))
    window: list[float] | None = None  # [t0, t1] ms fitted (protocol: file); default: all
    holding: float | None = None       # protocol: file; default the first command sample
    leak: LeakSpec = field(default_factory=LeakSpec)
    mask: float = field(default=0.0, metadata=spec(range=(0.0, 1e4)))       # ms after each step
    weight: float = field(default=1.0, metadata=spec(range=(0.0, 1e12)))
    sweep_weights: list[float] | None = None


@dataclass(frozen=True)
class Recording:
    """Sweeps of one file on one time base: times (n,) ms, currents (sweeps, n) pA and, where
    the file has it, the command voltage (sweeps, n) mV."""

    source: str
    times: np.ndarray
    currents: np.ndarray
    command: np.ndarray | None = None

    def select(self, sweeps: list[int] | None) -> "Recording":
        if sweeps is None:
            return self
        check_sweeps(self.source, len(self.currents), sweeps)
        command = None if self.command is None else self.command[sweeps]
        return Recording(self.source, self.times, self.currents[sweeps], command)


def check_sweeps(source: str, count: int, sweeps: list[int]) -> None:
    """ConfigError naming the first of ``sweeps`` that a file of ``count`` sweeps lacks."""
    bad = [k for k in sweeps if not 0 <= k < count]
    if bad:
        raise ConfigError(f"{source}: sweep {bad[0]} does not exist (the file has {count} sweeps, "
                          "numbered from 0)")


@dataclass(frozen=True)
class FamilyFit:
    """A family ready to fit: its sweeps, data on their samples and the weights."""

    sweeps: tuple[Sweep, ...]
    target: np.ndarray
    weights: np.ndarray
    leak: tuple[float, float] | None = None     # fitted (conductance nS, reversal mV)


# ---- readers -------------------------------------------------------------------------------

def read(path: Path, fmt: str = "auto", channel: int = 0, sweeps: list[int] | None = None) -> Recording:
    """The sweeps ``sweeps`` (0-based; None: all) of a CSV, ABF or NWB file (``fmt`` auto: by
    suffix)."""
    if fmt == "auto":
        fmt = {".abf": "abf", ".nwb": "nwb"}.get(path.suffix.lower(), "csv")
    if not path.is_file():
        raise ConfigError(f"data file not found: {path}")
    if fmt == "nwb":               # an NWB file's sweeps may differ in rate: choose before reading
        return read_nwb(path, channel, sweeps)
    return {"csv": read_csv, "abf": read_abf}[fmt](path, channel).select(sweeps)


def read_csv(path: Path, channel: int = 0) -> Recording:
    """First column time (ms from the sweep start), then one column per sweep (pA)."""
    from app.sims.channel.data import _header_rows, check_csv_size
    check_csv_size(path)
    try:
        table = np.genfromtxt(path, delimiter=",", comments="#", skip_header=_header_rows(path),
                              filling_values=np.nan, ndmin=2)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read CSV {path}: {exc}") from None
    if table.shape[1] < 2 or len(table) < 2:
        raise ConfigError(f"{path}: need a time column, at least one sweep column and two rows")
    times = table[:, 0]
    if not (np.isfinite(times).all() and (np.diff(times) > 0).all()):
        raise ConfigError(f"{path}: the time column must be finite and increasing")
    return Recording(str(path), times, table[:, 1:].T.copy())


def read_abf(path: Path, channel: int = 0) -> Recording:
    """Every sweep of an Axon ABF file through pyabf, with its command waveform (sweepC)."""
    from app.sims.channel.data import open_abf

    abf = open_abf(path)
    if not 0 <= channel < abf.channelCount:
        raise ConfigError(f"{path}: channel {channel} does not exist (the file has {abf.channelCount})")
    currents, command = [], []
    for k in abf.sweepList:
        abf.setSweep(k, channel=channel)
        currents.append(np.array(abf.sweepY, float))
        command.append(np.array(abf.sweepC, float))
    scale = UNITS_TO_PA.get(abf.sweepUnitsY.strip() or "pA")
    if scale is None:
        raise ConfigError(f"{path}: channel {channel} is in '{abf.sweepUnitsY}', not a current")
    times = np.array(abf.sweepX, float) * 1000.0   # s -> ms
    cmd = np.array(command)
    return Recording(str(path), times, np.array(currents) * scale,
                     cmd if np.isfinite(cmd).all() else None)


def read_nwb(path: Path, channel: int = 0, sweeps: list[int] | None = None) -> Recording:
    """Voltage-clamp series of an NWB file (pynwb): every ``VoltageClampSeries`` in
    acquisition order is a sweep (``sweeps`` picks some, 0-based); its command is the
    ``VoltageClampStimulusSeries`` of the same sweep number and electrode, and, where several
    are (one sweep number on several devices), the same start time, rate and length. The
    chosen sweeps must share one sampling rate; sweeps of different lengths are cut to the
    shortest."""
    try:
        from pynwb import NWBHDF5IO
        from pynwb.icephys import VoltageClampSeries, VoltageClampStimulusSeries
    except ImportError:
        raise ConfigError("reading NWB files needs pynwb (pip install pynwb)") from None
    try:
        io = NWBHDF5IO(str(path), "r")
    except OSError as exc:           # h5py's message does not name the file
        raise ConfigError(f"{path}: not a readable NWB (HDF5) file: {exc}") from None
    with io:
        nwb = io.read()
        series = [s for s in nwb.acquisition.values() if isinstance(s, VoltageClampSeries)]
        stimuli = [s for s in nwb.stimulus.values() if isinstance(s, VoltageClampStimulusSeries)]
        if not series:
            raise ConfigError(f"{path}: no VoltageClampSeries in the acquisition group")
        if sweeps is not None:
            check_sweeps(str(path), len(series), sweeps)
            series = [series[k] for k in sweeps]
        rates: dict[float, list[str]] = {}
        for s in series:
            rates.setdefault(float(f"{float(s.rate):.9g}"), []).append(s.name)    # one rate to 1e-9
        if len(rates) > 1:
            listed = "; ".join(f"{r:g} Hz: {', '.join(names)}" for r, names in rates.items())
            raise ConfigError(f"{path}: the sweeps were sampled at different rates ({listed}); choose "
                              "sweeps of one rate with 'sweeps: [...]' (numbered from 0 in acquisition order)")
        n = min(len(s.data) for s in series)
        currents = np.array([np.asarray(s.data[:n], float) * s.conversion for s in series]) * 1e12
        commands = [_command_of(s, stimuli) for s in series]
        command = (np.array([np.asarray(c.data[:n], float) * c.conversion for c in commands]) * 1e3
                   if all(c is not None for c in commands) else None)
    return Recording(str(path), np.arange(n) * 1000.0 / series[0].rate, currents, command)


def _command_of(response, stimuli: list):
    """The stimulus series of ``response``: same sweep number and electrode, then, among
    several, the one with the same start, rate and length; None if none or still several."""
    same = [s for s in stimuli if getattr(s, "sweep_number", None) == getattr(response, "sweep_number", None)
            and s.electrode is response.electrode]
    if len(same) > 1:
        same = [s for s in same if (s.starting_time, s.rate, len(s.data))
                == (response.starting_time, response.rate, len(response.data))]
    return same[0] if len(same) == 1 else None


# ---- protocols from the command waveform ------------------------------------------------

def ops_from_command(command: np.ndarray, dt: float, first: int, last: int) -> tuple[Op, ...]:
    """Ops reproducing a sampled command ``command`` (n,) mV at times k*dt: a run of two or
    more equal nonzero differences is a linear ramp between its samples, anything else holds
    ``command[k]`` from sample k to k+1 (a step happens at a sample instant). Samples
    ``first+1 .. last`` are recorded (the current at the end of each interval)."""
    c = np.asarray(command, float)
    d = np.diff(c)
    tol = 1e-6 * max(np.abs(c).max(), 1.0)
    same_prev = np.r_[False, np.abs(d[1:] - d[:-1]) <= tol]
    same_next = np.r_[same_prev[1:], False]
    ramp = (np.abs(d) > tol) & (same_prev | same_next)
    ops: list[Op] = []
    k = 0
    while k < len(d):
        record = first <= k < last
        end = k + 1
        if ramp[k]:
            while (end < len(d) and ramp[end] and abs(d[end] - d[k]) <= tol
                   and (first <= end < last) == record):
                end += 1
            ops.append(Op(float(c[k]), dt, end - k, record, float(c[end])))
        else:
            while (end < len(d) and not ramp[end] and abs(c[end] - c[k]) <= tol
                   and (first <= end < last) == record):
                end += 1
            m = end - k
            ops.append(Op(float(c[k]), dt, m, True, float(c[k])) if record
                       else Op(float(c[k]), dt * m, 1, False, float(c[k])))
        k = end
    # nothing after the last recorded sample is needed
    while ops and not ops[-1].record:
        ops.pop()
    return tuple(ops)


def sweeps_from_command(rec: Recording, spec_: FamilyData) -> tuple[Sweep, ...]:
    """The family's sweeps from the file's command waveform."""
    if rec.command is None:
        raise ConfigError(f"{rec.source} has no command waveform; describe the protocol in the "
                          f"config and set 'protocol: config' for family '{spec_.family}'")
    dt = float(np.median(np.diff(rec.times)))
    t0, t1 = spec_.window if spec_.window else (rec.times[0], rec.times[-1])
    if not (len(spec_.window or [0, 1]) == 2 and t0 < t1):
        raise ConfigError(f"family '{spec_.family}': window must be [start, end] ms with start < end")
    first = int(np.searchsorted(rec.times, t0 - 1e-9 * dt))
    last = int(np.searchsorted(rec.times, t1 + 1e-9 * dt, side="right")) - 1
    if last <= first:
        raise ConfigError(f"family '{spec_.family}': window {t0:g}..{t1:g} ms holds no samples")
    sweeps = []
    for k, command in enumerate(rec.command):
        holding = float(command[0]) if spec_.holding is None else float(spec_.holding)
        ops = ops_from_command(command, dt, first, last)
        sweeps.append(Sweep(f"{spec_.family} {k + 1}", holding, ops, spec_.family))
    return tuple(sweeps)


# ---- leak, masks, weights -------------------------------------------------------------

def command_at(rec: Recording, sweeps: tuple[Sweep, ...], k: int) -> np.ndarray:
    """Command voltage of sweep k at every sample of the recording."""
    if rec.command is not None:
        return rec.command[k]
    return sweeps[k].command(rec.times)


def fit_linear_leak(rec: Recording, sweeps: tuple[Sweep, ...], windows: list[list[float]],
                    family: str) -> tuple[float, float]:
    """Leak conductance (nS) and reversal (mV) by least squares on I = g V + c over the
    samples inside ``windows`` of every sweep."""
    inside = np.zeros(len(rec.times), bool)
    for w in windows:
        if len(w) != 2 or not w[0] < w[1]:
            raise ConfigError(f"family '{family}': a leak window is [start, end] ms, got {w}")
        inside |= (rec.times >= w[0]) & (rec.times <= w[1])
    if not inside.any():
        raise ConfigError(f"family '{family}': the leak windows hold no samples")
    v = np.concatenate([command_at(rec, sweeps, k)[inside] for k in range(len(sweeps))])
    i = np.concatenate([rec.currents[k][inside] for k in range(len(sweeps))])
    ok = np.isfinite(v) & np.isfinite(i)
    if np.ptp(v[ok]) < 1e-6:
        raise ConfigError(f"family '{family}': the leak windows see only {v[ok][0]:g} mV; a linear "
                          "leak needs samples at two or more voltages (add a window on another step)")
    g, c = np.polyfit(v[ok], i[ok], 1)
    return float(g), float(-c / g) if g else float("nan")


def step_mask(sweep: Sweep, times: np.ndarray, width: float) -> np.ndarray:
    """True for samples from each command step to ``width`` ms after it (the step instant
    itself included: the command changes within that sample)."""
    masked = np.zeros(len(times), bool)
    tol = 1e-9 * max(float(times.max(initial=1.0)), 1.0)
    for t in sweep.step_times():
        masked |= (times >= t - tol) & (times <= t + width + tol)
    return masked


def align(rec: Recording, k: int, sweep: Sweep, currents: np.ndarray) -> np.ndarray:
    """``currents`` (the recording's samples of sweep k) at the sweep's recorded times."""
    want = sweep.times()
    times = rec.times
    dt = np.median(np.diff(times))
    step = np.median(np.diff(want)) if len(want) > 1 else dt
    index = np.searchsorted(times, want - 1e-6 * dt)
    hit = index < len(times)
    if not hit.all() or np.abs(times[index] - want).max() > 1e-6 * max(dt, 1e-9):
        if abs(dt - step) > 1e-6 * step:
            raise ConfigError(f"{rec.source}: sampling interval {dt:g} ms differs from the protocol's "
                              f"{step:g} ms ({sweep.label})")
        raise ConfigError(f"{rec.source}: sweep {k + 1} does not cover the fitted window "
                          f"{want[0]:g}..{want[-1]:g} ms ({sweep.label})")
    return currents[index]


def prepare_family(spec_: FamilyData, base_sweeps: tuple[Sweep, ...], base_dir: str) -> FamilyFit:
    """Read, leak-subtract, align, mask and weight one family's recording."""
    rec = read(resolve(spec_.path, base_dir), spec_.format, spec_.channel, spec_.sweeps)
    if spec_.protocol == "file":
        sweeps = sweeps_from_command(rec, spec_)
    else:
        sweeps = base_sweeps
        if not sweeps:
            raise ConfigError(f"no protocol family named '{spec_.family}' in the config (or set "
                              "'protocol: file' to read it from an ABF command waveform)")
    if len(rec.currents) != len(sweeps):
        raise ConfigError(f"{rec.source} has {len(rec.currents)} sweeps; family '{spec_.family}' "
                          f"has {len(sweeps)} (choose them with 'sweeps: [...]')")
    currents = rec.currents.copy()
    leak = None
    if spec_.leak.method == "linear":
        g, e = fit_linear_leak(rec, sweeps, spec_.leak.windows, spec_.family)
        leak = (g, e)
        for k in range(len(sweeps)):
            currents[k] -= g * (command_at(rec, sweeps, k) - e)
    elif spec_.leak.method == "pn":
        if not spec_.leak.path:
            raise ConfigError(f"family '{spec_.family}': P/N leak subtraction needs 'leak.path'")
        pn = read(resolve(spec_.leak.path, base_dir), spec_.format, spec_.channel, spec_.sweeps)
        if pn.currents.shape != currents.shape:
            raise ConfigError(f"{pn.source}: P/N traces {pn.currents.shape} do not match the data "
                              f"{currents.shape} (sweeps, samples)")
        currents -= spec_.leak.scale * pn.currents
    if spec_.sweep_weights is not None and len(spec_.sweep_weights) != len(sweeps):
        raise ConfigError(f"family '{spec_.family}': {len(spec_.sweep_weights)} sweep weights for "
                          f"{len(sweeps)} sweeps")
    if spec_.sweep_weights is not None and min(spec_.sweep_weights) < 0:
        raise ConfigError(f"family '{spec_.family}': sweep weights must be >= 0")
    targets, weights = [], []
    for k, sweep in enumerate(sweeps):
        values = align(rec, k, sweep, currents[k])
        w = np.full(len(values), spec_.weight * (1.0 if spec_.sweep_weights is None
                                                 else spec_.sweep_weights[k]))
        w[step_mask(sweep, sweep.times(), spec_.mask)] = 0.0
        missing = ~np.isfinite(values)
        w[missing], values[missing] = 0.0, 0.0
        targets.append(values)
        weights.append(w)
    return FamilyFit(tuple(sweeps), np.concatenate(targets), np.concatenate(weights), leak)


def prepare(families: list[FamilyData], protocol: Protocol | None, base_dir: str
            ) -> tuple[Protocol, np.ndarray, np.ndarray, dict]:
    """The fit's protocol (families in the order given), target and weights, and notes
    (fitted leaks) for the summary."""
    names = [f.family for f in families]
    if len(set(names)) != len(names):
        raise ConfigError(f"family '{next(n for n in names if names.count(n) > 1)}' has two recordings")
    sweeps, targets, weights, notes = [], [], [], {}
    by_family: dict[str, list[Sweep]] = {}
    for s in (protocol.sweeps if protocol else ()):
        by_family.setdefault(s.family, []).append(s)
    unused = set(by_family) - set(names)
    if unused:
        raise ConfigError(f"protocol family '{sorted(unused)[0]}' has no recording in data.families")
    for f in families:
        fit = prepare_family(f, tuple(by_family.get(f.family, ())), base_dir)
        sweeps += fit.sweeps
        targets.append(fit.target)
        weights.append(fit.weights)
        if fit.leak:
            notes[f"leak_{f.family}"] = {"conductance_nS": fit.leak[0], "reversal_mV": fit.leak[1]}
    weights_all = np.concatenate(weights)
    if not weights_all.sum() > 0:
        raise ConfigError("every data point has weight 0 (masks, weights)")
    return Protocol(tuple(sweeps)), np.concatenate(targets), weights_all, notes
