"""Single cells paced as the field compares them (20 beats at 1 Hz with the model's annotated
stimulus): Myokit's CVODES at 1e-8 (the reference) and the app's run, each timed without its
compilation. Used by ``python -m app bench cardiac --single-cell`` and
``scripts/cardiac/cellml_corpus.py``.

* Myokit: the model's stimulus variable is replaced by Myokit's pacing variable times the
  amplitude in the model's units (the importer's stimulus scale, checked: dV/dt changes by
  exactly -amplitude); abs = rel tolerance 1e-8, max step 1 ms; the time is that of a run of all
  the beats logging V at every step (Myokit's default), then the first and last beats are rerun
  logged every 0.005 ms (V and dV/dt) for the metrics. A model without an annotated stimulus
  runs unpaced and its last spontaneous beat is measured.
* ours: ``CardiacSimulation`` on the CPU with the given solver block (default: the single-cell
  default, CVODE); time = the engine's seconds, compilation (or the numba cache load) excluded.

Metrics: :func:`app.sims.cardiac.metrics.beat_metrics` (APD90 from the time of max dV/dt).
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np

TOLERANCE = 1e-8
BEATS = 20
PERIOD = 1000.0
LOG_STEP = 0.005
SINGLE_CELL = "{}"                    # the single-cell defaults (CVODE)


def _sundials(myokit) -> None:
    """Debian's SUNDIALS (libsundials-dev) where Myokit does not look by default."""
    for lib, inc in (("/usr/lib/x86_64-linux-gnu", "/usr/include"),):
        if lib not in myokit.SUNDIALS_LIB:
            myokit.SUNDIALS_LIB.append(lib)
        if inc not in myokit.SUNDIALS_INC:
            myokit.SUNDIALS_INC.append(inc)


def protocol(model, beats: int = BEATS) -> dict | None:
    """The protocol from the model's annotations (None: no annotated stimulus): its amplitude,
    duration and offset, every :data:`PERIOD` ms, ``beats`` pulses."""
    ann = model.imported.default_stimulus
    if not ann.get("amplitude"):               # none annotated, or 0 (the file's stimulus is off)
        return None
    return {"amplitude": ann["amplitude"], "duration": ann.get("duration", 2.0),
            "start": ann.get("start", 0.0), "period": PERIOD, "count": beats}


def reference(path: Path, model, stim: dict | None, beats: int = BEATS) -> dict:
    """Myokit's CVODES run of ``path`` (see the module's text): seconds, the first and last
    beats' metrics."""
    import myokit
    import myokit.formats.cellml as mcellml

    from app.sims.cardiac.metrics import beat_metrics, spontaneous_beat
    _sundials(myokit)
    m = mcellml.CellMLImporter().model(str(path))
    m.time().convert_unit("ms")
    v = m.get(model.states[0])
    v.convert_unit("mV")
    states = [x.qname() for x in m.states()]
    if stim is not None:
        s = m.get(model.imported.annotations["membrane_stimulus_current"])
        pace = m.get(s.parent().qname()).add_variable_allow_renaming("pace")
        pace.set_rhs(0)
        pace.set_binding("pace")
        s.set_rhs(myokit.Multiply(myokit.Name(pace), myokit.Number(stim["amplitude"] * model.imported.stimulus_scale)))
        d0 = m.evaluate_derivatives(ignore_errors=True)[states.index(v.qname())]
        pace.set_rhs(1)
        d1 = m.evaluate_derivatives(ignore_errors=True)[states.index(v.qname())]
        pace.set_rhs(0)
        if abs((d1 - d0) + stim["amplitude"]) > 1e-6 * max(1.0, abs(stim["amplitude"])):
            raise RuntimeError(f"stimulus check: dV/dt changes by {d1 - d0:g}, not {-stim['amplitude']:g}")
        proto = myokit.pacing.blocktrain(PERIOD, stim["duration"], offset=stim["start"], level=1.0, limit=beats)
    else:
        proto = myokit.Protocol()
    t_end = beats * PERIOD + (stim["start"] if stim else 0.0)
    names = [m.time().qname(), v.qname(), f"dot({v.qname()})"]

    def simulation():
        sim = myokit.Simulation(m, proto)
        sim.set_tolerance(TOLERANCE, TOLERANCE)
        sim.set_max_step_size(1.0)
        return sim

    sim = simulation()
    start = time.perf_counter()
    sim.run(t_end, log=[v.qname()])
    seconds = time.perf_counter() - start
    sim.reset()
    measured = []
    if stim is None:
        log = sim.run(t_end, log=names, log_interval=LOG_STEP)
        t, vv, dv = (np.asarray(log[n]) for n in names)
        found = spontaneous_beat(t, vv)
        if found is None:
            return {"seconds": seconds, "beats": [], "last": None}
        onset, window = found
        measured.append({**beat_metrics(t, vv, onset, dv, window), "onset_ms": onset})
    else:
        t_now = 0.0
        for k in range(beats):
            onset = stim["start"] + k * PERIOD
            if onset > t_now:
                sim.run(onset - t_now, log=myokit.LOG_NONE)
                t_now = onset
            keep = k in (0, beats - 1)
            log = sim.run(PERIOD, log=names if keep else myokit.LOG_NONE, log_interval=LOG_STEP if keep else None)
            t_now += PERIOD
            if keep:
                t, vv, dv = (np.asarray(log[n]) for n in names)
                measured.append({**beat_metrics(t, vv, onset, dv, PERIOD), "onset_ms": onset})
    return {"seconds": seconds, "beats": measured, "last": measured[-1]}


def ours(path: Path, stim: dict | None, solver: str = SINGLE_CELL, mesh: str = "{kind: single}",
         beats: int = BEATS, backend: str = "cpu", save: float = 0.0, budget_s: float | None = None) -> dict:
    """The app's run of ``path`` with ``stim`` (beats at 1 Hz), the ``solver`` block and ``mesh``,
    recording every ``save`` ms (0: every step): the analysed beat's metrics (a tissue: cell 0's
    last beat), the solver run, steps, seconds. A run still going after ``budget_s`` seconds
    stops cleanly (no process is killed: under MPS that can take the GPU's other clients down)
    and returns ``out_of_time_s``, the simulated ms reached and the steps."""
    from app.compute.device import backend_context
    from app.sims.cardiac.config import load_config
    from app.sims.cardiac.simulation import CardiacSimulation
    from app.sims.common.config import parse_yaml

    if stim is not None:
        pulses = (f"stimuli: [{{start: {stim['start']!r}, duration: {stim['duration']!r}, amplitude: "
                  f"{stim['amplitude']!r}, period: {PERIOD!r}, count: {beats}}}]")
        t_end = stim["start"] + beats * PERIOD
    else:
        pulses, t_end = "stimuli: []", beats * PERIOD
    text = (f"domain: cardiac\nmodel: {{file: '{path}'}}\nmesh: {mesh}\n"
            f"protocol: {{t_end: {t_end!r}, {pulses}}}\nsolver: {solver}\n"
            f"output: {{random_probes: 0, probe_cells: [0], dt_save: {save!r}}}\n")
    cfg = load_config(parse_yaml(text, str(path)))
    deadline = time.perf_counter() + budget_s if budget_s else math.inf
    with backend_context(backend):           # CUDA: the device's context in this thread
        sim = CardiacSimulation(cfg, backend)
        try:
            while not sim.finished:
                sim.advance()
                if time.perf_counter() > deadline:
                    return {"out_of_time_s": budget_s, "t_ms": float(sim.engine.t), "t_end_ms": t_end,
                            "steps_accepted": int(sim.engine.steps_accepted)}
            arrays, summary = sim.results()
        finally:
            sim.close()
    out = {k: summary.get(k) for k in ("apd90_ms", "peak_mV", "rest_mV", "max_dvdt", "steps_accepted",
                                      "wall_seconds", "compile_seconds", "finished", "method", "precision")}
    out["engine_seconds"] = summary["wall_seconds"] - summary.get("compile_seconds", 0.0)
    out["stopped"] = summary.get("stopped", {}).get("reason", "")
    if "apd90_ms" not in summary and stim is not None:     # tissue: cell 0's probe trace
        from app.sims.cardiac.metrics import beat_metrics
        t, v = arrays["probe_t"], arrays["probe_V"][:, 0]
        onset = stim["start"] + (beats - 1) * PERIOD
        out.update({k: beat_metrics(t, v, onset, None, PERIOD)[k] for k in ("apd90_ms", "peak_mV", "rest_mV")})
    return out


