"""Every shipped model's single cell against its CVODE reference (resources/reference/cardiac,
made by scripts/cardiac/make_references.py with Myokit's CVODES at 1e-8).

On the CPU (here): the first beat of each paced preset (the reference keeps every beat) and
the self-oscillating Noble preset as it is; the three models whose adaptive runs need ~9,000
steps a beat (Nygren, Maleckar, Mahajan) only through the upstroke here, their full ten beats
in the GPU test (test_cuda_models.py) and in the README table. Tolerances: APD90 1 % (the
issue's bound for the adaptive solvers at tight tolerance), peak 1 mV, rest 0.5 mV, max dV/dt
2 % (it is sampled at the accepted steps).
"""

import functools
import json
from dataclasses import replace

import numpy as np
import pytest

from app.sims.cardiac.simulation import CardiacSimulation
from app.sims.common.simulation import PRESETS, load_run_config

from .test_model import TEN

REFERENCES = PRESETS.parent / "reference" / "cardiac"
STIFF = {"nygren_atrial_model_1998", "maleckar_model_2009", "mahajan_shiferaw_2008"}


@functools.lru_cache(maxsize=None)
def presets() -> dict:
    """Model name -> its single-cell preset's config."""
    out = {}
    for path in sorted((PRESETS / "cardiac").glob("1*.yaml")):
        _, cfg = load_run_config(path)
        out[cfg.model.file] = cfg
    return out


def preset(name: str):
    return presets()[name]


def reference(name: str) -> dict:
    return json.loads((REFERENCES / f"{name}.json").read_text())


def run(cfg) -> dict:
    sim = CardiacSimulation(cfg, "cpu")
    while not sim.finished:
        sim.advance()
    return sim.results()


def first_beat(cfg, t_end: float | None = None):
    """The preset cut to its first paced beat (or to ``t_end``)."""
    if not cfg.protocol.stimuli:
        return cfg
    s = cfg.protocol.stimuli[0]
    return replace(cfg, protocol=replace(cfg.protocol, t_end=t_end or s.start + s.period,
                                         stimuli=[replace(s, count=1)]))


def test_every_model_has_a_preset_and_a_reference():
    for name in TEN:
        cfg = preset(name)
        ref = reference(name)
        assert ref["preset"] and len(ref["beats"]) == max(1, cfg.protocol.stimuli[0].count if cfg.protocol.stimuli else 1)
        trace = np.loadtxt(REFERENCES / f"{name}.csv", delimiter=",", skiprows=1)
        assert trace.shape[1] == 2 and trace[-1, 0] > 400.0
        peak = ref["last"]["peak_mV"]        # the trace is that beat (HH's spike is narrower than 0.5 ms)
        assert abs(trace[:, 1].max() - peak) < max(1.0, 0.05 * abs(peak))


def test_crn_reference_reproduces_the_shared_cvode_numbers():
    """The script's CRN reference (Chaste's annotated file, Myokit CVODE) equals the reference
    collected with the first CRN implementation (PMR file, myokit 1.39.2): beat 10."""
    last = reference("courtemanche_ramirez_nattel_1998")["last"]
    assert round(last["apd90_ms"], 2) == 298.05
    assert round(last["peak_mV"], 2) == 24.33 and round(last["rest_mV"], 2) == -80.87
    assert round(last["max_dvdt"], 1) == 217.7


def check(summary: dict, ref: dict, apd: bool = True) -> None:
    assert abs(summary["peak_mV"] - ref["peak_mV"]) < 1.0
    assert abs(summary["rest_mV"] - ref["rest_mV"]) < 0.5
    assert abs(summary["max_dvdt"] - ref["max_dvdt"]) < 0.02 * abs(ref["max_dvdt"])
    if apd:
        assert abs(summary["apd90_ms"] - ref["apd90_ms"]) < 0.01 * ref["apd90_ms"]


@pytest.mark.parametrize("name", sorted(set(TEN) - STIFF))
def test_first_beat_matches_cvode(name):
    cfg = preset(name)
    _, summary = run(first_beat(cfg))
    ref = reference(name)
    check(summary, ref["beats"][0] if cfg.protocol.stimuli else ref["last"])


@pytest.mark.parametrize("name", sorted(STIFF))
def test_stiff_models_upstroke_matches_cvode(name):
    cfg = preset(name)
    s = cfg.protocol.stimuli[0]
    _, summary = run(first_beat(cfg, s.start + 30.0))
    check(summary, reference(name)["beats"][0], apd=False)


@pytest.mark.parametrize("name", ["ohara_rudy_2011_endo", "courtemanche_ramirez_nattel_1998",
                                  "ten_tusscher_model_2006_epi"])
def test_first_beat_with_lookup_tables_matches_cvode(name):
    """The voltage lookup tables (solver.lookup_tables, 0.02 mV) keep the CVODE bounds (with
    the adaptive explicit method: CVODE evaluates the model itself)."""
    cfg = preset(name)
    cfg = replace(cfg, solver=replace(cfg.solver, method="bs32", dt=0.01, at=1e-4, rt=1e-5, dt_max=5.0,
                                      precision="float64", lookup_tables=True))
    _, summary = run(first_beat(cfg))
    check(summary, reference(name)["beats"][0])
