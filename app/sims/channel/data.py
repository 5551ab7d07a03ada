"""Target data for a fit: surrogate traces from a model's true values, or recordings from CSV
(first column time in ms, one column per sweep, current in pA) or Axon ABF (through pyabf)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np

from app.compute import philox
from app.sims.channel.cpu import simulate
from app.sims.channel.model import ChannelModel
from app.sims.channel.protocol import Protocol
from app.sims.common.config import ConfigError

NOISE_STREAM = 3 << 32   # Philox stream block used for surrogate noise


def surrogate(model: ChannelModel, protocol: Protocol, values: np.ndarray | None = None,
              noise_sd: float = 0.0, seed: int = 0) -> np.ndarray:
    """Currents of the model at ``values`` (default: its true values), plus Gaussian noise."""
    values = model.true_values if values is None else np.asarray(values, float)
    if np.isnan(values).any():
        missing = [n for n, x in zip(model.param_names, values) if np.isnan(x)]
        raise ConfigError(f"surrogate data need a value for every parameter; missing: {', '.join(missing)}")
    current = simulate(model, protocol, values[None, :])[0]
    if noise_sd > 0:
        n = len(current)
        words = philox.draw(seed, np.full((n + 1) // 2, NOISE_STREAM, np.uint64), np.arange((n + 1) // 2))
        u1, u2 = philox.to_unit_float64(words[0]), philox.to_unit_float64(words[1])
        radius = np.sqrt(-2.0 * np.log(u1))   # Box-Muller: two normals per draw
        normal = np.concatenate([radius * np.cos(2 * np.pi * u2), radius * np.sin(2 * np.pi * u2)])
        current = current + noise_sd * normal[:n]
    return current


def _check_and_pack(protocol: Protocol, times: np.ndarray, sweeps: list[np.ndarray], source: str) -> np.ndarray:
    if len(sweeps) != len(protocol.sweeps):
        raise ConfigError(f"{source} has {len(sweeps)} sweeps; the protocol has {len(protocol.sweeps)}")
    out = []
    for k, (sweep, trace) in enumerate(zip(protocol.sweeps, sweeps)):
        want = sweep.times()
        if len(trace) < len(want):
            raise ConfigError(f"{source}: sweep {k + 1} has {len(trace)} samples; the protocol needs "
                              f"{len(want)} ({sweep.label})")
        dt = np.median(np.diff(times)) if len(times) > 1 else np.nan
        step = want[1] - want[0] if len(want) > 1 else dt
        if len(times) > 1 and abs(dt - step) > 1e-6 * max(step, 1e-12):
            raise ConfigError(f"{source}: sampling interval {dt:g} ms differs from the protocol's {step:g} ms")
        index = np.searchsorted(times, want - 1e-9 * max(step, 1.0))
        if (index >= len(times)).any() or np.abs(times[np.minimum(index, len(times) - 1)] - want).max() > 1e-6 * max(step, 1):
            raise ConfigError(f"{source}: sweep {k + 1} does not cover the fitted window "
                              f"{want[0]:g}..{want[-1]:g} ms")
        values = np.asarray(trace, float)[index]
        if not np.isfinite(values).all():
            raise ConfigError(f"{source}: sweep {k + 1} has missing values inside the fitted window")
        out.append(values)
    return np.concatenate(out)


MAX_CSV_BYTES = 64 << 20     # a recording as text; larger ones belong in ABF or NWB (binary, read in parts)


def check_csv_size(path: str | Path) -> None:
    """Refuse a CSV above :data:`MAX_CSV_BYTES` (or not a regular file) before it is parsed."""
    try:
        info = os.stat(path)
    except OSError as exc:
        raise ConfigError(f"cannot read CSV {path}: {exc.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        raise ConfigError(f"{path}: not a regular file (a folder, a pipe or a device)")
    if info.st_size > MAX_CSV_BYTES:
        raise ConfigError(f"{path}: the CSV is {info.st_size:,} bytes; a CSV recording may have at "
                          f"most {MAX_CSV_BYTES:,} (save large recordings as ABF or NWB)")


def load_csv(path: str | Path, protocol: Protocol) -> np.ndarray:
    """Recorded currents aligned to the protocol's samples (times measured from sweep start)."""
    check_csv_size(path)
    try:
        table = np.genfromtxt(path, delimiter=",", comments="#", skip_header=_header_rows(path),
                              filling_values=np.nan, ndmin=2)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read CSV {path}: {exc}") from None
    if table.shape[1] < 2:
        raise ConfigError(f"{path}: need a time column and at least one sweep column")
    return _check_and_pack(protocol, table[:, 0], [table[:, k] for k in range(1, table.shape[1])], str(path))


def _header_rows(path: str | Path) -> int:
    try:
        with open(path, encoding="utf-8") as fh:
            first = fh.readline()
    except OSError:
        return 0
    try:
        [float(x) for x in first.split(",")]
        return 0
    except ValueError:
        return 1


def open_abf(path: str | Path):
    """The ``pyabf.ABF`` of ``path``; a ConfigError naming the file when pyabf is missing or
    the file cannot be read."""
    try:
        import pyabf
    except ImportError:
        raise ConfigError("reading ABF files needs pyabf (pip install pyabf)") from None
    try:
        return pyabf.ABF(str(path))
    except Exception as exc:   # pyabf raises plain Exceptions for corrupt files
        raise ConfigError(f"cannot read ABF {path}: {exc}") from None


def load_abf(path: str | Path, protocol: Protocol, channel: int = 0) -> np.ndarray:
    """Recorded currents from an Axon ABF file (pyabf), one sweep per protocol sweep."""
    abf = open_abf(path)
    channels = list(getattr(abf, "channelList", [0]))
    if channel not in channels:
        raise ConfigError(f"data.channel = {channel}, but the ABF file {path} has "
                          f"{len(channels)} channel{'s' if len(channels) != 1 else ''} "
                          f"(0..{len(channels) - 1})", path=("data", "channel"))
    sweeps, times = [], None
    for k in abf.sweepList:
        abf.setSweep(k, channel=channel)
        sweeps.append(np.array(abf.sweepY, float))
        times = np.array(abf.sweepX, float) * 1000.0   # s -> ms
    return _check_and_pack(protocol, times, sweeps, str(path))


def save_csv_traces(path: str | Path, protocol: Protocol, currents: np.ndarray) -> None:
    """Write currents (n_points,) in the load_csv layout: one time column (the union of every
    sweep's sample times), one column per sweep, empty where a sweep has no sample."""
    import io

    from app.sims.common.output import save_text
    offsets = protocol.offsets()
    times = np.unique(np.round(np.concatenate([s.times() for s in protocol.sweeps]), 9))
    table = np.full((len(times), len(protocol.sweeps) + 1), np.nan)
    table[:, 0] = times
    for k, sweep in enumerate(protocol.sweeps):
        rows = np.searchsorted(times, np.round(sweep.times(), 9))
        table[rows, k + 1] = currents[offsets[k]:offsets[k + 1]]
    header = ",".join(["t_ms"] + [f"sweep{k + 1}" for k in range(len(protocol.sweeps))])
    buf = io.StringIO()
    np.savetxt(buf, table, delimiter=",", header=header, comments="", fmt="%.8g")
    save_text(path, buf.getvalue().replace("nan", ""))
