"""Estimates: per model class (never carried over from another model), a range, the compile
added while the engine is cold."""

from __future__ import annotations

from app.sims.common.estimate import estimate_range, format_range, model_class, rate_key, work
from app.sims.common.simulation import PRESETS, load_run_config


def _cfg(domain, preset, *overrides):
    return load_run_config(PRESETS / domain / preset, overrides=list(overrides))[1]


def test_sizes_and_seeds_keep_the_class_and_a_model_changes_it():
    base = _cfg("ssa", "00-decay-dimerization.yaml")
    bigger = _cfg("ssa", "00-decay-dimerization.yaml", "ensemble.realizations=4096",
                  "ensemble.seed=5")
    other = _cfg("ssa", "birth-death.yaml")
    assert model_class("ssa", base) == model_class("ssa", bigger)
    assert model_class("ssa", base) != model_class("ssa", other)
    assert work("ssa", bigger) == 8 * work("ssa", base)


def test_a_rate_of_one_model_is_never_used_for_another():
    dimer = _cfg("ssa", "00-decay-dimerization.yaml")
    other = _cfg("ssa", "birth-death.yaml", "model.parameters.k=11.0")   # no shipped rate
    rates = {rate_key("ssa", other, "cpu"): 1e12}         # a tiny run of another model (events/s)
    low, high = estimate_range("ssa", dimer, "cpu", rates)
    assert low > 0.01                                      # the shipped rate of its own class
    assert estimate_range("ssa", other, "cpu", {}) is None  # never measured: no estimate
    low2, high2 = estimate_range("ssa", other, "cpu", rates)
    assert high2 < 1e-3


def test_the_cold_compile_widens_the_range_on_the_cpu_only():
    cfg = _cfg("epidermis", "lesson-first-divisions.yaml")
    warm = estimate_range("epidermis", cfg, "cpu")
    cold = estimate_range("epidermis", cfg, "cpu", cold=True)
    assert cold[0] == warm[0] and cold[1] > warm[1] + 30
    assert format_range(5, 14) == "5-14 s" and format_range(30, 300) == "30 s-5 min"


def test_an_estimate_reads_only_its_own_domain_and_survives_a_missing_myokit():
    """The desktop bundle leaves Myokit out: an SSA run's estimate once loaded every domain's
    shipped presets, the cardiac CellML ones included, and the run died with 'CellML import
    needs Myokit'. In a child process, where Myokit is made unimportable."""
    import subprocess
    import sys

    code = ("import sys; sys.modules['myokit'] = None\n"
            "from app.sims.common.estimate import estimate_range\n"
            "from app.sims.common.simulation import load_run_config, find_preset\n"
            "cfg = load_run_config(find_preset('birth-death'))[1]\n"
            "print(estimate_range('ssa', cfg, 'cpu'))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr


def test_a_restitution_protocol_is_sized_by_its_intervals_and_keeps_its_class():
    full = _cfg("cardiac", "20-restitution-crn-s1s2.yaml")
    one = _cfg("cardiac", "20-restitution-crn-s1s2.yaml", "restitution.s2_intervals=[600]")
    other = _cfg("cardiac", "20-restitution-crn-s1s2.yaml", "restitution.amplitude=-25")
    assert model_class("cardiac", one) == model_class("cardiac", full) != model_class("cardiac", other)
    assert work("cardiac", one) / work("cardiac", full) == one.protocol.t_end / full.protocol.t_end < 0.25


def test_the_epidermis_work_counts_the_elements_the_basal_cells_add():
    """Each step's work is the tissue's elements then: the initial cells' plus one per growing
    (initial basal) cell per growth event so far; the relaxation's steps hold the initial ones."""
    def at(steps, mode="full"):
        return work("epidermis", _cfg("epidermis", "small-cpu-demo.yaml", f"run.steps={steps}",
                                      f"run.mode={mode}"))

    cells, elements, interval, relax = 16, 20, 200, 500
    assert at(1) == cells * elements * (relax + 1)
    for step in (1, 199, 200, 4321, 15999):
        assert at(step + 1) - at(step) == cells * elements + cells * (step // interval)
    assert at(16000, "movement") == cells * elements * (relax + 16000)
