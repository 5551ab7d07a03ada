"""A cultured-network run as an NWB file (pynwb): spikes, positions, population rate, bursts.

The ``Units`` table has one unit per neuron: its recorded spike times (s; the run's recorded
window, all epochs or the last one as ``analysis.spikes`` chose), its grid position ``x``, ``y``
(grid units; the culture is a ``width`` x ``height`` grid), whether it is inhibitory or a
starter, and its neurite radius at the end. The processing module ``ecephys`` holds the
population rate (spikes per second per neuron in bins of ``analysis.burst_bin``, over the
recorded window), the bursts where there were any (``TimeIntervals``: runs of bins where at least
``analysis.burst_fraction`` of the neurons fire, as the run detects them) and the per-epoch
history (mean rate, bursts per minute, synapses, mean radius). Not written: the membrane
voltages (not recorded), the connectivity (see the NeuroML export), the subject, experimenter
and institution (a simulation has none; add them before sharing).
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Mapping

import numpy as np

from app.sims.common.config import ConfigError

MODULE = "ecephys"     # nwbinspector asks for the schema's module names


def population(spike_times: np.ndarray, n: int, bin_s: float, t_end: float) -> tuple[np.ndarray, np.ndarray]:
    """(bin start times s, spike counts) over [0, t_end) in bins of ``bin_s``."""
    bins = max(1, int(np.ceil(t_end / bin_s - 1e-9)))
    counts = np.bincount(np.minimum((np.asarray(spike_times) / bin_s).astype(np.int64), bins - 1), minlength=bins)
    return np.arange(bins) * bin_s, counts


def burst_intervals(counts: np.ndarray, threshold: float) -> list[tuple[int, int]]:
    """(first bin, one past the last bin) of each burst: the run's start bins
    (:func:`app.sims.network.model.detect_bursts`) to the end of the run of bins above."""
    from app.sims.network.model import detect_bursts
    above = np.asarray(counts) >= threshold
    out = []
    for start in detect_bursts(counts, threshold):
        stop = int(start)
        while stop < above.size and above[stop]:
            stop += 1
        out.append((int(start), stop))
    return out


def write_network_nwb(path: str | Path, arrays: Mapping[str, np.ndarray], width: int, dt: float, bin_s: float,
                      burst_fraction: float, epoch_seconds: float, description: str,
                      start: datetime | None = None) -> Path:
    """Write a network run's ``results.npz`` arrays (``spike_times``, ``spike_neurons``,
    ``inhibitory``, ``starter``, ``final_radius``, ``epoch_*``) to ``path``."""
    try:
        import pynwb
        from pynwb.epoch import TimeIntervals
    except ImportError:
        raise ConfigError("writing NWB files needs pynwb (pip install 'biogpu-studio[export]')") from None
    from app.sims.common.export import write_nwb

    times, neurons = np.asarray(arrays["spike_times"], float), np.asarray(arrays["spike_neurons"], np.int64)
    inhibitory = np.asarray(arrays["inhibitory"], bool)
    n = inhibitory.size
    epochs = np.asarray(arrays.get("epoch_mean_rate", []), float)
    t_end = max(epochs.size * epoch_seconds, float(times.max(initial=0.0)) + bin_s)
    nwb = pynwb.NWBFile(session_description=description or "cultured network", identifier=str(uuid.uuid4()),
                        session_start_time=start or datetime.now(timezone.utc),
                        experiment_description="Cultured network simulated by BioGPU Studio: leaky "
                        "integrate-and-fire neurons, Tsodyks-Markram synapses, activity-dependent growth",
                        keywords=["cultured network", "spiking network", "network bursts", "simulation"])
    nwb.units = pynwb.misc.Units(name="units", resolution=dt,
                                 description="one unit per neuron; spike times on the step grid (dt)")
    nwb.add_unit_column(name="x", description="grid column (grid units)")
    nwb.add_unit_column(name="y", description="grid row (grid units)")
    nwb.add_unit_column(name="inhibitory", description="inhibitory neuron")
    nwb.add_unit_column(name="starter", description="endogenously active (starter) neuron")
    nwb.add_unit_column(name="final_radius", description="neurite radius at the end of the run (grid units)")
    order = np.argsort(neurons, kind="stable")
    split = np.searchsorted(neurons[order], np.arange(n + 1))
    starter, radius = np.asarray(arrays["starter"], bool), np.asarray(arrays["final_radius"], float)
    for i in range(n):
        nwb.add_unit(spike_times=np.sort(times[order][split[i]:split[i + 1]]), x=float(i % width),
                     y=float(i // width), inhibitory=bool(inhibitory[i]), starter=bool(starter[i]),
                     final_radius=float(radius[i]))
    module = nwb.create_processing_module(name=MODULE, description="population activity of the culture")
    t0, counts = population(times, n, bin_s, t_end)
    module.add(pynwb.TimeSeries(name="population_rate", data=counts / (n * bin_s), unit="Hz",
                                starting_time=0.0, rate=1.0 / bin_s,
                                description=f"spikes per second per neuron in {bin_s:g} s bins"))
    bursts = TimeIntervals(name="bursts", description=f"network bursts: runs of {bin_s:g} s bins in which "
                           f"at least {burst_fraction:g} of the neurons fire")
    for first, stop in burst_intervals(counts, burst_fraction * n):
        bursts.add_interval(start_time=float(t0[first]), stop_time=float(stop * bin_s))
    if len(bursts):                     # an empty table is a best-practice violation
        module.add(bursts)
    ends = (np.arange(epochs.size) + 1) * epoch_seconds
    for key, unit, text in (("epoch_mean_rate", "Hz", "mean firing rate over each epoch"),
                            ("epoch_bursts_per_minute", "1/min", "network bursts per minute in each epoch"),
                            ("epoch_synapses", "synapses", "synapses at the end of each epoch"),
                            ("epoch_mean_radius", "grid units", "mean neurite radius at the end of each epoch")):
        if key in arrays and len(arrays[key]):
            module.add(pynwb.TimeSeries(name=key, data=np.asarray(arrays[key], float), unit=unit,
                                        timestamps=ends, description=text))
    return write_nwb(nwb, Path(path))


def write_run(cfg, arrays: Mapping[str, np.ndarray], out: str | Path, label: str = "") -> Path:
    """A finished run of config ``cfg`` (its results arrays) as NWB at ``out``."""
    if "spike_times" not in arrays or "inhibitory" not in arrays:
        raise ConfigError("no finished run to export (its spikes and culture are written at the end)")
    return write_network_nwb(out, arrays, cfg.culture.width, cfg.run.dt, cfg.analysis.burst_bin,
                             cfg.analysis.burst_fraction, cfg.run.epoch_seconds,
                             f"{cfg.name or 'cultured network'}{label}")


def export_run(folder: Path, out: Path) -> list[Path]:
    """``biogpu export RUN --to nwb``: spikes, positions, population rate and bursts."""
    from app.sims.common.export import load_results, load_run
    return [write_run(load_run(folder), load_results(folder), out, f" ({folder.name})")]
