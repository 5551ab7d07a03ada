"""Independent single-cell references for the shipped cardiac models: Myokit's CVODE simulation
(SUNDIALS CVODES, BDF/Newton, abs/rel tolerance 1e-8) of each CellML file, paced as its
preset paces it, written to resources/reference/cardiac/<model>.json (per-beat rest, peak,
max dV/dt, APD90) and <model>.csv (the last beat, t from its stimulus onset, every 0.5 ms).

Myokit imports the file and converts units on its own (time to ms, V to mV); the model's
stimulus variable is replaced by Myokit's pacing variable times the amplitude in the model's
own units (our µA/µF amplitude times the importer's stimulus scale; this is the one number
taken from our importer, and it is checked: dV/dt must change by exactly -amplitude). Myokit
logs V and dV/dt every 0.005 ms of each beat through CVODE's dense output; the metrics use
app.sims.cardiac.metrics.beat_metrics, the definitions our runs report (APD90 from the time
of max dV/dt, rest at the stimulus onset).

Needs SUNDIALS (``apt-get install libsundials-dev``); run from the repository root:
``python scripts/cardiac/make_references.py [model ...]``.
"""

import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import myokit  # noqa: E402
import myokit.formats.cellml as mcellml  # noqa: E402

from app.sims.cardiac.metrics import beat_metrics, spontaneous_beat  # noqa: E402
from app.sims.cardiac.model import load_model, shipped_models  # noqa: E402
from app.sims.common.simulation import PRESETS, load_run_config  # noqa: E402

OUT = ROOT / "resources" / "reference" / "cardiac"
TOLERANCE = 1e-8
LOG_STEP = 0.005
for lib, inc in (("/usr/lib/x86_64-linux-gnu", "/usr/include"),):
    if lib not in myokit.SUNDIALS_LIB:
        myokit.SUNDIALS_LIB.append(lib)
    if inc not in myokit.SUNDIALS_INC:
        myokit.SUNDIALS_INC.append(inc)


def preset_of(name: str) -> Path:
    for path in sorted((PRESETS / "cardiac").glob("1*.yaml")):
        _, cfg = load_run_config(path)
        if cfg.model.file == name and cfg.mesh.kind == "single":
            return path
    raise SystemExit(f"no single-cell preset for {name}")


def reference(name: str) -> dict:
    path = preset_of(name)
    _, cfg = load_run_config(path)
    ours = load_model(name)
    stim = cfg.protocol.stimuli[0] if cfg.protocol.stimuli and cfg.protocol.stimuli[0].amplitude else None
    m = mcellml.CellMLImporter().model(str(shipped_models()[name]))
    m.time().convert_unit("ms")
    v = m.get(ours.states[0])
    v.convert_unit("mV")
    s = m.get(ours.imported.annotations["membrane_stimulus_current"])
    pace = m.get(s.parent().qname()).add_variable_allow_renaming("pace")
    pace.set_rhs(0)
    pace.set_binding("pace")
    amplitude = stim.amplitude if stim else 0.0
    s.set_rhs(myokit.Multiply(myokit.Name(pace), myokit.Number(amplitude * ours.imported.stimulus_scale)))
    # the check: dV/dt changes by -amplitude when the pulse is on
    d0 = m.evaluate_derivatives()[[x.qname() for x in m.states()].index(v.qname())]
    pace.set_rhs(1)
    d1 = m.evaluate_derivatives()[[x.qname() for x in m.states()].index(v.qname())]
    pace.set_rhs(0)
    assert abs((d1 - d0) + amplitude) <= 1e-9 * max(1.0, abs(amplitude)), (d1 - d0, amplitude)
    protocol = myokit.Protocol()
    if stim:
        protocol = myokit.pacing.blocktrain(stim.period, stim.duration, offset=stim.start,
                                            level=1.0, limit=stim.count)
    sim = myokit.Simulation(m, protocol)
    sim.set_tolerance(TOLERANCE, TOLERANCE)
    sim.set_max_step_size(1.0)
    names = [m.time().qname(), v.qname(), f"dot({v.qname()})"]
    beats, trace = [], None
    if stim is None:            # self-oscillating: the last spontaneous beat, as our runs report it
        log = sim.run(cfg.protocol.t_end, log=names, log_interval=LOG_STEP)
        t, vv, dv = (np.asarray(log[n]) for n in names)
        onset, window = spontaneous_beat(t, vv, cfg.output.activation_threshold)
        metrics = beat_metrics(t, vv, onset, dv, window)
        metrics["onset_ms"] = onset
        beats.append(metrics)
        sel = (t >= onset) & (t <= onset + window)
        trace = (t[sel] - onset, vv[sel])
    else:
        t_now = 0.0
        for onset in [stim.start + k * stim.period for k in range(stim.count)]:
            if onset > t_now:
                sim.run(onset - t_now, log=myokit.LOG_NONE)
                t_now = onset
            span = min(stim.period, cfg.protocol.t_end - onset)
            log = sim.run(span, log=names, log_interval=LOG_STEP)
            t_now += span
            t, vv, dv = (np.asarray(log[n]) for n in names)
            metrics = beat_metrics(t, vv, onset, dv, window=span)
            metrics["onset_ms"] = onset
            beats.append(metrics)
            trace = (t - onset, vv)
    summary = {
        "model": name, "preset": path.name,
        "simulator": f"myokit {myokit.__version__}, CVODES (SUNDIALS {myokit.Sundials.version()}), "
                     f"abs_tol = rel_tol = {TOLERANCE:g}, max step 1 ms, logged every {LOG_STEP} ms",
        "protocol": (f"{stim.count} pulses of {stim.amplitude:g} uA/uF (model stimulus x "
                     f"{ours.imported.stimulus_scale:g}) for {stim.duration:g} ms every {stim.period:g} ms "
                     f"from {stim.start:g} ms" if stim else f"no stimulus, {cfg.protocol.t_end:g} ms"),
        "definitions": "rest: V at the stimulus onset; APD90 from the time of max dV/dt to the 90% "
                       "repolarisation crossing of peak - 0.9 (peak - rest); max dV/dt from the model RHS",
        "beats": beats, "last": beats[-1],
    }
    grid = np.arange(0.0, trace[0][-1], 0.5)
    csv = np.column_stack([grid, np.interp(grid, *trace)])
    OUT.mkdir(parents=True, exist_ok=True)
    np.savetxt(OUT / f"{name}.csv", csv, delimiter=",", fmt="%.4f", header="t_ms,V_mV", comments="")
    (OUT / f"{name}.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary


def main(names: list[str]) -> None:
    for name in names or [n for n in shipped_models() if n != "courtemanche_1998_ikach"]:
        start = time.perf_counter()
        s = reference(name)["last"]
        print(f"{name:48s} APD90 {s['apd90_ms']:8.2f} ms  peak {s['peak_mV']:6.2f}  rest {s['rest_mV']:7.2f}  "
              f"max dV/dt {s['max_dvdt']:7.1f}  ({time.perf_counter() - start:.0f} s)", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
