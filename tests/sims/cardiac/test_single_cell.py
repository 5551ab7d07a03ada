"""Single-cell check against the CVODE reference (shared/reference/cardiac), CPU engine, at
the settings we recommend (the preset: Bogacki-Shampine 3(2) + RL, at 1e-4, rt 1e-5, float64)."""

import json
from pathlib import Path

import numpy as np
import pytest

from app.sims.cardiac.simulation import CardiacSimulation
from app.sims.common.simulation import PRESETS, load_run_config

REF = Path(__file__).resolve().parents[4] / "shared" / "reference" / "cardiac"
if not REF.exists():
    REF = Path(__file__).resolve().parents[3] / "shared" / "reference" / "cardiac"

# the numbers of courtemanche_single_cell_1hz_summary.json, beat 10 (kept here so the test runs
# where shared/ is absent; checked against the file when it is present)
BEAT10 = {"V_rest_mV_at_stim_onset": -80.869, "V_peak_mV": 24.33, "APD90_ms_from_max_dVdt": 298.05,
          "max_dVdt_mV_per_ms": 217.7}


@pytest.fixture(scope="module")
def run():
    _, cfg = load_run_config(PRESETS / "cardiac" / "00-single-cell-1hz.yaml")
    sim = CardiacSimulation(cfg, "cpu")
    while not sim.finished:
        sim.advance()
    return sim.results()


def test_reference_numbers_match_the_shared_file():
    path = REF / "courtemanche_single_cell_1hz_summary.json"
    if not path.exists():
        pytest.skip("shared/reference/cardiac not beside this checkout")
    beat10 = json.loads(path.read_text())["beat10"]
    for k, v in BEAT10.items():
        assert beat10[k] == v


def test_single_cell_matches_reference(run):
    _, s = run
    assert abs(s["apd90_ms"] - BEAT10["APD90_ms_from_max_dVdt"]) < 0.01 * BEAT10["APD90_ms_from_max_dVdt"]
    assert abs(s["peak_mV"] - BEAT10["V_peak_mV"]) < 1.0
    assert abs(s["rest_mV"] - BEAT10["V_rest_mV_at_stim_onset"]) < 0.5
    assert abs(s["max_dvdt"] - BEAT10["max_dVdt_mV_per_ms"]) < 0.02 * BEAT10["max_dVdt_mV_per_ms"]


def test_single_cell_trace_follows_reference_csv(run):
    path = REF / "courtemanche_single_cell_1hz.csv"
    if not path.exists():
        pytest.skip("shared/reference/cardiac not beside this checkout")
    ref = np.loadtxt(path, delimiter=",", skiprows=1)
    arrays, s = run
    t = arrays["cell_t"] - s["beat_onset_ms"]
    v = np.interp(ref[:, 0], t, arrays["cell_states"][:, 0])
    late = ref[:, 0] > 10.0                 # after the upstroke: a pointwise comparison is fair
    assert np.max(np.abs(v[late] - ref[late, 1])) < 2.0
    assert np.sqrt(np.mean((v - ref[:, 1]) ** 2)) < 1.0


def test_single_cell_run_past_its_budget_stops_itself_and_says_how_far():
    """``singlecell.ours`` with a time budget ends the run itself (the corpus script's CUDA runs:
    no process is killed) and reports the simulated time and steps reached."""
    from pathlib import Path

    from app.sims.cardiac.model import load_model
    from app.sims.cardiac.singlecell import ours, protocol
    path = Path("resources/models/cardiac/beeler_reuter_model_1977.cellml")
    out = ours(path, protocol(load_model(str(path)), beats=2), beats=2, budget_s=1e-9)
    assert out["out_of_time_s"] == 1e-9 and 0 < out["t_ms"] < out["t_end_ms"] and out["steps_accepted"] > 0
