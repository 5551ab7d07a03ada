import numpy as np

from app.sims.cardiac.metrics import accuracy, beat_metrics, cubic_spline, interpolated_errors, rrms


def ap(t, shift=0.0):
    return -80 + 100 / (1 + np.exp(-(t - 10 - shift) * 3)) * np.exp(-np.maximum(t - 10 - shift, 0) / 80)


def test_cubic_spline_reproduces_cubics():
    x = np.sort(np.random.default_rng(0).uniform(0, 5, 30))
    x[0], x[-1] = 0, 5
    y = np.sin(x)
    xq = np.linspace(0.5, 4.5, 50)
    assert np.max(np.abs(cubic_spline(x, y, xq) - np.sin(xq))) < 2e-3


def test_identical_traces_have_no_error():
    t = np.arange(0, 100, 0.05)
    v = ap(t)[:, None]
    acc = accuracy(t, v, t, v)
    assert acc["rrms"] < 1e-12 and acc["i_abs_error"] == 0


def test_time_shift_is_measured_horizontally():
    t = np.arange(0, 100, 0.01)
    ref, shifted = ap(t)[:, None], ap(t, 0.2)[:, None]
    abs_err, rel = interpolated_errors(t, ref, t, shifted)
    vertical = np.max(np.abs(ref - shifted))
    assert vertical > 10                       # a 0.2 ms shift of the upstroke: tens of mV
    assert abs_err[0] < 0.5                    # but only ~0.2 (ms) horizontally
    assert rrms(t, ref, t, shifted)[0] > 0.01


def test_beat_metrics():
    t = np.arange(0, 400, 0.01)
    v = ap(t)
    m = beat_metrics(t, v, 0.0)
    assert abs(m["rest_mV"] + 80) < 1e-6 and 10 < m["peak_mV"] < 20 and m["max_dvdt"] > 50
    assert m["apd90_ms"] > 100


def test_phase_singularity_at_a_rotating_wave_tip_and_none_at_rest():
    from app.sims.cardiac.metrics import phase_singularities
    y, x = np.mgrid[0:40, 0:50] + 0.5
    angle = np.arctan2(y - 20.0, x - 30.0)        # a rotating wave: phase = polar angle
    v_now, v_before = -40 + 40 * np.cos(angle), -40 + 40 * np.sin(angle)
    q = phase_singularities(v_now, v_before)
    assert q.shape == (39, 49) and np.count_nonzero(q) == 1 and q[19, 29] == 1
    assert phase_singularities(v_now, -40 - 40 * np.sin(angle))[19, 29] == -1   # the other sense
    rest = np.full((40, 50), -81.0)
    assert not phase_singularities(rest, rest).any()
    plane = -40 + 40 * np.cos(0.3 * x)                # a planar wave train: no tip
    assert not phase_singularities(plane, -40 + 40 * np.sin(0.3 * x)).any()


def test_upstroke_is_sought_before_the_peak_only():
    """A window reaching the next beat's foot, steeper than this beat's upstroke (a slow
    self-oscillating cell), must not move the upstroke after repolarisation."""
    t = np.arange(0, 1500, 0.01)
    v = ap(t) + np.clip(100.0 * (t - 1459.5), 0.0, None)    # the next beat's foot: 100 mV/ms, below the peak
    whole = beat_metrics(t, v, 0.0, window=1460.0)
    alone = beat_metrics(t, ap(t), 0.0, window=1000.0)
    assert abs(whole["apd90_ms"] - alone["apd90_ms"]) < 1e-9 and whole["apd90_ms"] > 100
    dvdt = np.gradient(v, t)
    assert abs(beat_metrics(t, v, 0.0, dvdt, 1460.0)["apd90_ms"] - alone["apd90_ms"]) < 0.05
