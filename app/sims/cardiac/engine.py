"""What both engines share: the problem (mesh, stimulus tables, probes, solver settings), the
run-stopping error, activation bookkeeping, and the NumPy engine itself.

Bookkeeping on accepted steps only (both engines):

* probes: fixed-step methods record every ``round(dt_save/Δt)`` steps (Δt = dt, or the split
  step ``solver.split_dt``: :mod:`.splitting`); adaptive methods
  record the first accepted step at or after each multiple of ``dt_save`` (every accepted
  step when ``dt_save`` is 0), at its own time, so ``probe_t`` may be uneven.
* activation: the first and the latest upward crossing of ``activation_threshold`` by each
  cell, linearly interpolated between steps; APD90 of the first beat: the downward crossing
  of ``V_max − 0.9·(V_max − V_rest)`` after the first activation (V_rest = the cell's initial V).
* a state with NaN or |V| > 200 mV, or an adaptive step below ``dt_min``, stops the run with
  :class:`RunStopped` (time, cell, reason).
* V of the whole tissue on a grid of simulated time (:class:`VoltageGrid`, the readouts and
  the V series): the first accepted step at or past each multiple of its interval, like the
  adaptive probes, so what is kept does not depend on how a run is sliced into advances.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from app.sims.cardiac.config import MAX_STIMULI, CardiacConfig, ParameterRegion, Region
from app.sims.cardiac.mesh import Mesh, single_cell
from app.sims.cardiac.shapes import icosphere, sheet
from app.sims.cardiac.model import CellModel, LookupSpec, config_model
from app.sims.cardiac.rosenbrock import ROSENBROCK, Rosenbrock, dense_jacobian, rosenbrock_step
from app.sims.cardiac.solvers import AUTO, METHODS, Tableau, error_ratio, next_step, rk_step, with_rl
from app.sims.cardiac.splitting import rkc1_step, super_step_stages
from app.sims.common.config import ConfigError
from app.sims.common.engine import EngineBase

V_LIMIT = 200.0


class RunStopped(RuntimeError):
    """The run stopped: blow-up or step-size floor, with where and when."""

    def __init__(self, t: float, cell: int, reason: str):
        self.t, self.cell, self.reason = float(t), int(cell), reason
        super().__init__(f"run stopped at t = {self.t:.6g} ms, cell {self.cell}: {reason}")


def build_mesh(cfg: CardiacConfig) -> Mesh:
    m = cfg.mesh
    if m.kind == "sphere":
        return icosphere(m.level, m.radius_mm or None)
    if m.kind == "sheet":
        return sheet(m.nx, m.ny, m.dx_mm)
    if m.kind == "file":
        from app.sims.cardiac.fem import settings_mesh
        return settings_mesh(m)
    return single_cell()


def region_mask(mesh: Mesh, region: Region | ParameterRegion) -> np.ndarray:
    n = mesh.n_cells
    if region.kind == "circle":
        c = np.zeros(3)
        c[:len(region.center)] = region.center[:3]
        return np.linalg.norm(mesh.positions - c[:mesh.positions.shape[1]], axis=1) <= region.radius_mm
    if region.kind == "all":
        return np.ones(n, bool)
    if region.kind == "tag":
        if mesh.element_tags is None:
            raise ValueError(f"a tag region needs a mesh file with element tags; this {mesh.kind} has none")
        mask = np.zeros(n, bool)
        mask[mesh.elements[np.isin(mesh.element_tags, region.tags)].ravel()] = True
        return mask
    if region.kind == "cells":
        mask = np.zeros(n, bool)
        idx = np.asarray(region.cells, int)
        if len(idx) and (idx.min() < 0 or idx.max() >= n):
            raise ValueError(f"stimulus cell index outside 0..{n - 1}")
        mask[idx] = True
        return mask
    if region.kind == "cap":
        c = np.asarray(region.center, float)
        c = c / np.linalg.norm(c)
        p = mesh.positions / np.maximum(np.linalg.norm(mesh.positions, axis=1, keepdims=True), 1e-30)
        return p @ c >= np.cos(np.radians(region.angle_deg)) - 1e-12
    x, y = mesh.positions[:, 0], mesh.positions[:, 1]
    return (x >= region.x0) & (x <= region.x1) & (y >= region.y0) & (y <= region.y1)


def _extent(mesh: Mesh) -> str:
    if mesh.kind != "sheet":
        return ""
    hi = mesh.positions.max(axis=0)
    return f" (x 0..{hi[0]:g} mm, y 0..{hi[1]:g} mm)"


def parameter_field(mesh: Mesh, model: CellModel, cfg: CardiacConfig,
                    params: np.ndarray) -> tuple[np.ndarray | None, tuple[int, ...]]:
    """Per-cell parameters (P, N) from ``model.regions`` and the indices that vary (those
    ``model.paintable`` lists too); (None, ()) without either."""
    if not cfg.model.regions and not cfg.model.paintable:
        return None, ()
    values = np.repeat(params[:, None], mesh.n_cells, axis=1)
    index = {q: k for k, q in enumerate(model.parameter_names)}
    for i, region in enumerate(cfg.model.regions):
        reached = region_mask(mesh, region)
        if not reached.any():
            raise ValueError(f"model.regions[{i}] ({region.kind}) reaches no cell of this "
                             f"{mesh.kind}{_extent(mesh)}")
        for key, value in region.parameters.items():
            values[index[key], reached] = value
    painted = {index[name] for name in cfg.model.paintable}
    varying = tuple(k for k in range(len(params)) if k in painted or np.any(values[k] != values[k, 0]))
    return values, varying


def is_rl_euler(tab: Tableau | None) -> bool:
    """Whether the tableau is Rush–Larsen forward Euler (one stage, fixed step), or GRL1."""
    return tab is not None and not tab.adaptive and tab.rl and tab.b == (1.0,) and tab.c == (0.0,)


def fused_model(problem: "Problem") -> CellModel:
    """The model as the fused RLFE programs (CUDA stage kernel, compiled CPU step) print it:
    with lookup tables, the V-only gates' updates tabulated for the fixed step as well."""
    m = problem.model
    if m.lookup is None or not is_rl_euler(problem.tableau):
        return m
    if "fused_model" not in problem.extra:
        problem.extra["fused_model"] = m.with_lookup(m.lookup, m.varying, rl_step=problem.cfg.solver.dt)
    return problem.extra["fused_model"]


@dataclass
class Problem:
    """Everything an engine needs, in plain arrays."""

    cfg: CardiacConfig
    mesh: Mesh
    model: CellModel
    params: np.ndarray             # (P,) every cell's parameters
    y0: np.ndarray                 # (S, N) float64
    stim_mask: np.ndarray          # (N,) uint32, bit g = stimulus g reaches the cell
    stim_table: np.ndarray         # (G, 5) start, duration, amplitude, period, count
    breakpoints: np.ndarray        # pulse edges inside (0, t_end]
    probes: np.ndarray             # (P,) int
    tableau: Tableau | Rosenbrock | None   # None: an implicit method (solvers.IMPLICIT)
    t_end: float
    dtype: type = np.float32
    param_field: np.ndarray | None = None   # (P, N) where model.regions set other values
    varying: tuple[int, ...] = ()            # parameters that differ between cells
    extra: dict = field(default_factory=dict)

    @classmethod
    def from_config(cls, cfg: CardiacConfig, mesh: Mesh | None = None) -> "Problem":
        if cfg.solver.method == AUTO:
            raise ValueError("solver.method auto is resolved per engine (config.for_backend) before the problem")
        mesh = mesh or build_mesh(cfg)
        model = config_model(cfg.model)
        n = mesh.n_cells
        y0 = np.repeat(model.initial_state()[:, None], n, axis=1)
        stimuli = cfg.protocol.stimuli
        if len(stimuli) > MAX_STIMULI:
            raise ValueError(f"at most {MAX_STIMULI} stimuli")
        mask = np.zeros(n, np.uint32)
        table = np.zeros((max(len(stimuli), 1), 5))
        table[:, 3] = 1.0                # a period for the unused row of a stimulus-free run
        edges = []
        t_end = cfg.protocol.t_end
        for g, st in enumerate(stimuli):
            reached = region_mask(mesh, st.region)
            if not reached.any():
                raise ValueError(f"stimulus {st.name} ({st.region.kind}) reaches no cell of this "
                                 f"{mesh.kind}{_extent(mesh)}")
            mask |= (reached.astype(np.uint32) << np.uint32(g))
            table[g] = (st.start, st.duration, st.amplitude, st.period, st.count)
            k = np.arange(st.count)
            starts = st.start + k * st.period
            edges += [starts, starts + st.duration]
        bp = np.unique(np.concatenate(edges)) if edges else np.zeros(0)
        bp = bp[(bp > 0) & (bp < t_end)]
        out = cfg.output
        rng = np.random.default_rng(out.probe_seed)
        rand = rng.choice(n, size=min(out.random_probes, n), replace=False) if out.random_probes else []
        picked = [c for c in out.probe_cells if 0 <= c < n]
        probes = np.array(list(dict.fromkeys([*picked, *np.sort(rand).tolist()])), np.int64)
        if len(probes) == 0:
            probes = np.array([0], np.int64)
        tab: Tableau | Rosenbrock | None = METHODS.get(cfg.solver.method)
        if tab is not None and not cfg.solver.rush_larsen:
            tab = with_rl(tab, False)
        if tab is not None and tab.adaptive and tab.rl:     # error control must see every state
            model = model.with_coupled_stepped()
        if tab is not None and tab.grl:
            model = model.with_jacobian()
        if cfg.solver.method in ROSENBROCK:
            tab, model = ROSENBROCK[cfg.solver.method], model.with_full_jacobian()
        dtype = np.float32 if cfg.solver.precision == "float32" else np.float64   # mixed: float64 on the CPU
        params = model.parameter_vector(cfg.model.parameters)
        field_, varying = parameter_field(mesh, model, cfg, params)
        s = cfg.solver
        if s.lookup_tables:
            model = model.with_lookup(LookupSpec(s.lookup_v_min, s.lookup_v_max, s.lookup_step), varying)
        return cls(cfg, mesh, model, params, y0, mask, table, bp, probes, tab, t_end, dtype,
                   field_, varying)

    @property
    def cell_params(self) -> np.ndarray:
        """(P,) or, with parameter regions, (P, N)."""
        return self.params if self.param_field is None else self.param_field

    @property
    def D(self) -> float:
        """The factor of the mesh weights: cfg.D, or 1 where the weights carry it (FE meshes)."""
        return 1.0 if self.mesh.weights_carry_D else self.cfg.D

    @property
    def n_nongating(self) -> int:
        return self.model.n_nongating

    @property
    def n_cells(self) -> int:
        return self.mesh.n_cells

    def stim_amplitudes(self, t: float | np.ndarray) -> np.ndarray:
        """Amplitude of each stimulus at time t (0 when off): (G,), or (T, G) for times (T, 1)."""
        start, dur, amp, period, count = self.stim_table.T
        k = np.floor((t - start) / period)
        on = (t >= start) & (k < count) & (t - start - k * period < dur)
        return np.where(on, amp, 0.0)

    def cell_stimulus(self, times: np.ndarray, cell: int = 0) -> np.ndarray:
        """One cell's stimulus current at each of ``times`` (T,): :meth:`stim_current` at once."""
        bits = (self.stim_mask[cell] >> np.arange(len(self.stim_table), dtype=np.uint32)) & 1
        return self.stim_amplitudes(np.asarray(times, np.float64)[:, None]) @ bits.astype(np.float64)

    def stim_current(self, t: float) -> np.ndarray:
        amps = self.stim_amplitudes(t)
        if not amps.any():
            return np.zeros(self.n_cells)
        bits = (self.stim_mask[:, None] >> np.arange(len(amps), dtype=np.uint32)) & 1
        return bits @ amps

    def next_breakpoint(self, t: float) -> float:
        i = np.searchsorted(self.breakpoints, t * (1 + 1e-12) + 1e-12, side="right")
        return float(self.breakpoints[i]) if i < len(self.breakpoints) else self.t_end

    @property
    def step_dt(self) -> float:
        """The length of an accepted fixed step: the split step with ``solver.split_dt``, else dt."""
        s = self.cfg.solver
        return s.split_dt if s.split_dt > 0 else s.dt

    @property
    def substeps(self) -> int:
        """Cell-model steps of dt per accepted step (1 without splitting)."""
        return max(1, int(round(self.step_dt / self.cfg.solver.dt)))

    @property
    def fixed_steps(self) -> int:
        return max(1, int(round(self.t_end / self.step_dt)))

    @property
    def save_every(self) -> int:
        dt_save = self.cfg.output.dt_save
        return max(1, int(round(dt_save / self.step_dt))) if dt_save > 0 else 1


class Maps:
    """Activation and APD90 bookkeeping on accepted steps (NumPy twin of the CUDA code)."""

    def __init__(self, v_rest: np.ndarray, threshold: float):
        n = len(v_rest)
        self.v_rest = v_rest.astype(np.float64)
        self.threshold = threshold
        self.act_first = np.full(n, np.nan)
        self.act_last = np.full(n, np.nan)
        self.vmax = np.full(n, -np.inf)
        self.t_rep = np.full(n, np.nan)

    def observe(self, t0: float, v0: np.ndarray, t1: float, v1: np.ndarray) -> None:
        thr = self.threshold
        up = (v0 < thr) & (v1 >= thr)
        if up.any():
            tc = t0 + (thr - v0[up]) / (v1[up] - v0[up]) * (t1 - t0)
            first = np.isnan(self.act_first[up])
            idx = np.flatnonzero(up)
            self.act_first[idx[first]] = tc[first]
            self.act_last[idx] = tc
        active = ~np.isnan(self.act_first) & np.isnan(self.t_rep)
        if active.any():
            idx = np.flatnonzero(active)
            vmax = np.maximum(self.vmax[idx], v1[idx])
            self.vmax[idx] = vmax
            v90 = vmax - 0.9 * (vmax - self.v_rest[idx])
            a, b = v0[idx], v1[idx]
            down = (a > v90) & (b <= v90) & (vmax > thr)
            if down.any():
                k = idx[down]
                self.t_rep[k] = t0 + (a[down] - v90[down]) / (a[down] - b[down]) * (t1 - t0)

    def observe_steps(self, t: np.ndarray, v: np.ndarray) -> None:
        """:meth:`observe` on each step of a sequence: times ``t`` (K+1,) and V ``v`` (K+1, N),
        row 0 the state before the first step (the same result, per cell over all steps at once)."""
        thr = self.threshold
        t0, dt = t[:-1], np.diff(t)
        for c in range(v.shape[1]):
            a, b = v[:-1, c], v[1:, c]
            up = np.flatnonzero((a < thr) & (b >= thr))
            start = 0
            if len(up):
                tc = t0[up] + (thr - a[up]) / (b[up] - a[up]) * dt[up]
                if np.isnan(self.act_first[c]):
                    self.act_first[c], start = tc[0], up[0]
                self.act_last[c] = tc[-1]
            if np.isnan(self.act_first[c]) or not np.isnan(self.t_rep[c]):
                continue
            vmax = np.maximum(self.vmax[c], np.maximum.accumulate(b[start:]))
            v90 = vmax - 0.9 * (vmax - self.v_rest[c])
            aa, bb = a[start:], b[start:]
            down = np.flatnonzero((aa > v90) & (bb <= v90) & (vmax > thr))
            if len(down):
                k = down[0]
                self.vmax[c] = vmax[k]
                self.t_rep[c] = t0[start + k] + (aa[k] - v90[k]) / (aa[k] - bb[k]) * dt[start + k]
            elif len(vmax):
                self.vmax[c] = vmax[-1]

    @property
    def apd90(self) -> np.ndarray:
        return self.t_rep - self.act_first


def check_state(t: float, v: np.ndarray) -> None:
    bad = ~np.isfinite(v) | (np.abs(v) > V_LIMIT)
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        reason = "V is NaN" if np.isnan(v[k]) else f"|V| = {abs(v[k]):.4g} mV exceeds {V_LIMIT:g} mV"
        raise RunStopped(t, k, reason)


class Rows:
    """Rows appended one or many at a time into a growing array (a run's recordings): reading
    them back copies one block, not a list of small arrays."""

    def __init__(self, first):
        first = np.asarray(first, np.float64)
        self._data = np.empty((64,) + first.shape)
        self._n = 0
        self.append(first)

    @classmethod
    def of(cls, rows) -> "Rows":
        """Rows holding ``rows`` (at least one), as a checkpoint stored them."""
        rows = np.asarray(rows, np.float64)
        out = cls(rows[0])
        out.extend(rows[1:])
        return out

    def __len__(self) -> int:
        return self._n

    def append(self, row) -> None:
        self.extend(np.asarray(row, np.float64)[None])

    def extend(self, rows) -> None:
        rows = np.asarray(rows, np.float64)
        need = self._n + len(rows)
        if need > len(self._data):
            grown = np.empty((max(need, 2 * len(self._data)),) + self._data.shape[1:])
            grown[:self._n] = self._data[:self._n]
            self._data = grown
        self._data[self._n:need] = rows
        self._n = need

    def array(self) -> np.ndarray:
        return self._data[:self._n].copy()


def is_due(t: float, due: float) -> bool:
    """Whether an accepted step at ``t`` serves a recording due at ``due`` (the probes' tolerance)."""
    return t >= due * (1 - 1e-9)


class VoltageGrid:
    """V of the whole tissue at the first accepted step at or past each multiple of ``every``
    simulated ms (after ``t``, where it starts); :meth:`take` hands over what was kept since."""

    def __init__(self, every: float, t: float = 0.0, pending: Callable[[], None] | None = None):
        self.every = float(every)
        self._kept: list[tuple[float, np.ndarray]] = []
        self._pending = pending          # hands over what the engine still holds (CUDA: on the device)
        self.restart(t)

    def restart(self, t: float) -> None:
        """Continue from time ``t`` (a restored checkpoint): every multiple served by then is past."""
        self.due = self.due_after(t)

    def due_after(self, t: float) -> float:
        """The multiple due once a step at ``t`` served the ones before it."""
        return float((np.floor(t / (self.every * (1 - 1e-9))) + 1) * self.every)

    def offer(self, t: float, v: np.ndarray, copy: bool = True) -> None:
        """An accepted step's time and V: kept if a multiple is due (a copy, in V's own
        precision: the engine's loop pays for a copy only; ``copy=False``: ``v`` is the
        engine's to give, never written again)."""
        if is_due(t, self.due):
            self._kept.append((t, np.array(v) if copy else v))
            self.restart(t)

    def take(self) -> list[tuple[float, np.ndarray]]:
        """What was kept since the last take, V in float64."""
        if self._pending is not None:
            self._pending()
        kept, self._kept = self._kept, []
        return [(t, v.astype(np.float64, copy=False)) for t, v in kept]


class CpuTissue(EngineBase, renamed={"checkpoint": "state", "load": "restore"}):
    """The NumPy engine: state (S, N) in the config's precision, the same algorithm as CUDA."""

    name = "cpu"

    def __init__(self, problem: Problem):
        self.p = problem
        self.y = problem.y0.astype(problem.dtype)
        self.t = 0.0
        self.step_index = 0                 # fixed-step methods: t = step_index * dt
        s = problem.cfg.solver
        self.h = s.dt
        self.steps_accepted = 0
        self.steps_rejected = 0
        self.h_history: list[tuple[float, float]] = []
        self.maps = Maps(problem.y0[0], problem.cfg.output.activation_threshold)
        self._probe_t = Rows(0.0)
        self._probe_v = Rows(self.y[0, problem.probes])
        self._next_save = problem.cfg.output.dt_save
        self.record_states = problem.n_cells == 1    # single cell: keep every state
        self._states = Rows(self.y[:, 0]) if self.record_states else None
        self._state_t = Rows(0.0) if self.record_states else None
        self.grids: list[VoltageGrid] = []
        self._diffusion_stages = self._rkc_stages()

    def _rkc_stages(self) -> dict[float, int]:
        """Stages of the diffusion super-step over the whole and half the split step."""
        return super_step_stages(self.p.mesh.inv_d2, self.p.D, self.p.cfg.solver.split_dt)

    def keep_voltage(self, every: float) -> VoltageGrid:
        """V of the whole tissue every ``every`` simulated ms from now on (see :class:`VoltageGrid`)."""
        self.grids.append(VoltageGrid(every, self.t))
        return self.grids[-1]

    def set_tissue(self, inv_d2: np.ndarray, param_field: np.ndarray | None) -> None:
        """Steering: new diffusion weights (N, K) and per-cell parameters (P, N; only the
        ``varying`` rows may differ from the config's), taken from the next step on."""
        if self.p.tableau is None:
            raise ConfigError("the implicit solver builds its Jacobian once: it takes no changes "
                              "of the tissue while running; use an explicit method")
        self.p.mesh = replace(self.p.mesh, inv_d2=inv_d2)
        if param_field is not None:
            self.p.param_field = param_field
        self._diffusion_stages = self._rkc_stages()

    # ---- the right-hand side ------------------------------------------------------------
    def f(self, t: float, y: np.ndarray, diffusion: bool = True):
        """``(dng, a, b)`` with diffusion in dV/dt unless not ``diffusion`` (and ``jng`` for
        GRL1: the model's own)."""
        p = self.p
        out = p.model.rates(y, p.stim_current(t).astype(y.dtype), p.cell_params)
        if diffusion and p.mesh.n_cells > 1 and p.D > 0:
            out[0][0] = out[0][0] + p.mesh.laplacian(y[0], p.D).astype(y.dtype)
        return out

    @property
    def finished(self) -> bool:
        if self.p.tableau is not None and not self.p.tableau.adaptive:
            return self.step_index >= self.p.fixed_steps
        return self.t >= self.p.t_end * (1 - 1e-12)

    @functools.cached_property
    def implicit(self):
        """The implicit solver (:mod:`.implicit`) of a run whose method is one."""
        from app.sims.cardiac.implicit import CvodeCell
        p, s = self.p, self.p.cfg.solver
        solver = CvodeCell(p.model, p.cell_params, self.y.astype(np.float64), p.stim_current, p.breakpoints,
                           p.t_end, s.at, s.rt, s.dt_max, s.dt_min, p.mesh.neighbours, p.mesh.inv_d2, p.cfg.D)
        self.compile_seconds = getattr(self, "compile_seconds", 0.0) + solver.compile_seconds
        return solver

    def _advance_implicit(self, max_steps: int) -> None:
        """Whole stretches between pulse edges (CVODE's steps in one call each) until at least
        ``max_steps`` steps are done."""
        solver, done = self.implicit, 0
        while done < max_steps and not self.finished:
            t, y, error = solver.segment()
            if len(t):
                self._accept_steps(t, y)
                done += len(t)
            if error:
                raise RunStopped(self.t, 0, error)

    def _accept_steps(self, t: np.ndarray, y: np.ndarray) -> None:
        """Accept steps at times ``t`` (K,) with states ``y`` (K, S, N), each as :meth:`_accept`
        would (maps, recordings, history); a bad state stops the run after the steps before it."""
        v = y[:, 0, :]
        bad = np.flatnonzero((~np.isfinite(v) | (np.abs(v) > V_LIMIT)).any(axis=1))
        n_ok = int(bad[0]) if len(bad) else len(t)
        if n_ok:
            t_ok, y_ok, p = t[:n_ok], y[:n_ok], self.p
            tt = np.concatenate([[self.t], t_ok])
            self.maps.observe_steps(tt, np.concatenate([self.y[:1].astype(np.float64), y_ok[:, 0, :]]))
            self.h_history.extend(zip(t_ok.tolist(), np.diff(tt).tolist()))
            dt_save = p.cfg.output.dt_save
            due = np.ones(n_ok, bool)
            if dt_save > 0:
                for k, tk in enumerate(t_ok.tolist()):
                    due[k] = tk >= self._next_save * (1 - 1e-9)
                    while due[k] and self._next_save <= tk * (1 + 1e-9):
                        self._next_save += dt_save
                due[-1] |= t_ok[-1] >= p.t_end * (1 - 1e-12)
            self._probe_t.extend(t_ok[due])
            self._probe_v.extend(y_ok[due][:, 0, p.probes])
            if self._states is not None and self._state_t is not None:
                self._states.extend(y_ok[:, :, 0])
                self._state_t.extend(t_ok)
            for grid in self.grids:
                for k, tk in enumerate(t_ok.tolist()):
                    grid.offer(tk, y_ok[k, 0])
            self.y, self.t = y_ok[-1].astype(p.dtype), float(t_ok[-1])
            self.steps_accepted += n_ok
        if len(bad):
            check_state(float(t[n_ok]), v[n_ok])

    def advance(self, max_steps: int) -> None:
        """Up to ``max_steps`` attempted steps, stopping at t_end."""
        tab, s = self.p.tableau, self.p.cfg.solver
        if tab is None:
            self._advance_implicit(max_steps)
            return
        for _ in range(max_steps):
            if self.finished:
                return
            t0, y0 = self.t, self.y
            if s.split_dt > 0:
                self._accept(self._split_step(), (self.step_index + 1) * s.split_dt)
                self.step_index += 1
                continue
            if not tab.adaptive:
                high, _ = rk_step(self.f, t0, y0, s.dt, tab, self.p.n_nongating, self.p.model.blocks)
                self._accept(high, (self.step_index + 1) * s.dt)
                self.step_index += 1
                continue
            limit = min(self.p.next_breakpoint(t0), self.p.t_end) - t0
            h = min(self.h, s.dt_max, limit)
            if self.h < s.dt_min:
                raise RunStopped(t0, self._worst_cell(), f"step size {self.h:.3g} ms fell below the floor "
                                 f"dt_min = {s.dt_min:g} ms")
            if isinstance(tab, Rosenbrock):
                high, low = self._rosenbrock_step(t0, y0, h, tab)
            else:
                high, low = rk_step(self.f, t0, y0, h, tab, self.p.n_nongating)
            ratio = error_ratio(high, low, y0, s.at, s.rt)
            self.h = next_step(h, ratio, tab.order_low, s.safety, s.fac_min, s.fac_max)
            if ratio <= 1.0:
                self.h_history.append((t0 + h, h))
                self._accept(high, t0 + h)
            else:
                self.steps_rejected += 1
                self._last_bad = (high, low, y0)

    def _rosenbrock_step(self, t: float, y0: np.ndarray, h: float, tab: Rosenbrock):
        """One step of a Rosenbrock method (:mod:`.rosenbrock`): f and the full Jacobian at the
        step's start from the model ``with_full_jacobian``, the later stages from the model alone.
        The stimulus is constant within the step (no step crosses a pulse edge); it is taken at
        the step's middle, inside the step even where t + h misses an edge by an ulp."""
        p = self.p
        if "plain_model" not in p.extra:
            p.extra["plain_model"] = CellModel(p.model.imported)
        plain, i_st = p.extra["plain_model"], p.stim_current(t + 0.5 * h).astype(y0.dtype)
        dng, a, b, entries = p.model.rates(y0, i_st, p.cell_params)
        f0 = np.concatenate([dng, a * y0[p.n_nongating:] + b])
        jac = dense_jacobian(p.model.jacobian_pattern, entries, p.model.n_states)
        return rosenbrock_step(lambda y: plain.derivative(y, i_st, p.cell_params), y0, f0, jac, h, tab)

    def _split_step(self) -> np.ndarray:
        """One split step (:mod:`.splitting`): the cell model alone by ``substeps`` steps of dt,
        the stimulus at each substep's time, then V alone by the RKC1 diffusion super-step
        (Strang: half of it before the substeps, half after)."""
        p, dt = self.p, self.p.cfg.solver.dt
        k = p.substeps
        strang = p.cfg.solver.split == "strang"
        y = self._diffuse(self.y, 0.5) if strang else self.y
        for i in range(k):
            y = self._cell_step((self.step_index * k + i) * dt, y)
        return self._diffuse(y, 0.5 if strang else 1.0)

    def _diffuse(self, y: np.ndarray, fraction: float) -> np.ndarray:
        """``y`` with V advanced by the diffusion alone over ``fraction`` of the split step."""
        p = self.p
        if p.mesh.n_cells == 1 or p.D == 0:
            return y
        out = y.copy()
        out[0] = rkc1_step(y[0].astype(np.float64), fraction * p.cfg.solver.split_dt,
                           lambda u: p.mesh.laplacian(u, p.D), self._diffusion_stages[fraction])
        return out

    def _cell_step(self, t: float, y: np.ndarray) -> np.ndarray:
        """The cell model alone (no diffusion) over one step of dt from (t, y)."""
        p = self.p
        high, _ = rk_step(lambda tt, yy: self.f(tt, yy, False), t, y, p.cfg.solver.dt, p.tableau,
                          p.n_nongating, p.model.blocks)
        return high

    def _worst_cell(self) -> int:
        bad = getattr(self, "_last_bad", None)
        if bad is None:
            return 0
        high, low, y0 = bad
        s = self.p.cfg.solver
        with np.errstate(invalid="ignore"):
            err = np.nan_to_num(np.abs(high - low) / (s.at + s.rt * np.abs(y0)), nan=np.inf)
        return int(np.argmax(err.max(axis=0)))

    def _accept(self, y_new: np.ndarray, t_new: float) -> None:
        check_state(t_new, y_new[0])
        t0, v0 = self.t, self.y[0]
        self.y, self.t = y_new, t_new
        self.steps_accepted += 1
        self.maps.observe(t0, v0.astype(np.float64), t_new, y_new[0].astype(np.float64))
        p = self.p
        if p.tableau is not None and not p.tableau.adaptive:
            due = self.steps_accepted % p.save_every == 0 or self.finished
        else:
            due = p.cfg.output.dt_save == 0 or t_new >= self._next_save * (1 - 1e-9) or self.finished
            if due and p.cfg.output.dt_save > 0:
                while self._next_save <= t_new * (1 + 1e-9):
                    self._next_save += p.cfg.output.dt_save
        if due:
            self._probe_t.append(t_new)
            self._probe_v.append(y_new[0, p.probes])
        if self._states is not None and self._state_t is not None:
            self._states.append(y_new[:, 0])
            self._state_t.append(t_new)
        for grid in self.grids:
            grid.offer(t_new, y_new[0])

    # ---- read-back -----------------------------------------------------------------------
    def voltage(self) -> np.ndarray:
        return self.y[0].astype(np.float64)

    def states(self) -> np.ndarray:
        return self.y.astype(np.float64)

    def recordings(self) -> tuple[np.ndarray, np.ndarray]:
        return self._probe_t.array(), self._probe_v.array()

    def cell_history(self) -> tuple[np.ndarray, np.ndarray] | None:
        if self._states is None or self._state_t is None:
            return None
        return self._state_t.array(), self._states.array().T

    def activation(self) -> dict[str, np.ndarray]:
        return {"activation_time": self.maps.act_first, "activation_last": self.maps.act_last,
                "apd90": self.maps.apd90}

    def activation_time(self) -> np.ndarray:
        """The first activation time per node (NaN: not yet), the map a running frame shows."""
        return self.maps.act_first

    def state(self) -> dict[str, np.ndarray]:
        pt, pv = self.recordings()
        m = self.maps
        return {"y": self.y, "t": np.float64(self.t), "step_index": np.int64(self.step_index),
                "h": np.float64(self.h), "accepted": np.int64(self.steps_accepted),
                "rejected": np.int64(self.steps_rejected), "probe_t": pt, "probe_v": pv,
                "next_save": np.float64(self._next_save), "act_first": m.act_first,
                "act_last": m.act_last, "vmax": m.vmax, "t_rep": m.t_rep}

    def restore(self, st: dict[str, np.ndarray]) -> None:
        if "y" not in st:
            raise ValueError("this checkpoint was written by the CUDA engine; resume it with the CUDA engine")
        self.y = np.asarray(st["y"]).astype(self.p.dtype)
        self.t, self.step_index, self.h = float(st["t"]), int(st["step_index"]), float(st["h"])
        self.steps_accepted, self.steps_rejected = int(st["accepted"]), int(st["rejected"])
        self._probe_t, self._probe_v = Rows.of(st["probe_t"]), Rows.of(st["probe_v"])
        self._next_save = float(st["next_save"])
        m = self.maps
        m.act_first, m.act_last = np.array(st["act_first"]), np.array(st["act_last"])
        m.vmax, m.t_rep = np.array(st["vmax"]), np.array(st["t_rep"])
        for grid in self.grids:
            grid.restart(self.t)
        if self.p.tableau is None:
            self.implicit.reset(self.t, self.y.astype(np.float64))
