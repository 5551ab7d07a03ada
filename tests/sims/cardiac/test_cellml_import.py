"""The importer on small CellML models written for these tests (tests/sims/cardiac/synthetic.py):
constant derivatives, the annotated stimulus, and metrics of runs that stop early."""

import numpy as np
import pytest

from app.sims.cardiac.cellml import import_cellml
from app.sims.cardiac.metrics import beat_metrics, spontaneous_beat
from app.sims.cardiac.model import CellModel
from app.sims.cardiac.restitution import curve, pulses
from tests.sims.cardiac.helpers import run
from tests.sims.cardiac.synthetic import write_markov_model, write_model


@pytest.mark.parametrize("dk", [0.0, 2.5e-3])
def test_a_state_with_a_constant_derivative_is_a_state(tmp_path, dk):
    """dK_i/dt = 0 (a concentration held fixed; 2.5e-3 mM/ms as well) folds to a number, not
    away: the state stays and its output is the constant."""
    m = CellModel(import_cellml(write_model(tmp_path, dk=dk)))
    assert m.states == ("cell.V", "cell.K_i", "cell.n") and m.n_gates == 1
    assert m.imported.n_coupled == 0          # n's rates read V alone
    y = m.initial_state()[:, None]
    d = m.derivative(y, np.zeros(1), m.parameter_vector())[:, 0]
    assert d[1] == dk
    v, n = -80.0, 0.1
    assert d[0] == pytest.approx(-0.1 * n * (v + 80.0))
    assert d[2] == pytest.approx((1 / (1 + np.exp((-40 - v) / 5)) - n) / 10, rel=1e-14)


def test_annotated_stimulus_is_read(tmp_path):
    m = import_cellml(write_model(tmp_path, amp=-25.0, dur=1.5, per=400.0, off=20.0))
    assert m.stimulus_scale == 1.0
    assert m.default_stimulus == {"amplitude": -25.0, "duration": 1.5, "period": 400.0, "start": 20.0}
    assert [p.qname for p in m.parameters] == ["cell.g"]


def test_metrics_of_an_empty_or_short_trace_are_nan_not_a_crash():
    """A run that stopped before its analysed beat (t = 11 ms, the beat at 50 ms)."""
    t = np.linspace(0.0, 11.0, 12)
    v = np.full_like(t, -80.0)
    for tt, vv in ((t, v), (t[:1], v[:1]), (t[:0], v[:0])):
        m = beat_metrics(tt, vv, 50.0)
        assert np.isnan(m["apd90_ms"]) and np.isnan(m["max_dvdt"]) and np.isnan(m["t_upstroke_ms"])
        m = beat_metrics(tt, vv, 50.0, dvdt=np.zeros_like(tt))
        assert np.isnan(m["apd90_ms"])
        assert spontaneous_beat(tt, vv) is None
        assert curve(tt, vv, pulses("s1s2", 1000.0, 2, [400.0], [], 5, 50.0)) == []
    assert beat_metrics(t, v, 5.0)["rest_mV"] == -80.0


def test_results_of_a_single_cell_run_stopped_before_its_beat():
    """The run stops at the upstroke (step floor); its summary has the stop and no beat
    metrics it cannot measure, and writing it does not fail."""
    from tests.sims.cardiac.helpers import run
    arrays, summary = run("mesh: {kind: single}\nprotocol: {t_end: 1000, stimuli: [{start: 50, duration: 2, "
                          "amplitude: -20, count: 1}]}\nsolver: {method: bs32, dt: 0.5, dt_min: 0.4, "
                          "dt_max: 1.0, at: 1.0e-6, rt: 1.0e-6, precision: float64}\n"
                          "output: {random_probes: 0, probe_cells: [0], dt_save: 0}\n")
    assert summary["stopped"]["t_ms"] < 50 and not summary["finished"]
    assert "apd90_ms" not in summary or np.isnan(summary["apd90_ms"])


def test_a_config_without_stimuli_paces_with_the_annotated_stimulus(tmp_path):
    from tests.sims.cardiac.helpers import config
    path = write_model(tmp_path, amp=-25.0, dur=1.5, per=400.0, off=20.0)
    cfg = config(f"model: {{file: '{path}'}}\nmesh: {{kind: single}}\nprotocol: {{t_end: 1000}}\n")
    (st,) = cfg.protocol.stimuli
    assert (st.amplitude, st.duration, st.period, st.start, st.count) == (-25.0, 1.5, 400.0, 20.0, 3)
    assert st.region.kind == "all"
    cfg = config(f"model: {{file: '{path}'}}\nmesh: {{kind: single}}\nprotocol: {{t_end: 1000, stimuli: "
                 "[{start: 5, amplitude: -30}]}\n")
    (st,) = cfg.protocol.stimuli                 # listed stimuli are the config's, as written
    assert (st.amplitude, st.duration, st.start, st.count) == (-30.0, 2.0, 5.0, 1)
    assert config(f"model: {{file: '{path}'}}\nprotocol: {{stimuli: []}}\n").protocol.stimuli == []
    bare = write_model(tmp_path, annotate=("V", "i_stim"))      # nothing about the pulse annotated
    (st,) = config(f"model: {{file: '{bare}'}}\nmesh: {{kind: single}}\n").protocol.stimuli
    assert (st.amplitude, st.duration, st.count) == (-20.0, 2.0, 1)


def test_the_annotated_stimulus_drives_a_run(tmp_path):
    """Paced by its annotations alone, the synthetic cell's V at the end of each 1.5 ms pulse of
    25 mV/ms is the exact solution of dV/dt = -g·n·(V + 80) + 25 (n held by its slow gate)."""
    from tests.sims.cardiac.helpers import run
    path = write_model(tmp_path)
    arrays, _ = run(f"model: {{file: '{path}'}}\nmesh: {{kind: single}}\nprotocol: {{t_end: 430}}\n"
                    "solver: {method: cvode, at: 1.0e-9, rt: 1.0e-9, dt_max: 1.0, precision: float64}\n"
                    "output: {random_probes: 0, dt_save: 0}\n")
    t, y = arrays["cell_t"], arrays["cell_states"]
    for onset in (20.0, 420.0):
        i0, i1 = np.searchsorted(t, onset), np.searchsorted(t, onset + 1.5)
        assert t[i1] == pytest.approx(onset + 1.5, abs=1e-9)        # CVODE stops on the pulse edges
        v0, n = y[i0, 0], y[i0:i1 + 1, 2]
        k = 0.1 * n.mean()
        exact = -80.0 + (v0 + 80.0 - 25.0 / k) * np.exp(-k * 1.5) + 25.0 / k
        assert y[i1, 0] == pytest.approx(exact, abs=2e-3 * 1.5 * 25.0)
        assert y[i1, 0] - v0 > 30.0


def test_a_model_not_finite_at_its_initial_state_is_refused_by_name(tmp_path):
    """A time constant of 0 in the file (a division by zero): refused at import, naming the state."""
    from app.sims.cardiac.cellml import CellMLImportError
    path = write_model(tmp_path)
    path.write_text(path.read_text().replace('<cn cellml:units="ms">10</cn>', '<cn cellml:units="ms">0</cn>'))
    with pytest.raises(CellMLImportError, match=r"synthetic_cell.cellml: the derivative of cell.n is -?inf"):
        import_cellml(path)


def test_an_annotated_amplitude_of_zero_means_no_stimulus(tmp_path):
    from tests.sims.cardiac.helpers import config
    path = write_model(tmp_path, amp=0.0)
    assert config(f"model: {{file: '{path}'}}\nmesh: {{kind: single}}\n").protocol.stimuli == []


def test_a_current_named_i_st_is_not_taken_for_the_stimulus():
    """Sinoatrial models (Kurata 2002, Maltsev 2009) call their sustained inward current i_st:
    only i_stim-like names are taken for an unannotated stimulus."""
    from app.sims.cardiac.cellml import STIMULUS_NAMES
    assert not STIMULUS_NAMES.match("i_st") and not STIMULUS_NAMES.match("Ist")
    assert all(STIMULUS_NAMES.match(n) for n in ("i_stim", "I_stim", "istim", "i_stimulus", "IStim"))


def test_a_markov_chain_is_coupled_and_its_stepped_model_keeps_the_derivative(tmp_path):
    """C ⇌ O ⇌ I (each state's b reads the others) are gates counted as coupled and placed
    first among the gates; the HH gates m, h (rates of V alone) are not. The stepped model (what the adaptive
    methods integrate) makes them non-gating and has the same derivative at random states."""
    m = CellModel(import_cellml(write_markov_model(tmp_path)))
    assert m.states == ("cell.V", "cell.C", "cell.O", "cell.I", "cell.m", "cell.h")
    assert (m.n_gates, m.imported.n_coupled) == (5, 3)
    stepped = m.with_coupled_stepped()
    assert stepped.states == m.states and (stepped.n_gates, stepped.n_nongating) == (2, 4)
    assert stepped.with_coupled_stepped() is stepped
    rng = np.random.default_rng(3)
    y = np.vstack([rng.uniform(-90, 40, 64), rng.uniform(0, 1, (5, 64))])
    ist = np.where(np.arange(64) % 2 == 0, -20.0, 0.0)
    p = m.parameter_vector()
    np.testing.assert_allclose(stepped.derivative(y, ist, p), m.derivative(y, ist, p), rtol=1e-14, atol=1e-15)


def test_a_model_whose_every_gate_is_coupled_runs_stepped_without_gates(tmp_path):
    """Only a Markov chain besides V (no Hodgkin-Huxley gate): the stepped model has no gate
    left, its rates are (dng, empty a, empty b), and an adaptive run integrates it."""
    path = write_markov_model(tmp_path, sodium=False)
    stepped = CellModel(import_cellml(path)).with_coupled_stepped()
    assert stepped.n_gates == 0
    y = stepped.initial_state()[:, None]
    dng, a, b = stepped.rates(y, np.zeros(1), stepped.parameter_vector())
    assert dng.shape == (4, 1) and a.shape == (0, 1) and b.shape == (0, 1)
    _, s = run(f"model: {{file: '{path}'}}\nmesh: {{kind: single}}\nprotocol: {{t_end: 30.0}}\n"
               "solver: {method: bs32, at: 1.0e-6, rt: 1.0e-6, precision: float64}\n")
    assert s["finished"] and not s.get("stopped")
