"""The channel fit as NWB: nwbinspector finds nothing to report, and our NWB reader reads the
currents and commands back; a public icephys NWB file (its path in BIOGPU_PUBLIC_NWB) reads too."""

import os
from datetime import datetime, timezone

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


def test_a_public_icephys_nwb_file_reads():
    """BIOGPU_PUBLIC_NWB: a public NWB file with VoltageClampSeries (never committed)."""
    path = os.environ.get("BIOGPU_PUBLIC_NWB")
    if not path:
        pytest.skip("BIOGPU_PUBLIC_NWB is not set")
    rec = recordings.read_nwb(path)
    assert rec.currents.ndim == 2 and rec.currents.shape[1] == rec.times.size > 1
    assert np.isfinite(rec.currents).all()


def test_a_file_that_is_not_hdf5_is_refused_naming_it(tmp_path):
    from app.sims.common.config import ConfigError
    bad = tmp_path / "fake.nwb"
    bad.write_bytes(b"\x1f\x8b\x08\x00 gzip, not HDF5")
    with pytest.raises(ConfigError, match="fake.nwb: not a readable NWB"):
        recordings.read_nwb(bad)
