"""Restitution protocols (S1-S2 and dynamic) for any model, and the APD90 vs diastolic
interval curve measured from one cell's voltage trace.

* **S1-S2**: for each coupling interval CI (longest first) a train of ``s1_count`` S1 pulses at
  ``s1_period``, then one S2 pulse CI after the last S1; the next train starts one S1 period
  after the S2.
* **dynamic**: ``beats`` pulses at each period of ``periods`` (longest first, steady-state
  pacing); the last beat of each period is measured.

Two APD90 definitions, both written out (``apd`` picks the one the curve shows):

* ``per_beat``: the beat's own rest (V at its stimulus onset) and peak, as ``apd90_ms`` of a
  run's summary: ``APD90`` ends where V falls below ``peak − 0.9·(peak − rest)`` of that beat;
* ``s1``: repolarisation towards the rest of the reference beat (V at the onset of the train's
  last S1; dynamic: of the longest period's last beat), not towards the V at this beat's own
  onset, which an early beat starts from before the cell has recovered: ``APD90`` ends where V
  falls below ``peak − 0.9·(peak − rest_S1)`` with the beat's own peak (the usual restitution
  definition; on the issue's CRN S2 beat at 330 ms it gives 215.5 ms against 177 ms per beat).

Both start at the beat's max dV/dt. The diastolic interval DI is the time from the previous
beat's repolarisation (same definition) to this beat's max dV/dt.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.sims.cardiac.metrics import beat_metrics

DEFINITIONS = ("per_beat", "s1")


@dataclass(frozen=True)
class Pulse:
    start: float
    role: str          # "S1", "S2", "beat" (dynamic, not measured), "last" (dynamic, measured)
    interval: float    # CI (S1-S2) or the pacing period (dynamic)


def pulses(kind: str, s1_period: float, s1_count: int, s2_intervals, periods, beats: int,
           start: float = 50.0) -> list[Pulse]:
    """Every pulse of the protocol, in time order."""
    out: list[Pulse] = []
    t = start
    if kind == "s1s2":
        for ci in sorted(s2_intervals, reverse=True):
            for _ in range(s1_count):
                out.append(Pulse(t, "S1", ci))
                t += s1_period
            t += ci - s1_period
            out.append(Pulse(t, "S2", ci))
            t += s1_period
    elif kind == "dynamic":
        for period in sorted(periods, reverse=True):
            for k in range(beats):
                out.append(Pulse(t, "last" if k == beats - 1 else "beat", period))
                t += period
    else:
        raise ValueError(f"restitution kind must be s1s2 or dynamic, not {kind!r}")
    return out


def stimuli(plist: list[Pulse], s1_period: float, amplitude: float, duration: float, region,
            Stimulus: type) -> list:
    """The pulses as the config's stimulus entries of class ``Stimulus`` (an S1 train or a
    period's beats is one); the config passes its class (this module never imports it)."""
    out: list = []
    for p in plist:
        period = s1_period if p.role == "S1" else p.interval
        last = out[-1] if out else None
        if (last is not None and p.role in ("S1", "beat", "last") and last.name.startswith(p.role[:2].upper())
                and abs(last.start + last.count * last.period - p.start) < 1e-9 and last.period == period):
            out[-1] = Stimulus(name=last.name, start=last.start, duration=duration, amplitude=amplitude,
                               period=period, count=last.count + 1, region=region)
            continue
        name = {"S1": "S1", "S2": "S2", "beat": "BE", "last": "BE"}[p.role] + f" {p.interval:g}"
        out.append(Stimulus(name=name, start=p.start, duration=duration, amplitude=amplitude,
                            period=period, count=1, region=region))
    return out


def protocol_end(plist: list[Pulse], s1_period: float) -> float:
    """Enough time after the last pulse for its beat to repolarise."""
    last = plist[-1]
    return last.start + max(s1_period, last.interval)


def _repolarisation(t, v, t_up: float, rest: float, peak: float, t_end: float) -> float:
    """Time of the downward crossing of peak - 0.9 (peak - rest) after the upstroke."""
    v90 = peak - 0.9 * (peak - rest)
    sel = np.flatnonzero((t >= t_up) & (t < t_end))
    if len(sel) < 2:
        return float("nan")
    vv, tt = v[sel], t[sel]
    ip = int(np.argmax(vv))
    below = np.flatnonzero(vv[ip:] <= v90)
    if len(below) == 0 or ip + below[0] == 0:
        return float("nan")
    k = ip + int(below[0])
    return float(tt[k - 1] + (v90 - vv[k - 1]) * (tt[k] - tt[k - 1]) / (vv[k] - vv[k - 1]))


def curve(t: np.ndarray, v: np.ndarray, plist: list[Pulse], dvdt: np.ndarray | None = None,
          t_end: float | None = None) -> list[dict]:
    """One row per measured beat (S2s, or each period's last beat) that the trace covers:
    interval, DI and APD90 by both definitions."""
    t, v = np.asarray(t, float), np.asarray(v, float)
    if len(t) < 2:
        return []
    t_end = float(t[-1]) if t_end is None else t_end
    beats = []
    for i, p in enumerate(plist):
        nxt = plist[i + 1].start if i + 1 < len(plist) else t_end
        if nxt > t[-1] + 1e-9:
            break
        m = beat_metrics(t, v, p.start, dvdt, window=nxt - p.start)
        m["t_rep_own"] = m["t_upstroke_ms"] + m["apd90_ms"]
        beats.append((p, m, nxt))
    rows = []
    ref = None
    for i, (p, m, nxt) in enumerate(beats):
        if p.role == "S1":
            ref = m
        if p.role == "last" and ref is None:
            ref = m                        # dynamic: the longest period's steady beat
        if p.role not in ("S2", "last") or i == 0:
            continue
        prev = beats[i - 1][1]
        t_up = m["t_upstroke_ms"]
        t_rep_s1 = _repolarisation(t, v, t_up, ref["rest_mV"], m["peak_mV"], nxt)
        prev_rep_s1 = _repolarisation(t, v, prev["t_upstroke_ms"], ref["rest_mV"], prev["peak_mV"],
                                      p.start + 1e-9) if prev is not ref else prev["t_rep_own"]
        rows.append({
            "protocol": "S1-S2" if p.role == "S2" else "dynamic", "interval_ms": p.interval,
            "t_upstroke_ms": t_up, "peak_mV": m["peak_mV"],
            "apd90_per_beat_ms": m["apd90_ms"], "di_per_beat_ms": t_up - prev["t_rep_own"],
            "apd90_s1_ms": t_rep_s1 - t_up, "di_s1_ms": t_up - prev_rep_s1,
        })
    return rows
