"""The CUDA engine's host side of fixed steps (no control kernel: the host counts the steps,
passes their index, alternates the neighbours' V buffers, has the next step record a due
state or launches ``record`` before a read, and settles the control block at each sync), run without a GPU against a stand-in device: the same steps, record times, end and
stop as the CPU engine and as the device-side control it replaces."""

import functools
from types import SimpleNamespace

import numpy as np

from app.sims.cardiac import cuda as cuda_engine
from app.sims.cardiac.cuda import CD_N, CD_T, CD_TPREV, CI_ACC, CI_DONE, CI_N, CI_PARITY, CI_STATUS, CudaTissue
from app.sims.cardiac.engine import Problem, Rows
from app.sims.cardiac.node_order import NodeOrder

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


class StageLaunch:
    """A packed stage-kernel launch (one per V slot) that logs (stage, slot, step, recording slot)."""

    def __init__(self, log: list, stage: int, slot: int):
        self.log, self.stage, self.slot = log, stage, slot

    def __call__(self, a15: int, a16: int):
        self.log.append((self.stage, self.slot, a15, a16))


def stage_launches(stages: int) -> tuple[list, list]:
    log = []
    return log, [[StageLaunch(log, i, slot) for slot in (0, 1)] for i in range(stages)]


class DeviceArray:
    """A control block on the stand-in device."""

    def __init__(self, values):
        self.values = np.array(values)
        self.gpudata = 0

    def get(self):
        return self.values.copy()

    def set(self, values):
        self.values = np.array(values, self.values.dtype)


class Snapshots:
    """The V snapshots of a fixed-step run on the stand-in device: V is the step's time; a
    block of 8."""

    def __init__(self, n: int):
        self.n, self.times = n, []

    @property
    def full(self) -> bool:
        return len(self.times) == 8

    def take(self, v, stream, t: float) -> None:
        self.times.append(t)

    def drain(self, stream, before: float = np.inf) -> list:
        kept, self.times = [(t, np.full(self.n, t)) for t in self.times if t < before], []
        return kept


def host_only_engine(problem: Problem) -> CudaTissue:
    eng = object.__new__(CudaTissue)
    buffer = SimpleNamespace(gpudata=0)
    eng.p, eng._record, eng._observe = problem, Launches(), Launches()
    eng.order = NodeOrder.identity(problem.n_cells)
    eng.log, eng._stage_launches = stage_launches(problem.tableau.stages)
    eng.stages = eng._stage_launches
    eng.stream, eng._grid = SimpleNamespace(synchronize=lambda: None), (1, 1)
    eng.YA = eng.YB = eng.K = eng.nbr = eng.w = eng.mask = eng.maps = eng.pfield = eng.probes = buffer
    eng.h_hist = buffer
    eng.Vst = [SimpleNamespace(gpudata=1), SimpleNamespace(gpudata=2)]
    eng.cd, eng.ci = DeviceArray(np.zeros(CD_N)), DeviceArray(np.zeros(CI_N, np.int32))
    eng.chunk, eng.rec_cap, eng.h_cap = cuda_engine.CHUNK_FIXED, cuda_engine.CHUNK_FIXED + 2, 1
    eng.rec_t, eng.rec_v = DeviceArray(np.zeros(eng.rec_cap)), DeviceArray(np.zeros(eng.rec_cap))   # one probe
    eng.h_history, eng._n_hist, eng._probe_t, eng._probe_v = [], 0, Rows(0.0), Rows(np.zeros(1))   # one probe
    eng.t, eng.steps_accepted, eng.steps_rejected, eng.done = 0.0, 0, 0, False
    eng._observed_final = False
    eng.grids, eng._dues, eng._pause, eng._snapshot_stop = [], [], np.inf, np.inf
    eng._snapshots = Snapshots(problem.n_cells)
    eng.fused = eng.split = False       # fixed steps: a launch per stage
    eng._reset_recording()
    return eng


def test_fixed_steps_counted_and_recorded_like_the_cpu_engine():
    text = TEXT % (12.0, "midpoint", 0.02)
    eng = host_only_engine(Problem.from_config(config(text)))
    eng.run_to_end()
    arrays, summary = run(text, "cpu-reference")
    steps = summary["steps_accepted"]
    assert eng.steps_accepted == steps == 600 and eng.done
    first = [(step, slot) for stage, _, step, slot in eng.log if stage == 0]
    assert [step for step, _ in first] == list(range(steps))               # the step index
    # a due state is recorded by the next step's first stage (at its start time), or by the
    # record kernel when a read (the chunk's sync) comes first: 600 / 500-step chunks
    by_stage = [step * 0.02 for step, slot in first if slot >= 0]
    by_kernel = [float(c[-2]) for c in eng._record.calls]
    assert len(by_kernel) == 2
    np.testing.assert_allclose(sorted(by_stage + by_kernel), arrays["probe_t"][1:], rtol=0, atol=1e-12)
    assert [slot for _, slot in first if slot >= 0][:3] == [0, 1, 2]
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
    assert eng.steps_accepted == 103 and len(eng.log) == 103
    assert eng._record.calls[-1][-2] == 103 * 0.5


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
    for method in ("midpoint", "rlfe"):
        eng = host_only_engine(Problem.from_config(config(TEXT % (2.0, method, 0.02))))
        while not eng.finished:
            eng.advance(7)
        slots = [slot for _, slot, _, _ in eng.log]
        assert slots == [i % 2 for i in range(len(eng.log))]          # read 0, write 1; read 1, ...


def test_recordings_after_a_stop_are_dropped():
    """Launches after a blow-up exit without recording: the host keeps the recordings up to the
    stopped state's time (which the stopping launch recorded) and drops the rest."""
    import pytest

    from app.sims.cardiac.engine import RunStopped
    eng = host_only_engine(Problem.from_config(config(TEXT % (12.0, "rlfe", 0.02))))
    eng.rec_t.values[:2], eng.rec_v.values[:2] = [0.38, 0.40], [-80.0, np.nan]
    eng._rec_due = [0.38, 0.40, 0.42]
    ci = eng.ci.values
    ci[CI_STATUS], ci[CI_ACC], ci[CI_DONE] = cuda_engine.ST_BLOWUP, 20, 1
    eng.cd.values[cuda_engine.CD_BADT] = 0.40
    eng._current = lambda: np.full((1, 3), np.nan)
    with pytest.raises(RunStopped):
        eng._sync()
    assert eng._probe_t.array().tolist() == [0.0, 0.38, 0.40]


def test_fixed_steps_keep_voltage_on_the_cpu_engines_grid():
    """V is copied into a device block at each readout while the steps go on, and handed over
    when the grid is read, whatever the slices (steps or simulated time): the kept times are the
    CPU engine's, 0.5 ms apart (dt 0.02 ms; the stand-in V is the time), and a chunk ends only
    where the kept snapshots fill their block; a stopped run's snapshots from the blow-up on
    are dropped."""
    from app.sims.cardiac.engine import CpuTissue

    problem = Problem.from_config(config(TEXT % (12.0, "rlfe", 0.02)))
    cpu = CpuTissue(problem)
    expected = cpu.keep_voltage(0.5)
    cpu.advance(10 ** 6)
    cpu_times = [t for t, _ in expected.take()]
    np.testing.assert_allclose(cpu_times, np.arange(1, 25) * 0.5, rtol=0, atol=1e-12)
    for advance in (lambda e: e.advance(7), lambda e: e.advance(333), lambda e: e.advance_time(0.3)):
        eng = host_only_engine(problem)
        grid = eng.keep_voltage(0.5)
        while not eng.finished:
            advance(eng)
        kept = grid.take()
        assert [t for t, _ in kept] == cpu_times and all(v[0] == t for t, v in kept)
    eng = host_only_engine(problem)
    grid = eng.keep_voltage(0.5)
    syncs = []
    eng._sync = functools.partial(lambda sync: syncs.append(eng.t) or sync(), eng._sync)
    eng.advance(10 ** 6)                   # one call: a sync per block of readouts, and the end
    np.testing.assert_allclose(syncs, [4.0, 8.0, 12.0], rtol=0, atol=1e-9)
    assert len(grid.take()) == 24
    eng = host_only_engine(problem)
    grid = eng.keep_voltage(0.5)
    eng.advance_time(3.0)                  # six snapshots, still on the device
    eng._snapshot_stop = 1.9               # as a sync sets it after a blow-up at 1.9 ms
    assert [t for t, _ in grid.take()] == cpu_times[:3]
