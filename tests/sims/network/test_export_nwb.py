"""A network run as NWB: nwbinspector finds no violation; the units, population rate and bursts
read back as the run's spikes and the burst definition."""

import numpy as np
import pytest

from app.cli import main
from app.sims.common.simulation import PRESETS

pynwb = pytest.importorskip("pynwb")


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory):
    out = tmp_path_factory.mktemp("net") / "run"
    assert main(["run", str(PRESETS / "network" / "00-development-10x10-fast.yaml"), "--backend", "cpu",
                 "--set", "run.epochs=2", "--set", "run.epoch_seconds=1.0", "--set", "analysis.burst_fraction=0.03",
                 "--set", "growth.start_radius=1.5",
                 "--out", str(out), "--no-png"]) == 0
    return out


def test_network_nwb_holds_the_spikes_positions_rate_and_bursts(run_folder):
    inspector = pytest.importorskip("nwbinspector")
    out = run_folder / "net.nwb"
    assert main(["export", str(run_folder), "--to", "nwb", "-o", str(out)]) == 0
    serious = [m for m in inspector.inspect_nwbfile(nwbfile_path=str(out), ignore=["check_subject_exists"])
               if m.importance.value >= inspector.Importance.BEST_PRACTICE_VIOLATION.value]
    assert not serious, [str(m) for m in serious]
    data = np.load(run_folder / "results.npz")
    times, neurons = data["spike_times"], data["spike_neurons"]
    assert times.size > 50
    with pynwb.NWBHDF5IO(str(out), "r") as io:
        nwb = io.read()
        units = nwb.units
        assert len(units) == 100
        for i in (0, 7, 42, 99):
            np.testing.assert_allclose(units["spike_times"][i], np.sort(times[neurons == i]), rtol=0, atol=0)
            assert (units["x"][i], units["y"][i]) == (i % 10, i // 10)
        assert units["inhibitory"][:].sum() == data["inhibitory"].sum() == 2
        module = nwb.processing["ecephys"]
        rate = module["population_rate"]
        bin_s = 1.0 / rate.rate
        counts = np.rint(rate.data[:] * 100 * bin_s).astype(int)
        assert counts.sum() == times.size
        bursts = module["bursts"].to_dataframe()
        assert len(bursts) > 0
        for start, stop in zip(bursts["start_time"], bursts["stop_time"]):   # runs of bins >= 3 neurons
            first, last = int(round(start / bin_s)), int(round(stop / bin_s))
            assert (counts[first:last] >= 3).all()
            assert first == 0 or counts[first - 1] < 3
            assert last == counts.size or counts[last] < 3
        assert (counts >= 3).sum() == sum(int(round((b - a) / bin_s)) for a, b in
                                          zip(bursts["start_time"], bursts["stop_time"]))
