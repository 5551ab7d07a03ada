"""The CUDA engine's host side of fixed steps (no control kernel: the host counts the steps,
passes their index, alternates the neighbours' V buffers, launches ``record`` on recorded steps
and settles the control block at each sync), run without a GPU against a stand-in device: the same steps, record times, end and
stop as the CPU engine and as the device-side control it replaces."""

from types import SimpleNamespace

import numpy as np

from app.sims.cardiac import cuda as cuda_engine
from app.sims.cardiac.cuda import CD_N, CD_T, CD_TPREV, CI_ACC, CI_DONE, CI_N, CI_PARITY, CI_STATUS, CudaTissue
from app.sims.cardiac.engine import Problem

from .helpers import config, run

TEXT = ("mesh: {kind: sheet, nx: 3, ny: 1, dx_mm: 0.2}\n"
        "protocol: {t_end: %s, stimuli: [{start: 1, duration: 2, amplitude: -40, region: {kind: cells, cells: [0]}}]}\n"
        "solver: {method: %s, dt: %s, precision: float64}\noutput: {random_probes: 0, probe_cells: [1], dt_save: 0.5}\n")


class Launches:
    """A kernel that keeps its launches' arguments."""

    def __init__(self):
        self.calls = []

    def prepared_async_call(self, grid, block, stream, *args):
        self.calls.append(args)


class DeviceArray:
    """A control block on the stand-in device."""

    def __init__(self, values):
        self.values = np.array(values)
        self.gpudata = 0

    def get(self):
        return self.values.copy()

    def set(self, values):
        self.values = np.array(values, self.values.dtype)


def host_only_engine(problem: Problem) -> CudaTissue:
    eng = object.__new__(CudaTissue)
    buffer = SimpleNamespace(gpudata=0)
    eng.p, eng.stages, eng._record, eng._observe = problem, [Launches()], Launches(), Launches()
    eng.stream, eng._grid = SimpleNamespace(synchronize=lambda: None), (1, 1)
    eng.YA = eng.YB = eng.K = eng.nbr = eng.w = eng.mask = eng.maps = eng.pfield = eng.probes = buffer
    eng.rec_t = eng.rec_v = eng.h_hist = buffer
    eng.Vst = [SimpleNamespace(gpudata=1), SimpleNamespace(gpudata=2)]
    eng.cd, eng.ci = DeviceArray(np.zeros(CD_N)), DeviceArray(np.zeros(CI_N, np.int32))
    eng.chunk, eng.rec_cap, eng.h_cap = cuda_engine.CHUNK_FIXED, cuda_engine.CHUNK_FIXED + 2, 1
    eng.h_history, eng._n_hist, eng._probe_t, eng._probe_v = [], 0, [0.0], []
    eng.t, eng.steps_accepted, eng.steps_rejected, eng.done = 0.0, 0, 0, False
    eng._observed_final = False
    return eng


def test_fixed_steps_counted_and_recorded_like_the_cpu_engine():
    text = TEXT % (12.0, "midpoint", 0.02)
    eng = host_only_engine(Problem.from_config(config(text)))
    eng.run_to_end()
    arrays, summary = run(text, "cpu-reference")
    steps = summary["steps_accepted"]
    assert eng.steps_accepted == steps == 600 and eng.done
    assert [int(c[-1]) for c in eng.stages[0].calls] == list(range(steps))   # the step index
    record_t = [float(c[-1]) for c in eng._record.calls]
    np.testing.assert_allclose(record_t, arrays["probe_t"][1:], rtol=0, atol=1e-12)
    cd, ci = eng.cd.values, eng.ci.values                          # what the control kernel kept
    assert ci[CI_ACC] == steps and ci[CI_PARITY] == 0 and ci[CI_DONE] == 1
    assert cd[CD_T] == steps * 0.02 and cd[CD_TPREV] == (steps - 1) * 0.02
    assert len(eng._observe.calls) == 1                             # the last state observed


def test_fixed_steps_end_where_the_control_kernel_ended():
    """t_end / dt = 103.5: the step count rounds to 104 but the run ends at t >= t_end - dt/2,
    on step 103 (the old control kernel's test), whatever the chunks."""
    problem = Problem.from_config(config(TEXT % (51.75, "rlfe", 0.5)))
    assert problem.fixed_steps == 104
    eng = host_only_engine(problem)
    while not eng.finished:
        eng.advance(40)
    assert eng.steps_accepted == 103 and len(eng.stages[0].calls) == 103
    assert eng._record.calls[-1][-1] == 103 * 0.5


def test_blowup_takes_the_stopped_steps_counters():
    """After a blow-up the stage kernel wrote the stopped step's counters: the host keeps them
    (and raises), not its own count of launched steps."""
    import pytest

    from app.sims.cardiac.engine import RunStopped
    eng = host_only_engine(Problem.from_config(config(TEXT % (12.0, "rlfe", 0.02))))
    eng.steps_accepted, eng.done = 37, False
    ci = eng.ci.values
    ci[CI_STATUS], ci[CI_ACC], ci[CI_PARITY], ci[CI_DONE] = cuda_engine.ST_BLOWUP, 20, 0, 1
    eng.cd.values[CD_T] = 20 * 0.02
    eng._current = lambda: np.full((1, 3), np.nan)
    with pytest.raises(RunStopped):
        eng._sync()
    assert (eng.steps_accepted, eng.t, eng.done) == (20, 20 * 0.02, True)
    assert eng.ci.values[CI_ACC] == 20


def test_fixed_steps_pass_the_neighbours_voltage_on():
    """In place, a stage reads the neighbours' V from one buffer and writes the next stage's
    (the last stage: the next step's) to the other, across steps and chunks: midpoint (two
    stages) and RLFE (one)."""
    for method, stages in (("midpoint", 2), ("rlfe", 1)):
        eng = host_only_engine(Problem.from_config(config(TEXT % (2.0, method, 0.02))))
        eng.stages = [Launches() for _ in range(stages)]
        while not eng.finished:
            eng.advance(7)
        launches = [call for calls in zip(*(f.calls for f in eng.stages)) for call in calls]
        reads = [call[3] for call in launches]
        writes = [call[4] for call in launches]
        assert reads == [1 + i % 2 for i in range(len(launches))]          # slots 0, 1, 0, ...
        assert writes[:-1] == reads[1:]                                   # each reads the last write
