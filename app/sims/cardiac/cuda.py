"""The CUDA tissue engine (kernels/cardiac.cu): one kernel per stage, the error reduced on the
device, so the host only launches: no copy per step. Adaptive runs whose cells fit one block
(single cells, small sheets) run whole chunks of steps, stages and control, in one launch
(``steps_one_block``). Adaptive methods: step control and probe
recording in a one-block kernel after each step (it flips the state buffers, not even the
accept flag is copied). Fixed steps: the host counts the steps, passes each step's index to
the stage kernels, which update the state in place (one state buffer; the neighbours' V
alternates between two small buffers), and the recording slot of a due state to the next
step's first stage (the one-block ``record`` kernel only for the last state before a read).
The host reads the control block, the recordings and the step history once per chunk of
steps, and stops the run when the device reports a blow-up or a step below the floor. V of the
whole tissue on a grid of simulated time (:class:`~app.sims.cardiac.engine.VoltageGrid`): fixed
steps end a chunk on the grid; adaptive ones pause on the device at the first accepted step at
or past the due time (``CD_PAUSE``), as the CPU engines keep it."""

from __future__ import annotations

import numpy as np

from app.compute.codegen import Code, fill_template
from app.compute.kernels import load_module, read_kernel
from app.compute.launch import PackedLaunch
from app.sims.cardiac.config import MAX_STIMULI, voltage_snapshots
from app.sims.cardiac.engine import Problem, Rows, RunStopped, VoltageGrid, fused_model, is_due
from app.sims.cardiac.model import CellModel
from app.sims.cardiac.node_order import NodeOrder, device_order, row_weight_dtype
from app.sims.cardiac.rosenbrock import DIFF_STEP, Rosenbrock
from app.sims.cardiac.solvers import METHODS, Tableau
from app.sims.cardiac.splitting import rkc1_coefficients, super_step_stages
from app.sims.common.engine import EngineBase

BLOCK = 128
CONTROL_BLOCK = 128
CD_T, CD_H, CD_TPREV, CD_NEXTSAVE, CD_BADT, CD_HPROP, CD_ERR, CD_PAUSE, CD_N = range(9)
CI_PARITY, CI_DONE, CI_ACC, CI_REJ, CI_NREC, CI_STATUS, CI_BADCELL, CI_BP, CI_NH, CI_PAUSED, CI_N = range(11)
ST_OK, ST_BLOWUP, ST_FLOOR = 0, 1, 2
CHUNK_FIXED = 500
CHUNK_ADAPTIVE = 100
CHUNK_FUSED = 4000          # steps per launch of ``steps_one_block`` (its recordings: one slot each)
FUSED_MAX_CELLS = BLOCK     # adaptive runs of at most this many cells step in one block (0: never)
H_CAP = 1 << 20
STAGE_MIN_BLOCKS: int | None = None   # override of stage_min_blocks() (scripts/cardiac/gpu_tuning.py)
# Strang splitting: the cell kernel does the first half super-step's last stage (stage_cell_substeps)
FUSE_STAGE = True


def _arr(values) -> str:
    return "{" + ", ".join(repr(float(v)) for v in values) + "}"


def tableau_source(tab: Tableau) -> Code:
    s = tab.stages
    a = [list(row) + [0.0] * (s - len(row)) for row in tab.a]
    a.append([0.0] * s)                                   # row s: unused (keeps TAB_A[I+1] valid)
    blow = tab.b_low or [0.0] * s
    return Code("\n".join([
        f"#define NSTAGE {s}", f"#define ADAPTIVE {int(tab.adaptive)}", f"#define RL {int(tab.rl)}",
        f"#define GRL {int(tab.grl)}",
        f"#define ORDER_LOW {tab.order_low or tab.order}",
        f"__device__ constexpr double TAB_A[{s + 1}][{s}] = {{{', '.join(_arr(r) for r in a)}}};",
        f"__device__ constexpr double TAB_B[{s}] = {_arr(tab.b)};",
        f"__device__ constexpr double TAB_BLOW[{s}] = {_arr(blow)};",
        f"__device__ constexpr double TAB_C[{s}] = {_arr(tab.c)};",
    ]) + "\n")


def rosenbrock_source(tab: Rosenbrock) -> Code:
    """The TABLEAU slot of a Rosenbrock method (``kernels/common/rosenbrock.cuh``): its
    coefficients, and a one-stage Runge-Kutta tableau the stage code is compiled with (unused:
    a Rosenbrock run steps in ``steps_one_block`` only)."""
    s = tab.stages
    return Code("\n".join([
        "#define ROSENBROCK 1", f"#define ROS_STAGES {s}", f"#define ROS_GAMMA {tab.gamma!r}",
        f"#define ROS_DIFF_STEP {DIFF_STEP!r}",
        f"__device__ constexpr double ROS_A[{s}][{s}] = {{{', '.join(_arr(r) for r in tab.a)}}};",
        f"__device__ constexpr double ROS_C[{s}][{s}] = {{{', '.join(_arr(r) for r in tab.c)}}};",
        f"__device__ constexpr double ROS_M[{s}] = {_arr(tab.m)};",
        f"__device__ constexpr double ROS_MLOW[{s}] = {_arr(tab.m_low)};",
        "#define NSTAGE 1", "#define ADAPTIVE 1", "#define RL 0", "#define GRL 0", f"#define ORDER_LOW {tab.order_low}",
        "__device__ constexpr double TAB_A[2][1] = {{0.0}, {0.0}};", "__device__ constexpr double TAB_B[1] = {1.0};",
        "__device__ constexpr double TAB_BLOW[1] = {1.0};", "__device__ constexpr double TAB_C[1] = {0.0};",
    ]) + "\n")


def model_kernel_source(model: CellModel, tab: Tableau | Rosenbrock, real: str, n_cells: int, width: int,
                        n_probes: int, n_stimuli: int, varying: tuple[int, ...] = (),
                        compute: str | None = None) -> tuple[str, dict]:
    """The kernel text for a model, method and precision (states in ``real``, the model in
    ``compute``, by default the same), and its -D defines."""
    if tab.grl != model.jacobian:
        raise ValueError(f"method {tab.name} needs a model {'with' if tab.grl else 'without'} its diagonal Jacobian")
    rosenbrock = isinstance(tab, Rosenbrock)
    one_double_cell = (real, compute or real, n_cells) == ("double", "double", 1)
    if rosenbrock != model.full_jacobian or (rosenbrock and not one_double_cell):
        raise ValueError(f"method {tab.name}: a Rosenbrock method steps one cell in double with the model's full "
                         "Jacobian; other methods take no full Jacobian")
    tableau = rosenbrock_source(tab) if rosenbrock else tableau_source(tab)
    src = fill_template(read_kernel("cardiac.cu"), {"MODEL": model.cuda_source(real, varying, compute),
                                                    "TABLEAU": tableau})
    defines = {"REAL": real, "NPAD": padded(n_cells), "NCELLS": n_cells, "KNB": width,
               "NPROBE": n_probes, "NSTIM": n_stimuli, "NS": model.n_states,
               "NNG": model.n_nongating, "NG": model.n_gates, "NPARAM": len(model.parameters),
               "NVARY": len(varying), "STAGE_BLOCK": BLOCK,
               "STAGE_MIN_BLOCKS": stage_min_blocks(model, real, compute or real)}
    return src, defines


def records_states(problem: Problem) -> bool:
    """A single cell records its every state at each recorded step, for the run's cell trace
    and beat metrics: adaptive methods in the ``control`` kernel (it reads state rows), fixed
    steps in the cell's own thread of the first stage (``RECORD_STATES``) or ``record``."""
    return problem.n_cells == 1 and problem.tableau is not None


def recorded_rows(problem: Problem) -> np.ndarray:
    """Indices into the state array that a recording reads: the probes' V, or a single cell's
    every state (:func:`records_states`; state k of cell 0 is at k·NPAD)."""
    if records_states(problem):
        return np.arange(problem.model.n_states, dtype=np.int64) * padded(1)
    return problem.probes


def fused_steps(problem: Problem) -> bool:
    """Whether an adaptive run's cells fit one block, so that one launch of ``steps_one_block``
    runs many whole steps, without a launch per stage and step."""
    if isinstance(problem.tableau, Rosenbrock):         # a single cell's whole step in its thread
        return True
    return problem.tableau is not None and problem.tableau.adaptive and problem.n_cells <= FUSED_MAX_CELLS


def kernel_source(problem: Problem, order: NodeOrder | None = None) -> tuple[str, dict]:
    """The kernel text for this problem's model, method and precision, and its -D defines; the
    operator rows as ``order`` stores them (by default the engine's :func:`device_order`)."""
    order = order if order is not None else device_order(problem.mesh.neighbours)
    real = "double" if problem.dtype == np.float64 else "float"
    src, defines = model_kernel_source(fused_model(problem), problem.tableau, real, problem.n_cells,
                                       problem.mesh.width, len(recorded_rows(problem)),
                                       len(problem.cfg.protocol.stimuli), problem.varying,
                                       compute_type(problem.cfg.solver.precision))
    if records_states(problem) and not problem.tableau.adaptive:
        defines["RECORD_STATES"] = 1
    if fused_steps(problem):
        defines["FUSED_STEPS"] = 1
    if problem.cfg.solver.split_dt > 0:
        defines["SPLIT"] = 1
    if order.row16:
        defines["ROW16"] = 1
    if row_weight_dtype(problem.mesh.inv_d2, problem.dtype) == np.float16:
        defines["W16"] = 1
    return src, defines


def stage_min_blocks(model: CellModel, real: str, compute: str) -> int:
    """Blocks of BLOCK threads per SM the stage kernels must fit (``__launch_bounds__``; 0: no
    bound, ptxas's choice). A large table model's cell-step fits in fewer registers than ptxas
    takes: ORd's table path in double uses 254 registers (2 blocks), and 168 (3 blocks) with
    48 B of spills; in mixed precision 168 and 128 (4 blocks) with 12 B
    (``scripts/cardiac/kernel_counts.py``). In float it needs 80-96 without a bound, which a
    bound would only raise. Models without tables keep ptxas's choice."""
    if STAGE_MIN_BLOCKS is not None:
        return STAGE_MIN_BLOCKS
    if model.lookup is None or model.n_states < 30 or real == "float":
        return 0
    return 3 if compute == "double" else 4


def compute_type(precision: str) -> str:
    """The C type the cell model is evaluated in: ``mixed`` evaluates it in float."""
    return "double" if precision == "float64" else "float"


def padded(n: int) -> int:
    return (n + 31) // 32 * 32


class VoltageSnapshots:
    """V of the tissue at readout times of a fixed-step run, kept on the device until the host
    reads them: ``copy`` (dst, src, stream) puts V in the file's order into a slot of one device
    block on the compute stream (microseconds, no sync); :meth:`drain` copies the kept ones to
    the host. ``capacity`` slots (:func:`~app.sims.cardiac.config.voltage_snapshots`); a full
    block is drained at the engine's next sync."""

    def __init__(self, gpuarray, n: int, dtype, copy, capacity: int):
        self.gpuarray, self.n, self.dtype, self.copy, self.capacity = gpuarray, n, dtype, copy, capacity
        self.block = None                # allocated at the first snapshot
        self.times: list[float] = []

    @property
    def full(self) -> bool:
        return len(self.times) == self.capacity

    def _slot(self, k: int):
        return self.block[k * self.n:(k + 1) * self.n]

    def take(self, v, stream, t: float) -> None:
        """Copy ``v`` (a device pointer to n values) as the state at ``t``, after what ``stream`` has queued."""
        if self.block is None:
            self.block = self.gpuarray.empty(self.capacity * self.n, self.dtype)
        self.copy(self._slot(len(self.times)).gpudata, v, stream)
        self.times.append(t)

    def drain(self, stream, before: float = np.inf) -> list[tuple[float, np.ndarray]]:
        """Each snapshot kept taken before ``before`` (a step that stopped the run), as (t, V):
        host arrays of their own, once what ``stream`` has queued is done."""
        if not self.times:
            return []
        stream.synchronize()
        kept = [(t, self._slot(k).get()) for k, t in enumerate(self.times) if t < before]
        self.times = []
        return kept

    def free(self) -> None:
        if self.block is not None:
            self.block.gpudata.free()


class CudaTissue(EngineBase, renamed={"checkpoint": "state", "load": "restore"}):
    name = "cuda"

    def __init__(self, problem: Problem):
        import pycuda.driver as cuda
        import pycuda.gpuarray as gpuarray

        if problem.tableau is None:
            raise ValueError(f"solver.method {problem.cfg.solver.method} runs on the CPU engines only "
                             "(an implicit method); choose an explicit one for CUDA")
        self.cuda, self.gpuarray = cuda, gpuarray
        self.p = problem
        tab = problem.tableau
        self.real = problem.dtype
        n, npad = problem.n_cells, padded(problem.n_cells)
        self.n, self.npad = n, npad
        self.order = device_order(problem.mesh.neighbours)     # per-node arrays: to_device / to_file
        src, defines = kernel_source(problem, self.order)
        self.weight_dtype = np.dtype(np.float16 if defines.get("W16") else self.real)
        self.row_bytes_per_slot = self.order.row_bytes_per_slot(self.weight_dtype)
        self.module = load_module(src, "cardiac.cu", defines)
        self.fused = fused_steps(problem)
        self.split = problem.cfg.solver.split_dt > 0       # a split step: its own kernels, no stages
        self.stages = [] if self.fused or self.split else [self.module.get_function(f"stage{i}")
                                                           for i in range(tab.stages)]
        if tab.adaptive:
            self._control = self.module.get_function("control")
            self._control.prepare("PPPiPPPiPiPP")
            if self.fused:
                self._steps = self.module.get_function("steps_one_block")
                self._steps.prepare("P" * 10 + "PiPPPiPiPP" + "i")
        else:
            self._record = self.module.get_function("record")
            self._record.prepare("PPPPPdi")
        if self.split:          # the split step's kernels (kernels/cardiac.cu, operator splitting)
            self._cells = self.module.get_function("cell_substeps")
            self._cells.prepare("PPPPPPiiidd")
            self._rkc = self.module.get_function("rkc_stage")
            self._rkc.prepare("PPPPPPPPdddidd")
            self._stage_cells = self.module.get_function("stage_cell_substeps")
            self._stage_cells.prepare("PPPPPPPPdddii")
        self._observe = self.module.get_function("observe_final")
        self._observe.prepare("PPPPP")
        self._to_file_order = self.module.get_function("to_file_order")
        self._to_file_order.prepare("PPP")
        self.positions = gpuarray.to_gpu(self.order.position.astype(np.int32))
        self._read_back = None           # n values in file order on the device, for a frame (_in_file_order)
        # constants
        model = problem.model
        self.ns, self.nk = model.n_states, model.n_nongating + 2 * model.n_gates
        if len(problem.params):
            self._set_const("c_params", np.asarray(problem.params, self.real))
        pfield = np.zeros((max(len(problem.varying), 1), npad), self.real)
        if problem.varying:
            pfield[:, :n] = self.order.to_device(problem.param_field[list(problem.varying)])
        self.pfield = gpuarray.to_gpu(pfield.ravel())
        self.lut = upload_table(self.module, fused_model(problem), problem.cell_params,
                                np.float64 if compute_type(problem.cfg.solver.precision) == "double" else np.float32)
        stim = np.zeros(MAX_STIMULI * 5)
        stim[:problem.stim_table.size] = problem.stim_table.ravel()
        self._set_const("c_stim", stim)
        s, out = problem.cfg.solver, problem.cfg.output
        solver = [s.at, s.rt, s.dt_min, s.dt_max, s.safety, s.fac_min, s.fac_max, problem.t_end,
                  problem.D, out.dt_save, out.activation_threshold, s.dt]
        self._set_const("c_solver", np.array(solver, np.float64))
        # state
        self.YA = gpuarray.to_gpu(self._device_states(problem.y0).ravel())
        # fixed steps update YA in place; adaptive ones keep the step's start in one buffer
        self.YB = gpuarray.zeros(self.ns * npad, self.real) if tab.adaptive else self.YA
        if isinstance(tab, Rosenbrock):       # the one cell's matrix and stages (rosenbrock_body)
            self.K = gpuarray.zeros(self.ns * (self.ns + tab.stages), np.float64)
        else:
            self.K = gpuarray.zeros(max(tab.stages - 1, 1) * self.nk * npad, self.real)
        self.Vst = [gpuarray.zeros(npad, self.real), gpuarray.zeros(npad, self.real)]
        # the diffusion super-step's stages (splitting): two V buffers besides the state's row 0
        self.U = [gpuarray.zeros(npad, self.real) for _ in range(2 if self.split else 0)]
        rows, w_rows = self.order.rows(problem.mesh.neighbours, problem.mesh.inv_d2)
        nbr = np.zeros((problem.mesh.width, npad), rows.dtype)     # padding cells: offset 0 or index 0
        nbr[:, :n] = rows
        w = np.zeros((problem.mesh.width, npad), self.weight_dtype)
        w[:, :n] = w_rows
        self.nbr, self.w = gpuarray.to_gpu(nbr.ravel()), gpuarray.to_gpu(w.ravel())
        mask = np.zeros(npad, np.uint32)
        mask[:n] = self.order.to_device(problem.stim_mask)
        self.mask = gpuarray.to_gpu(mask)
        maps = np.full((6, npad), np.nan, self.real)
        maps[0, :n] = self.order.to_device(problem.y0[0])
        maps[3] = -np.inf
        maps[5, :n] = maps[0, :n]
        self.maps = gpuarray.to_gpu(maps.ravel())
        cd = np.zeros(CD_N)
        cd[CD_H] = s.dt if not tab.adaptive else min(s.dt, s.dt_max, problem.next_breakpoint(0.0))
        cd[CD_NEXTSAVE] = out.dt_save
        cd[CD_PAUSE] = np.inf
        self.cd = gpuarray.to_gpu(cd)
        self.ci = gpuarray.zeros(CI_N, np.int32)
        self.bp = gpuarray.to_gpu(np.concatenate([problem.breakpoints, [np.inf]]).astype(np.float64))
        self.record_states = records_states(problem)
        rows = recorded_rows(problem)      # a tissue's probes: at their nodes' device positions
        self.probes = gpuarray.to_gpu((rows if self.record_states else self.order.position[rows]).astype(np.int32))
        self.chunk = CHUNK_FIXED if not tab.adaptive else CHUNK_FUSED if self.fused else CHUNK_ADAPTIVE
        self.rec_cap = self.chunk + 2
        self.rec_t = gpuarray.zeros(self.rec_cap, np.float64)
        self.rec_v = gpuarray.zeros(self.rec_cap * len(rows), np.float64)
        self.h_cap = H_CAP if tab.adaptive else 1
        self.h_hist = gpuarray.zeros(2 * self.h_cap, np.float32)
        self.stream = cuda.Stream()
        self._grid = ((npad + BLOCK - 1) // BLOCK, 1)
        self._stage_launches = [[self._stage_launch(f, slot) for slot in (0, 1)] for f in self.stages]
        self._probe_t = Rows(0.0)
        self._probe_v = Rows(problem.y0[:, 0] if self.record_states else problem.y0[0, problem.probes])
        self.h_history: list[tuple[float, float]] = []
        self._n_hist = 0
        self.t, self.steps_accepted, self.steps_rejected, self.done = 0.0, 0, 0, False
        self._observed_final = False
        self.grids: list[VoltageGrid] = []
        self._dues: list[float] = []        # fixed steps: each grid's next due, as the host steps on
        self._snapshots: VoltageSnapshots | None = None
        self._snapshot_stop = np.inf        # a blow-up's time: snapshots from then on are void
        self._pause = np.inf                # the device's CD_PAUSE
        self._reset_recording()
        self._seed_voltage()
        self._plan_diffusion(problem.mesh.inv_d2)

    def _plan_diffusion(self, inv_d2: np.ndarray) -> None:
        """Splitting: each diffusion super-step's stage coefficients (μ, ν, μ̃·h) for the weights
        ``inv_d2``, the whole and half split step (none without diffusion)."""
        h = self.p.cfg.solver.split_dt
        stages = super_step_stages(inv_d2, self.p.D, h) if self.n > 1 and self.p.D != 0 else {}
        self._rkc_plan = {f: [(mu, nu, mu_t * f * h) for mu, nu, mu_t in rkc1_coefficients(s)]
                          for f, s in stages.items()}

    def keep_voltage(self, every: float) -> VoltageGrid:
        """V of the whole tissue every ``every`` simulated ms from now on (see :class:`VoltageGrid`)."""
        self.grids.append(VoltageGrid(every, self.t, pending=self._drain_snapshots))
        self._dues.append(self.grids[-1].due)
        if self._snapshots is None and not self.p.tableau.adaptive:
            self._snapshots = VoltageSnapshots(self.gpuarray, self.n, self.real, self._voltage_to_file_order,
                                               voltage_snapshots(self.n, np.dtype(self.real).itemsize))
        return self.grids[-1]

    def _drain_snapshots(self) -> None:
        """Hand the V snapshots kept on the device to the grids (before they are read, or when
        their block is full)."""
        for t, v in self._snapshots.drain(self.stream, self._snapshot_stop) if self._snapshots else ():
            for grid in self.grids:
                grid.offer(t, v, copy=False)

    def set_tissue(self, inv_d2: np.ndarray, param_field: np.ndarray | None) -> None:
        """Steering: new diffusion weights and per-cell parameters, copied into the device
        arrays the kernels read (between launches: no recompile)."""
        self.stream.synchronize()
        n = self.p.n_cells
        w = self.w.get().reshape(self.p.mesh.width, -1)     # in the run's stored precision: a scar only
        # zeroes edges, so a row that keeps only weights below 2^-14 carries next to no current
        w[:, :n] = self.order.to_device(inv_d2.T)
        self.w.set(np.ascontiguousarray(w.ravel()))
        if param_field is not None and self.p.varying:
            pfield = self.pfield.get().reshape(len(self.p.varying), -1)
            pfield[:, :n] = self.order.to_device(param_field[list(self.p.varying)])
            self.pfield.set(np.ascontiguousarray(pfield.ravel()))
        if self.split:
            self._plan_diffusion(inv_d2)

    def _set_const(self, name: str, values: np.ndarray) -> None:
        ptr, size = self.module.get_global(name)
        data = np.ascontiguousarray(values)
        assert data.nbytes <= size, name
        self.cuda.memcpy_htod(ptr, data)

    def _stage_launch(self, f, slot: int) -> PackedLaunch:
        """Stage kernel ``f`` reading the neighbours' V from ``Vst[slot]`` (writing the other);
        the step index (argument 15) and recording slot (16) change per launch."""
        args = [self.YA.gpudata, self.YB.gpudata, self.K.gpudata, self.Vst[slot].gpudata,
                self.Vst[1 - slot].gpudata, self.nbr.gpudata, self.w.gpudata, self.mask.gpudata,
                self.maps.gpudata, self.cd.gpudata, self.ci.gpudata, self.pfield.gpudata, self.probes.gpudata,
                self.rec_t.gpudata, self.rec_v.gpudata, 0, -1]
        return PackedLaunch(f, "P" * 15 + "ii", self._grid, (BLOCK, 1, 1), self.stream, args, {15: 0, 16: 0})

    def _reset_recording(self) -> None:
        """Fixed steps: no recording due yet (the times of this chunk's recordings, by slot,
        and the slot the next launch records the state it starts from in, -1 for none)."""
        self._rec_due: list[float] = []
        self._pending_slot = -1

    def _voltage_slot(self, stage: int) -> int:
        """Which of ``Vst`` holds the V that stage ``stage`` of the next step reads. Fixed
        steps: stage i of step s reads slot (s x stages + i) mod 2 (the last stage writes the
        next step's V); adaptive steps: stage 0 reads V from the state, stage i slot i mod 2."""
        offset = 0 if self.p.tableau.adaptive else self.steps_accepted * len(self.stages)
        return (offset + stage) % 2

    def _seed_voltage(self) -> None:
        """Fixed steps: copy V from the state into the slot the next step's first stage reads
        (after the state is set: at the start and on restoring a checkpoint)."""
        if not self.p.tableau.adaptive and not self.split:
            self.cuda.memcpy_dtod(self.Vst[self._voltage_slot(0)].gpudata, self.YA.gpudata,
                                  self.npad * self.YA.dtype.itemsize)

    # ---- stepping ------------------------------------------------------------------------
    def _launch_step(self) -> None:
        if self.split:
            self._launch_split_step()
            return
        fixed = not self.p.tableau.adaptive
        step = self.steps_accepted if fixed else 0
        for i, launches in enumerate(self._stage_launches):
            launches[self._voltage_slot(i)](a15=step, a16=self._pending_slot if i == 0 else -1)
        self._pending_slot = -1
        if fixed:
            self._count_fixed_step()
            return
        self._control.prepared_async_call(
            (1, 1), (CONTROL_BLOCK, 1, 1), self.stream, self.YA.gpudata, self.YB.gpudata, self.bp.gpudata,
            np.int32(len(self.p.breakpoints)), self.probes.gpudata, self.rec_t.gpudata,
            self.rec_v.gpudata, np.int32(self.rec_cap), self.h_hist.gpudata, np.int32(self.h_cap),
            self.cd.gpudata, self.ci.gpudata)

    def _launch_steps(self, n: int) -> None:
        """Up to ``n`` adaptive steps, stages and control, in one launch of one block."""
        self._steps.prepared_async_call(
            (1, 1), (BLOCK, 1, 1), self.stream, self.YA.gpudata, self.YB.gpudata, self.K.gpudata,
            self.Vst[0].gpudata, self.Vst[1].gpudata, self.nbr.gpudata, self.w.gpudata, self.mask.gpudata,
            self.maps.gpudata, self.pfield.gpudata, self.bp.gpudata, np.int32(len(self.p.breakpoints)),
            self.probes.gpudata, self.rec_t.gpudata, self.rec_v.gpudata, np.int32(self.rec_cap),
            self.h_hist.gpudata, np.int32(self.h_cap), self.cd.gpudata, self.ci.gpudata, np.int32(n))

    def _launch_split_step(self) -> None:
        """One split step (:mod:`.splitting`, as ``CpuTissue._split_step``): the substeps and the
        diffusion super-step (Strang: half of it on each side, the first half's last stage done
        by the cell kernel when it has several); its first kernel checks and observes the state
        the last one left. A due state is recorded at once (``record``)."""
        step, split_dt, k = self.steps_accepted, self.p.cfg.solver.split_dt, self.p.substeps
        observe = (step, step * split_dt, (step - 1) * split_dt if step else 0.0)
        strang = self.p.cfg.solver.split == "strang"
        last = None
        if strang:
            observe, last = self._diffuse(0.5, observe, leave_last=FUSE_STAGE)
        if last is not None:
            u1, u2, (mu, nu, mu_t_h) = last
            self._stage_cells.prepared_async_call(
                self._grid, (BLOCK, 1, 1), self.stream, self.YA.gpudata, self.mask.gpudata,
                self.pfield.gpudata, u1, u2, self.nbr.gpudata, self.w.gpudata, self.ci.gpudata,
                np.float64(mu), np.float64(nu), np.float64(mu_t_h), np.int32(step * k), np.int32(k))
        else:
            self._cells.prepared_async_call(
                self._grid, (BLOCK, 1, 1), self.stream, self.YA.gpudata, self.mask.gpudata, self.maps.gpudata,
                self.cd.gpudata, self.ci.gpudata, self.pfield.gpudata, np.int32(step * k), np.int32(k),
                np.int32(observe[0]), np.float64(observe[1]), np.float64(observe[2]))
        self._diffuse(0.5 if strang else 1.0, (-1, 0.0, 0.0))
        self._count_fixed_step()
        self._flush_record()

    def _diffuse(self, fraction: float, observe: tuple[int, float, float],
                 leave_last: bool = False) -> tuple[tuple[int, float, float], tuple | None]:
        """Launch the RKC1 super-step over ``fraction`` of the split step on V (row 0 of YA):
        stage j reads the two before (V itself for the first two), the last writes V back in
        place (one stage: through a buffer). Its first stage does the ``observe`` (step index,
        or -1, t, t_prev) of the split step's first kernel. Returns what is left to observe and,
        with ``leave_last`` and two stages or more, the last stage not launched (its u1 and u2
        buffers and coefficients, for :meth:`_launch_split_step`'s cell kernel); else None."""
        plan = self._rkc_plan.get(fraction)
        if not plan:
            return observe, None
        v = self.YA.gpudata
        before, last = v, v
        for j, (mu, nu, mu_t_h) in enumerate(plan, 1):
            in_place = j == len(plan) and len(plan) > 1        # the last of several stages writes V
            if in_place and leave_last:
                return observe, (last, before, (mu, nu, mu_t_h))
            out = v if in_place else self.U[j % 2].gpudata
            self._rkc.prepared_async_call(
                self._grid, (BLOCK, 1, 1), self.stream, last, before, out, self.nbr.gpudata, self.w.gpudata,
                self.maps.gpudata, self.cd.gpudata, self.ci.gpudata, np.float64(mu), np.float64(nu),
                np.float64(mu_t_h), np.int32(observe[0]), np.float64(observe[1]), np.float64(observe[2]))
            before, last, observe = last, out, (-1, 0.0, 0.0)
        if len(plan) == 1:
            self.cuda.memcpy_dtod_async(v, last, self.npad * self.YA.dtype.itemsize, self.stream)
        return observe, None

    def _count_fixed_step(self) -> None:
        """After a fixed step's stages: count it, as the adaptive control kernel would on the
        device (t = steps * h, no drift), and give the probes of the state it left a recording
        slot if the step is due: the next step's first stage records them, or
        :meth:`_flush_record` before the host reads. A step the device stopped at (blow-up) is
        not counted: :meth:`_sync` takes the device's counters."""
        h = self.p.step_dt
        self.steps_accepted += 1
        self.t = self.steps_accepted * h
        self.done = self.t >= self.p.t_end - 0.5 * h
        if self.steps_accepted % self.p.save_every == 0 or self.done:
            self._pending_slot = len(self._rec_due)
            self._rec_due.append(self.t)

    def _flush_record(self) -> None:
        """Record a due state no stage kernel has started from yet (the last one launched)."""
        if self._pending_slot >= 0:
            self._record.prepared_async_call(
                (1, 1), (CONTROL_BLOCK, 1, 1), self.stream, self.YA.gpudata, self.probes.gpudata,
                self.rec_t.gpudata, self.rec_v.gpudata, self.ci.gpudata,
                np.float64(self._rec_due[self._pending_slot]), np.int32(self._pending_slot))
            self._pending_slot = -1

    @property
    def finished(self) -> bool:
        return self.done

    def advance(self, max_steps: int) -> None:
        self._run(max_steps, None)

    def advance_time(self, span: float) -> None:
        """Run until ``span`` more simulated ms have passed (or the end)."""
        self._run(None, self.t + span)

    def run_to_end(self) -> None:
        self._run(None, None)

    def _run(self, max_steps: int | None, t_target: float | None) -> None:
        tab = self.p.tableau
        first = self.steps_accepted + self.steps_rejected
        launched = 0
        while not self.done:
            n = self.chunk
            if not tab.adaptive:        # the chunk ends at the target (readouts: _snapshot_if_due)
                remaining = self.p.fixed_steps - self.steps_accepted
                if t_target is not None:
                    steps = np.ceil((t_target - self.t) / self.p.step_dt - 1e-9)
                    remaining = min(remaining, max(1, int(steps)))
                n = max(1, min(n, remaining))
            else:
                self._pause_at(min((g.due for g in self.grids), default=np.inf))
            if max_steps is not None:
                n = max(1, min(n, max_steps - launched))
            if self.fused:
                self._launch_steps(n)
            else:
                for _ in range(n):
                    self._launch_step()
                    if self._snapshot_if_due() or self.done:  # fixed steps: the host knows their times
                        break
            self._sync()
            if tab.adaptive:
                self._keep_due_voltage()
            launched = self.steps_accepted + self.steps_rejected - first     # a paused chunk's rest: none
            if max_steps is not None and launched >= max_steps:
                break
            if t_target is not None and self.t >= t_target - 1e-9:
                break

    def _snapshot_if_due(self) -> bool:
        """Fixed steps: after a step at which a readout grid is due, a snapshot of V (kept on the
        device until the grids are read); whether the snapshots kept fill their block."""
        if self._snapshots is None or not any(is_due(self.t, d) for d in self._dues):
            return False
        self._snapshots.take(self.YA.gpudata, self.stream, self.t)
        self._dues = [g.due_after(self.t) if is_due(self.t, d) else d for g, d in zip(self.grids, self._dues)]
        return self._snapshots.full

    def _pause_at(self, due: float) -> None:
        """Adaptive steps: pause the device at the first accepted step at or past ``due``."""
        if due != self._pause:
            self.cuda.memcpy_htod(int(self.cd.gpudata) + 8 * CD_PAUSE, np.array([due], np.float64))
            self._pause = due

    def _keep_due_voltage(self) -> None:
        if any(is_due(self.t, g.due) for g in self.grids):
            v = self.voltage()
            for grid in self.grids:
                grid.offer(self.t, v)

    def _sync(self) -> None:
        fixed = not self.p.tableau.adaptive
        if fixed:
            self._flush_record()
        self.stream.synchronize()
        cd, ci = self.cd.get(), self.ci.get()
        if fixed:
            # after a stop, the launches that followed it exited without recording
            stopped_at = cd[CD_BADT] if ci[CI_STATUS] == ST_BLOWUP else np.inf
            self._snapshot_stop = min(self._snapshot_stop, stopped_at)
            nrec = sum(t <= stopped_at for t in self._rec_due)
            if self._snapshots is not None and self._snapshots.full:
                self._drain_snapshots()
            self._reset_recording()
            self._settle_fixed(cd, ci)
        else:
            nrec = int(ci[CI_NREC])
            if ci[CI_PAUSED]:           # at a readout, not done: the next launches go on
                ci[CI_DONE] = ci[CI_PAUSED] = 0
                self.cuda.memcpy_htod(int(self.ci.gpudata) + 4 * CI_DONE, np.zeros(1, np.int32))
                self.cuda.memcpy_htod(int(self.ci.gpudata) + 4 * CI_PAUSED, np.zeros(1, np.int32))
        self.t = float(cd[CD_T])
        self.steps_accepted, self.steps_rejected = int(ci[CI_ACC]), int(ci[CI_REJ])
        if nrec:
            tt = self.rec_t.get()[:nrec]
            vv = self.rec_v.get().reshape(self.rec_cap, -1)[:nrec]
            self._probe_t.extend(tt)
            self._probe_v.extend(vv)
            if not fixed:
                self.cuda.memcpy_htod(int(self.ci.gpudata) + 4 * CI_NREC, np.zeros(1, np.int32))
        nh = min(int(ci[CI_NH]), self.h_cap)
        if nh > self._n_hist:
            hh = self.h_hist.get()[2 * self._n_hist:2 * nh].reshape(-1, 2)
            self.h_history.extend((float(a), float(b)) for a, b in hh)
            self._n_hist = nh
        status = int(ci[CI_STATUS])
        if ci[CI_DONE]:
            self.done = True
            if not self._observed_final:
                self._observe.prepared_async_call(self._grid, (BLOCK, 1, 1), self.stream, self.YA.gpudata,
                                                  self.YB.gpudata, self.maps.gpudata, self.cd.gpudata,
                                                  self.ci.gpudata)
                self.stream.synchronize()
                self._observed_final = True
        cell = int(self.order.node[int(ci[CI_BADCELL])])      # the file's index of the device's cell
        if status == ST_BLOWUP:
            v = self._current()[0, cell]
            reason = "V is NaN" if np.isnan(v) else f"|V| = {abs(v):.4g} mV exceeds 200 mV"
            raise RunStopped(cd[CD_BADT], cell, reason)
        if status == ST_FLOOR:
            raise RunStopped(cd[CD_BADT], cell,
                             f"step size {cd[CD_HPROP]:.3g} ms fell below the floor dt_min = "
                             f"{self.p.cfg.solver.dt_min:g} ms")

    def _settle_fixed(self, cd: np.ndarray, ci: np.ndarray) -> None:
        """Fixed steps: put the host's step count into the control block (``cd``, ``ci`` and
        the device's copy), where the adaptive control kernel keeps it, so that read-back,
        ``observe_final`` and checkpoints see the same block. After a blow-up the stage
        kernel has written the stopped step's counters there: the host takes those."""
        h = self.p.step_dt
        if ci[CI_STATUS] == ST_OK:
            ci[CI_ACC], ci[CI_DONE] = self.steps_accepted, int(self.done)
            cd[CD_T] = self.steps_accepted * h
            cd[CD_TPREV] = (self.steps_accepted - 1) * h if self.steps_accepted else 0.0
            self.cd.set(cd)
            self.ci.set(ci)
        self.steps_accepted = int(ci[CI_ACC])
        self.done = bool(ci[CI_DONE])

    # ---- read-back -----------------------------------------------------------------------
    def _device_states(self, y: np.ndarray) -> np.ndarray:
        """States (S, N) in file order as the device holds them: (S, NPAD) in device order, the
        padding cells after n a copy of the first."""
        out = np.zeros((self.ns, self.npad), self.real)
        out[:, :self.n] = self.order.to_device(y)
        out[:, self.n:] = out[:, :1]
        return out

    def _current(self) -> np.ndarray:
        """The states (S, N) in file order."""
        parity = int(self.ci.get()[CI_PARITY])
        buf = self.YB if parity else self.YA
        return self.order.to_file(buf.get().reshape(self.ns, self.npad)[:, :self.n])

    def _maps(self) -> np.ndarray:
        """The activation maps (6, N) in file order, in the run's precision."""
        return np.stack([self._map(row, self.real) for row in range(6)])

    def _voltage_to_file_order(self, dst, v, stream) -> None:
        """Queue V of the n nodes (device pointer ``v``) into ``dst`` in file order on ``stream``:
        a gather on the device (``to_file_order``), or a copy where the orders agree."""
        if self.order.is_identity:
            self.cuda.memcpy_dtod_async(dst, v, self.n * self.YA.dtype.itemsize, stream)
        else:
            self._to_file_order.prepared_async_call(self._grid, (BLOCK, 1, 1), stream, v,
                                                    self.positions.gpudata, dst)

    def _in_file_order(self, src, dtype=np.float64) -> np.ndarray:
        """The n values at device pointer ``src`` (device order) as a host array of ``dtype`` in
        file order: gathered on the device (a frame reads V and a map at every advance; a host
        gather of a large mesh takes milliseconds) and copied once."""
        if self._read_back is None:
            self._read_back = self.gpuarray.empty(self.n, self.real)
            self._read_back_host = self.cuda.pagelocked_empty(self.n, self.real)
        self._voltage_to_file_order(self._read_back.gpudata, src, self.stream)
        self.cuda.memcpy_dtoh_async(self._read_back_host, self._read_back.gpudata, self.stream)
        self.stream.synchronize()
        return self._read_back_host.astype(dtype)

    def _map(self, row: int, dtype=np.float64) -> np.ndarray:
        """Row ``row`` of the activation maps (first crossing 1, last 2, repolarised 4) in file order."""
        return self._in_file_order(int(self.maps.gpudata) + row * self.npad * self.maps.dtype.itemsize, dtype)

    def voltage(self) -> np.ndarray:
        parity = int(self.ci.get()[CI_PARITY])
        return self._in_file_order((self.YB if parity else self.YA).gpudata)

    def states(self) -> np.ndarray:
        return self._current().astype(np.float64)

    def recordings(self) -> tuple[np.ndarray, np.ndarray]:
        v = self._probe_v.array()
        return self._probe_t.array(), (v[:, :1] if self.record_states else v)

    def cell_history(self) -> tuple[np.ndarray, np.ndarray] | None:
        """A single cell's every state at each recorded step (S, T) (:func:`records_states`)."""
        if not self.record_states:
            return None
        return self._probe_t.array(), self._probe_v.array().T

    def activation(self) -> dict[str, np.ndarray]:
        first = self.activation_time()
        return {"activation_time": first, "activation_last": self._map(2), "apd90": self._map(4) - first}

    def activation_time(self) -> np.ndarray:
        return self._map(1)

    def state(self) -> dict[str, np.ndarray]:
        """The device state between steps: states, control scalars, maps and recordings, per
        node in the file's order (a checkpoint does not depend on the engine's order)."""
        self.stream.synchronize()
        pt, pv = self._probe_t.array(), self._probe_v.array()     # a single cell's every state
        return {"cuda_y": self._current(), "cuda_cd": self.cd.get(), "cuda_ci": self.ci.get(),
                "cuda_maps": self._maps(),
                "probe_t": pt, "probe_v": pv,
                "h_history": np.array(self.h_history, np.float64).reshape(-1, 2),
                "observed_final": np.bool_(self._observed_final)}

    def restore(self, st: dict[str, np.ndarray]) -> None:
        if "cuda_cd" not in st:
            raise ValueError("this checkpoint was written by the CPU engine; resume it with the CPU engine")
        self._drain_snapshots()          # the readouts before the jump are the grids'
        self._snapshot_stop = np.inf
        self.YA.set(self._device_states(np.asarray(st["cuda_y"])).ravel())
        ci = np.array(st["cuda_ci"], np.int32)
        ci[CI_PARITY] = 0            # the state now sits in YA
        ci[CI_NREC] = 0              # recordings up to the checkpoint are on the host
        self.ci.set(ci)
        self.cd.set(np.array(st["cuda_cd"], np.float64))
        maps = self.maps.get().reshape(6, self.npad)
        maps[:, :self.n] = self.order.to_device(np.asarray(st["cuda_maps"]))
        self.maps.set(maps.ravel())
        self._probe_t, self._probe_v = Rows.of(st["probe_t"]), Rows.of(st["probe_v"])
        self.h_history = [tuple(map(float, row)) for row in np.asarray(st["h_history"])]
        self._n_hist = min(int(ci[CI_NH]), self.h_cap)
        self._observed_final = bool(st["observed_final"])
        cd = np.asarray(st["cuda_cd"])
        self.t = float(cd[CD_T])
        self.steps_accepted, self.steps_rejected = int(ci[CI_ACC]), int(ci[CI_REJ])
        self.done = bool(ci[CI_DONE])
        self._pause = float(cd[CD_PAUSE])
        for grid in self.grids:
            grid.restart(self.t)
        self._dues = [g.due for g in self.grids]
        self._reset_recording()
        self._seed_voltage()

    def close(self) -> None:
        buffers = (self.YA, self.YB, self.K, *self.Vst, *self.U, self.nbr, self.w, self.mask, self.maps, self.pfield,
                   self.positions, self.cd, self.ci, self.bp, self.probes, self.rec_t, self.rec_v, self.h_hist,
                   self.lut, self._read_back)
        for buf in {id(b): b for b in buffers if b is not None}.values():     # YB is YA for fixed steps
            buf.gpudata.free()
        if self._snapshots is not None:
            self._snapshots.free()


def upload_table(module, model: CellModel, params: np.ndarray, dtype):
    """Copy the model's lookup table to the device (in ``dtype``) and point ``c_lut`` at it;
    ``None`` for a model without tables."""
    if model.lookup is None:
        return None
    import pycuda.driver as cuda
    import pycuda.gpuarray as gpuarray

    table = gpuarray.to_gpu(model.table(params).astype(dtype))
    ptr, _ = module.get_global("c_lut")
    cuda.memcpy_htod(ptr, np.array([int(table.gpudata)], np.uint64))
    return table


def cuda_rates(model: CellModel, y: np.ndarray, i_st: np.ndarray, params: np.ndarray,
               precision: str = "float64"):
    """Evaluate the generated CUDA model on states ``y`` (S, N): returns (dng, a, b), and jng
    for a model ``with_jacobian``, like :meth:`CellModel.rates` (for the CPU-vs-CUDA model
    test). Needs a pushed context."""
    import pycuda.driver as cuda
    import pycuda.gpuarray as gpuarray

    dtype = np.float32 if precision == "float32" else np.float64
    real = "double" if dtype == np.float64 else "float"
    n = y.shape[1]
    npad = padded(n)
    method = METHODS["grl1" if model.jacobian else "rlfe"]
    src, defines = model_kernel_source(model, method, real, n, 1, 1, 1, compute=compute_type(precision))
    mod = load_module(src, "cardiac.cu", defines)
    if len(params):
        ptr, _ = mod.get_global("c_params")
        cuda.memcpy_htod(ptr, np.asarray(params, dtype))
    table = upload_table(mod, model, params, np.float64 if compute_type(precision) == "double" else np.float32)
    ns, ng, nga = model.n_states, model.n_nongating, model.n_gates
    yy = np.zeros((ns, npad), dtype)
    yy[:, :n] = y
    ist = np.zeros(npad, dtype)
    ist[:n] = i_st
    d_y, d_i, d_p = gpuarray.to_gpu(yy.ravel()), gpuarray.to_gpu(ist), gpuarray.zeros(npad, dtype)
    n_out = len(model.outputs)
    d_o = gpuarray.zeros(n_out * npad, dtype)
    mod.get_function("eval_rates")(d_y, d_i, d_p, d_o, block=(BLOCK, 1, 1),
                                   grid=((npad + BLOCK - 1) // BLOCK, 1))
    out = d_o.get().reshape(n_out, npad)[:, :n].astype(np.float64)
    for buf in (d_y, d_i, d_p, d_o, *([table] if table is not None else [])):
        buf.gpudata.free()
    parts = (out[:ng], out[ng:ng + nga], out[ng + nga:ng + 2 * nga])
    return parts + (out[ng + 2 * nga:],) if model.jacobian else parts
