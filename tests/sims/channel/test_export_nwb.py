"""The channel fit as NWB: nwbinspector finds nothing to report, and our NWB reader reads the
currents and commands back; a public icephys NWB file (its path in BIOGPU_PUBLIC_NWB) reads too."""

import os
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pytest

from app.sims.channel import cpu, recordings
from app.sims.channel.export_nwb import write_fit_nwb
from app.sims.channel.protocol import ProtocolSpec, Segment, StepRange, compile_protocols

from .helpers import model

pynwb = pytest.importorskip("pynwb")


def _write(path):
    m = model("model-b")
    protocol = compile_protocols([ProtocolSpec("activation", -90.0, [Segment(-90.0, 2.0),
                                  Segment("step", 5.0, True)], steps=StepRange(-40.0, 20.0, 30.0), dt=0.1)])
    target = cpu.simulate(m, protocol, m.true_values[None])[0]
    best = m.true_values * 1.01
    fitted = cpu.simulate(m, protocol, best[None])[0]
    table = {"name": list(m.param_names), "value": best, "lower": m.lower, "upper": m.upper}
    write_fit_nwb(path, protocol, target, fitted, table, "test fit", "protocols: ...", "model: ...",
                  datetime(2026, 1, 1, tzinfo=timezone.utc))
    return protocol, target, fitted, best


def test_fit_nwb_passes_nwbinspector_and_reads_back(tmp_path):
    inspector = pytest.importorskip("nwbinspector")
    path = tmp_path / "fit.nwb"
    protocol, target, fitted, best = _write(path)
    # skipped: metadata only the user knows (the subject); left: suggestions (experimenter...)
    serious = [m for m in inspector.inspect_nwbfile(nwbfile_path=str(path), ignore=["check_subject_exists"])
               if m.importance.value >= inspector.Importance.BEST_PRACTICE_VIOLATION.value]
    assert not serious, [str(m) for m in serious]
    rec = recordings.read_nwb(path)
    n = protocol.sweeps[0].n_points
    np.testing.assert_allclose(rec.currents, target.reshape(-1, n), rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(rec.command, np.array([s.voltages() for s in protocol.sweeps]), rtol=1e-12)
    np.testing.assert_allclose(rec.times, protocol.sweeps[0].times() - protocol.sweeps[0].times()[0], atol=1e-9)
    with pynwb.NWBHDF5IO(str(path), "r") as io:
        nwb = io.read()
        fit = nwb.processing["icephys"]
        np.testing.assert_allclose(fit["fitted_current_00001"].data[:] * 1e-12,
                                   fitted[n:2 * n] * 1e-12, rtol=1e-12)
        np.testing.assert_allclose(fit["parameters"]["value"].data[:], best)
        assert len(nwb.intracellular_recordings) == len(protocol.sweeps)
        assert nwb.icephys_sequential_recordings["stimulus_type"].data[:].tolist() == ["activation"]


def _one(value) -> float:
    """A scalar HDF5 attribute or dataset, stored as a number or a one-element array."""
    return float(np.ravel(value)[0])


def _by_hdf5(path) -> list[dict]:
    """Each VoltageClampSeries of ``path`` read with h5py alone, in acquisition order: name,
    rate, start, sweep number, current (pA) and the command (mV) of the stimulus with its
    sweep number, start and length (None if not exactly one)."""
    import h5py
    with h5py.File(path, "r") as f:
        def series(group, kind):
            out = []
            for name, g in group.items():
                if g.attrs.get("neurodata_type") in (kind, kind.encode()):
                    data = g["data"]
                    out.append({"name": name, "rate": _one(g["starting_time"].attrs["rate"]),
                                "start": _one(g["starting_time"][()]), "sweep": _one(g.attrs["sweep_number"]),
                                "values": data[()].astype(float) * float(data.attrs.get("conversion", 1.0))})
            return out
        responses = series(f["acquisition"], "VoltageClampSeries")
        stimuli = series(f["stimulus/presentation"], "VoltageClampStimulusSeries")
    for r in responses:
        match = [s for s in stimuli if (s["sweep"], s["start"], s["values"].size)
                 == (r["sweep"], r["start"], r["values"].size)]
        r["current"] = r["values"] * 1e12
        r["command"] = match[0]["values"] * 1e3 if len(match) == 1 else None
    return responses


def _check_against_hdf5(path):
    """Our reader, sweep group by sweep group of one rate, gives h5py's currents and commands;
    all sweeps at once are refused naming the rates when they differ."""
    expected = _by_hdf5(path)
    assert expected
    groups: dict[float, list[int]] = {}
    for k, r in enumerate(expected):
        groups.setdefault(r["rate"], []).append(k)
    if len(groups) > 1:
        from app.sims.common.config import ConfigError
        with pytest.raises(ConfigError, match="sampled at different rates .*choose sweeps of one rate"):
            recordings.read(Path(path), "nwb")
    for rate, sweeps in groups.items():
        rec = recordings.read(Path(path), "nwb", sweeps=sweeps)
        n = min(expected[k]["current"].size for k in sweeps)
        np.testing.assert_allclose(rec.times, np.arange(n) * 1e3 / rate, rtol=1e-12)
        np.testing.assert_allclose(rec.currents, [expected[k]["current"][:n] for k in sweeps], rtol=1e-12)
        if all(expected[k]["command"] is not None for k in sweeps):
            np.testing.assert_allclose(rec.command, [expected[k]["command"][:n] for k in sweeps], rtol=1e-12)
    return groups


def test_sweeps_of_two_devices_pair_with_their_own_commands(tmp_path):
    """As MIES writes them: two devices on one electrode, each numbering its sweeps from 0, at
    200 and 500 kHz. Each response gets the command of its own device (same sweep number,
    start, rate and length), and one rate is read at a time."""
    from pynwb import NWBHDF5IO, NWBFile
    from pynwb.icephys import VoltageClampSeries, VoltageClampStimulusSeries
    nwb = NWBFile("two devices", "two-devices", datetime(2026, 1, 1, tzinfo=timezone.utc))
    electrode = nwb.create_icephys_electrode(name="electrode_0", description="patch",
                                             device=nwb.create_device(name="amplifier"))
    for k, (rate, length, start, sweep) in enumerate(((2e5, 300, 0.0, 0), (2e5, 300, 1.0, 1),
                                                      (5e5, 700, 2.0, 0), (5e5, 700, 3.0, 1))):
        command = np.where(np.arange(length) > length // 3, -20.0 - 10 * k, -80.0)      # mV
        common = {"rate": rate, "starting_time": start, "electrode": electrode, "gain": 1.0,
                  "sweep_number": np.uint64(sweep)}
        nwb.add_stimulus(VoltageClampStimulusSeries(name=f"data_{k:05d}_DA0", data=command, conversion=1e-3,
                                                    **common))
        nwb.add_acquisition(VoltageClampSeries(name=f"data_{k:05d}_AD0", data=100.0 * k + np.sin(np.arange(length)),
                                               conversion=1e-12, **common))
    path = tmp_path / "two-devices.nwb"
    with NWBHDF5IO(str(path), "w") as io:
        io.write(nwb)
    assert _check_against_hdf5(path) == {2e5: [0, 1], 5e5: [2, 3]}
    rec = recordings.read(path, "nwb", sweeps=[2, 3])
    assert rec.command[:, -1].tolist() == [-40.0, -50.0]        # the 500-kHz device's own commands


def test_a_public_icephys_nwb_file_reads():
    """BIOGPU_PUBLIC_NWB: a public NWB file with VoltageClampSeries (never committed); checked
    on MIES's AB_SweepsFromMultipleDevices-compressed-V2.nwb (NWB 2.2.4, gunzipped): two
    devices at 200 and 500 kHz, the 200-kHz sweeps with a 10 mV test pulse."""
    path = os.environ.get("BIOGPU_PUBLIC_NWB")
    if not path:
        pytest.skip("BIOGPU_PUBLIC_NWB is not set")
    groups = _check_against_hdf5(path)
    for sweeps in groups.values():
        rec = recordings.read(Path(path), "nwb", sweeps=sweeps)
        assert rec.currents.shape == (len(sweeps), rec.times.size) and rec.times.size > 1
        assert np.isfinite(rec.currents).all()


def test_a_file_that_is_not_hdf5_is_refused_naming_it(tmp_path):
    from app.sims.common.config import ConfigError
    bad = tmp_path / "fake.nwb"
    bad.write_bytes(b"\x1f\x8b\x08\x00 gzip, not HDF5")
    with pytest.raises(ConfigError, match="fake.nwb: not a readable NWB"):
        recordings.read_nwb(bad)
