"""Action-potential measures and the paper's accuracy measures (Section 5.1).

* :func:`beat_metrics`: resting V at the stimulus onset, peak, max dV/dt and APD90 measured
  from the time of max dV/dt (the reference's convention); `spontaneous_beat`: where a
  self-oscillating cell's last beat starts (its maximum diastolic potential).
* :func:`rrms`: Eq. 19 on both traces resampled to a common grid (0.05 ms) by natural cubic
  splines, as the paper did.
* :func:`interpolated_errors`: for every point of the computed trace, the vertical distance
  to the reference (linear interpolation at the same t) and the horizontal one (inverse linear
  interpolation: the nearest time at which the reference takes the same V on a monotone
  piece), the smaller of the two; I_Abs_Error is the largest over the trace, I_Rel_Error that
  divided by the largest |V| of the trace. For several probes, the maximum over probes.
* :func:`phase_singularities`: the topological charge of every 2x2 plaquette of a sheet's
  phase map (time-delay embedding of V), nonzero where a spiral wave's tip (or a free wave end)
  lies.
"""

from __future__ import annotations

import numpy as np

from app.sims.cardiac.readouts import V_MID, phase, wrap


def cubic_spline(x: np.ndarray, y: np.ndarray, xq: np.ndarray) -> np.ndarray:
    """Natural cubic spline through (x, y) evaluated at xq (y may be (n,) or (n, m))."""
    x = np.asarray(x, float)
    y = np.asarray(y, float)
    keep = np.concatenate([[True], np.diff(x) > 1e-12])
    x, y = x[keep], y[keep]
    n = len(x)
    if n < 3:
        return np.interp(xq, x, y) if y.ndim == 1 else np.stack(
            [np.interp(xq, x, y[:, j]) for j in range(y.shape[1])], 1)
    h = np.diff(x)
    yy = y.reshape(n, -1)
    rhs = np.zeros_like(yy)
    rhs[1:-1] = 6 * ((yy[2:] - yy[1:-1]) / h[1:, None] - (yy[1:-1] - yy[:-2]) / h[:-1, None])
    # tridiagonal solve (Thomas) for the second derivatives, natural ends
    diag = np.ones(n)
    diag[1:-1] = 2 * (h[:-1] + h[1:])
    lower = np.zeros(n)
    upper = np.zeros(n)
    lower[1:-1] = h[:-1]
    upper[1:-1] = h[1:]
    c = np.zeros(n)
    d = np.zeros_like(yy)
    c[0] = upper[0] / diag[0]
    d[0] = rhs[0] / diag[0]
    for i in range(1, n):
        den = diag[i] - lower[i] * c[i - 1]
        c[i] = upper[i] / den
        d[i] = (rhs[i] - lower[i] * d[i - 1]) / den
    m = np.zeros_like(yy)
    m[-1] = d[-1]
    for i in range(n - 2, -1, -1):
        m[i] = d[i] - c[i] * m[i + 1]
    xq = np.asarray(xq, float)
    k = np.clip(np.searchsorted(x, xq, side="right") - 1, 0, n - 2)
    hk = h[k][:, None]
    a = (x[k + 1][:, None] - xq[:, None]) / hk
    b = 1 - a
    out = a * yy[k] + b * yy[k + 1] + ((a ** 3 - a) * m[k] + (b ** 3 - b) * m[k + 1]) * hk ** 2 / 6
    return out[:, 0] if y.ndim == 1 else out


def beat_metrics(t: np.ndarray, v: np.ndarray, t_stim: float, dvdt: np.ndarray | None = None,
                 window: float = 1000.0) -> dict[str, float]:
    """Rest, peak, max dV/dt and APD90 (from max dV/dt) of the beat starting at ``t_stim``;
    NaN for what a trace too short for the beat (a run stopped early) cannot give. The upstroke
    (max dV/dt) is sought up to the peak only: a window reaching the next beat's foot (a
    self-oscillating cell with a slow upstroke) would otherwise place it after repolarisation."""
    t, v = np.asarray(t, float), np.asarray(v, float)
    sel = (t >= t_stim - 1e-9) & (t < t_stim + window)
    tt, vv = t[sel], v[sel]
    nan = float("nan")
    rest = float(np.interp(t_stim, t, v)) if len(t) and t[0] <= t_stim <= t[-1] else nan
    if len(tt) < 2:
        return {"rest_mV": rest, "peak_mV": float(vv[0]) if len(vv) else nan, "max_dvdt": nan,
                "apd90_ms": nan, "t_upstroke_ms": nan}
    ip = int(np.argmax(vv))
    peak = float(vv[ip])
    if dvdt is None:
        with np.errstate(divide="ignore", invalid="ignore"):
            slope = np.diff(vv) / np.diff(tt)
        slope = np.where(np.isfinite(slope), slope, -np.inf)     # repeated time stamps
        i = int(np.argmax(slope[:max(ip, 1)]))
        max_dvdt, t_up = float(slope[i]), float(0.5 * (tt[i] + tt[i + 1]))
    else:
        dd = dvdt[sel]
        i = int(np.argmax(dd[:ip + 1]))
        max_dvdt, t_up = float(dd[i]), float(tt[i])
    v90 = peak - 0.9 * (peak - rest)
    after = np.flatnonzero(vv[ip:] <= v90)
    if len(after) == 0 or after[0] == 0:          # no repolarisation, or no beat at all
        apd90 = float("nan")
    else:
        k = ip + int(after[0])
        t_rep = tt[k - 1] + (v90 - vv[k - 1]) * (tt[k] - tt[k - 1]) / (vv[k] - vv[k - 1])
        apd90 = float(t_rep - t_up)
    return {"rest_mV": rest, "peak_mV": peak, "max_dvdt": max_dvdt, "apd90_ms": apd90,
            "t_upstroke_ms": t_up}


def spontaneous_beat(t: np.ndarray, v: np.ndarray, threshold: float = -20.0,
                     follow: float = 400.0) -> tuple[float, float] | None:
    """``(onset, window)`` of a self-oscillating cell's last analysable beat: the onset is its
    maximum diastolic potential (the lowest V since the previous upstroke), the window reaches
    the next upstroke; the beat is the last upward crossing of ``threshold`` followed by
    ``follow`` ms of trace (else the first). None without any crossing."""
    t, v = np.asarray(t, float), np.asarray(v, float)
    up = np.flatnonzero((v[:-1] < threshold) & (v[1:] >= threshold)) + 1
    if len(up) == 0:
        return None
    full = [i for i in up if t[-1] - t[i] >= follow]
    i = full[-1] if full else up[0]
    before, after = up[up < i], up[up > i]
    start = before[-1] if len(before) else 0
    onset = float(t[start + int(np.argmin(v[start:i]))])
    end = float(t[after[0]]) if len(after) else float(t[-1])
    return onset, end - onset


def resample(t: np.ndarray, v: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Traces (T, P) at times t onto ``grid`` by natural cubic splines."""
    return cubic_spline(t, v, grid)


def rrms(t_ref, v_ref, t, v, step: float = 0.05) -> np.ndarray:
    """Eq. 19 per probe on a common grid of ``step`` ms."""
    t_hi = min(t_ref[-1], t[-1])
    grid = np.arange(0.0, t_hi + 1e-9, step)
    a = resample(t_ref, v_ref, grid)
    b = resample(t, v, grid)
    return np.linalg.norm(a - b, axis=0) / np.linalg.norm(b, axis=0)


def _horizontal_one(t_ref: np.ndarray, v_ref: np.ndarray, tq: float, vq: float) -> float:
    """Distance in t from (tq, vq) to the nearest point of the reference polyline at the same
    V (inverse linear interpolation on every segment that spans vq); inf if none does."""
    v0, v1 = v_ref[:-1], v_ref[1:]
    span = (np.minimum(v0, v1) <= vq) & (np.maximum(v0, v1) >= vq)
    if not span.any():
        return float("inf")
    a, b = v0[span], v1[span]
    dv = b - a
    frac = np.where(dv != 0, (vq - a) / np.where(dv != 0, dv, 1.0), 0.0)
    tc = t_ref[:-1][span] + frac * (t_ref[1:][span] - t_ref[:-1][span])
    return float(np.min(np.abs(tc - tq)))


def interpolated_errors(t_ref, v_ref, t, v) -> tuple[np.ndarray, np.ndarray]:
    """(I_Abs_Error, I_Rel_Error) per probe: max over points of min(vertical, horizontal).

    Points are visited in decreasing vertical error and the walk stops once the vertical
    error cannot beat the running maximum (the result is exact, not sampled)."""
    t_ref = np.asarray(t_ref, float)
    t = np.asarray(t, float)
    v_ref = np.asarray(v_ref, float).reshape(len(t_ref), -1)
    v = np.asarray(v, float).reshape(len(t), -1)
    t_hi = min(t_ref[-1], t[-1])
    keep = t <= t_hi + 1e-9
    abs_err = np.zeros(v.shape[1])
    for p in range(v.shape[1]):
        tq, vq = t[keep], v[keep, p]
        vert = np.abs(vq - np.interp(tq, t_ref, v_ref[:, p]))
        best = 0.0
        for i in np.argsort(-vert):
            if vert[i] <= best:
                break
            best = max(best, min(vert[i], _horizontal_one(t_ref, v_ref[:, p], tq[i], vq[i])))
        abs_err[p] = best
    rel = abs_err / np.maximum(np.abs(v[keep]).max(axis=0), 1e-30)
    return abs_err, rel


def accuracy(t_ref, v_ref, t, v) -> dict[str, float]:
    """The paper's three measures, maximum over probes."""
    r = rrms(t_ref, v_ref, t, v)
    a, rel = interpolated_errors(t_ref, v_ref, t, v)
    return {"rrms": float(np.max(r)), "i_abs_error": float(np.max(a)), "i_rel_error": float(np.max(rel))}


def phase_singularities(v_now: np.ndarray, v_before: np.ndarray, v_mid: float = V_MID) -> np.ndarray:
    """Topological charge (-1, 0 or +1) of each 2x2 plaquette of a sheet's (ny, nx) V maps,
    (ny-1, nx-1): the phase and winding of :mod:`app.sims.cardiac.readouts` (which finds the
    cores on any mesh's triangles) around the grid's squares."""
    theta = phase(v_now, v_before, v_mid)
    a, b, c, d = theta[:-1, :-1], theta[:-1, 1:], theta[1:, 1:], theta[1:, :-1]
    return np.rint((wrap(b - a) + wrap(c - b) + wrap(d - c) + wrap(a - d)) / (2 * np.pi)).astype(int)
