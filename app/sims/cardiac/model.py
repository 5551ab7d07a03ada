"""The cell model as every engine sees it: an imported CellML model (:mod:`.cellml`) and the
programs printed from its one expression tree (:mod:`app.compute.codegen`).

State order: the non-gating states (the membrane voltage first), then the Rush–Larsen gates
(the coupled ones first: :meth:`CellModel.with_coupled_stepped`).
Every program computes, for one cell or many, the outputs ``(dng, a, b)``: the non-gating
derivatives (without diffusion) and each gate's ``dx/dt = a·x + b`` coefficients, from the
states, the stimulus ``i_st`` (µA/µF, negative depolarises) and the parameters; a model
``with_jacobian`` adds ``jng``, each non-gating derivative's derivative by its own state (the
diagonal of the Jacobian, symbolic: :mod:`app.compute.codegen.differentiate`; a gate's is its
``a``), for the generalized Rush–Larsen method, then the entries of its Markov chains'
matrices and fast groups' Jacobian blocks (:attr:`CellModel.blocks`); a model
``with_full_jacobian`` adds instead the structurally non-zero entries of the whole Jacobian of
its y-form (non-gating dy/dt, each gate's a·x + b) at :attr:`CellModel.jacobian_pattern`, for
the Rosenbrock method (:mod:`.rosenbrock`).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Mapping

import numpy as np

from app.compute.codegen import (SIMD_FUNCTIONS, Binary, Call, Code, Name, Node, Num, names_used, to_c, to_numpy,
                                 to_python)
from app.compute.codegen.differentiate import jacobian_columns, jacobian_entries
from app.compute.codegen.strength import reduce_strength
from app.compute.codegen.lookup import LookupPlan, entry_name, plan_lookup, tabulate, variable_only
from app.package_data import data_dir
from app.sims.cardiac.linear_step import MARGIN, grl1_radius
from app.sims.cardiac.markov import STABILITY_STEP, Block, block_entries, fast_groups
from app.sims.cardiac.cellml import I_ST, CellMLImportError, Equation, ImportedModel, Parameter, import_cellml

V_INDEX = 0
JACOBIAN_PREFIX = "grl_jac"     # the diagonal Jacobian's equations (checked against the model's names)
FULL_JACOBIAN_PREFIX = "ros_jac"    # the full Jacobian's equations (likewise)
DEFAULT_MODEL = "courtemanche_ramirez_nattel_1998"


def models_folder() -> Path:
    return data_dir("resources") / "models" / "cardiac"


def shipped_models() -> dict[str, Path]:
    """Name -> file of the CellML models shipped with the application."""
    return {p.stem: p for p in sorted(models_folder().glob("*.cellml"))}


def model_path(name_or_path: str) -> Path:
    """A shipped model's name, or a path to a CellML file."""
    shipped = shipped_models()
    if name_or_path in shipped:
        return shipped[name_or_path]
    path = Path(name_or_path).expanduser()
    if path.suffix.lower() in (".cellml", ".xml") and path.is_file():
        return path
    raise CellMLImportError(f"model '{name_or_path}': neither a shipped model ({', '.join(shipped)}) "
                            "nor an existing .cellml file")


def _symbol(name: str) -> str:
    return f"m_{name}"


class _SafeMath:
    """``math`` for the scalar program: overflow gives inf as in C (other domain errors raise
    and the caller falls back to the NumPy program)."""

    inf, pi, e = math.inf, math.pi, math.e
    log, sqrt, expm1 = math.log, math.sqrt, math.expm1

    @staticmethod
    def exp(x: float) -> float:
        return math.exp(x) if x < 709.0 else math.inf

    @staticmethod
    def pow(x: float, y: float) -> float:
        try:
            return math.pow(x, y)
        except OverflowError:
            return math.inf


@dataclass(frozen=True)
class LookupSpec:
    """Voltage lookup tables: ``v_min``..``v_max`` mV every ``step`` mV, linear interpolation;
    outside the range the entries are evaluated directly."""

    v_min: float = -120.0
    v_max: float = 80.0
    step: float = 0.02

    @property
    def rows(self) -> int:
        return int(round((self.v_max - self.v_min) / self.step)) + 1

    def grid(self) -> np.ndarray:
        return self.v_min + self.step * np.arange(self.rows)


@dataclass(frozen=True)
class CellModel:
    """An imported model: names, initial state, parameters and the printed programs; with
    ``lookup`` set, the programs read the voltage-only parts from tables (:meth:`with_lookup`)."""

    imported: ImportedModel
    lookup: LookupSpec | None = None
    varying: tuple[int, ...] = ()      # parameters that differ between cells (not in tables)
    rl_step: float | None = None       # fixed Rush–Larsen step whose gate updates are tabulated
    jacobian: bool = False             # outputs jng too (the non-gating states' diagonal Jacobian)
    full_jacobian: bool = False        # outputs the whole Jacobian's entries instead (jacobian_pattern)

    @property
    def name(self) -> str:
        return self.imported.name

    @property
    def states(self) -> tuple[str, ...]:
        return self.imported.state_qnames

    @property
    def n_states(self) -> int:
        return len(self.imported.states)

    @property
    def n_gates(self) -> int:
        return self.imported.n_gates

    @property
    def n_nongating(self) -> int:
        return self.n_states - self.n_gates

    @property
    def gates(self) -> tuple[str, ...]:
        return self.states[self.n_nongating:]

    @property
    def nongating(self) -> tuple[str, ...]:
        return self.states[:self.n_nongating]

    @property
    def parameters(self) -> tuple[Parameter, ...]:
        return self.imported.parameters

    @property
    def parameter_names(self) -> tuple[str, ...]:
        """The parameters' CellML names (``component.variable``): the config's keys."""
        return tuple(p.qname for p in self.parameters)

    def parameter_vector(self, values: Mapping[str, float] | None = None) -> np.ndarray:
        values = dict(values or {})
        unknown = set(values) - set(self.parameter_names)
        if unknown:
            raise ValueError(f"unknown parameters {sorted(unknown)} of model {self.name}; valid: "
                             f"{', '.join(self.parameter_names)}")
        return np.array([float(values.get(p.qname, p.default)) for p in self.parameters])

    def initial_state(self) -> np.ndarray:
        return np.array(self.imported.initial, dtype=float)

    def with_coupled_stepped(self) -> "CellModel":
        """This model with its coupled gates (``imported.n_coupled``: rates that read another
        state than V, e.g. a Markov chain's or a buffer's) as non-gating states whose output is
        ``a·x + b``: what the adaptive methods integrate (Rush–Larsen freezes the other states
        over the step, an error their embedded estimate cannot see). The state order is
        unchanged."""
        m = self.imported
        nc = m.n_coupled
        if nc == 0:
            return self
        ng, n_gates = len(m.states) - m.n_gates, m.n_gates
        coupled = m.states[ng:ng + nc]
        taken = {e.name for e in m.equations}
        derivs = [Equation(f"dt_{s}", Binary("+", Binary("*", Name(m.outputs[ng + g]), Name(s)),
                                                 Name(m.outputs[ng + n_gates + g])))
                  for g, s in enumerate(coupled)]
        assert not taken & {e.name for e in derivs}, "a coupled gate's derivative name is taken"
        outputs = (m.outputs[:ng] + tuple(e.name for e in derivs) + m.outputs[ng + nc:ng + n_gates]
                   + m.outputs[ng + n_gates + nc:])
        stepped = replace(m, n_gates=n_gates - nc, n_coupled=0, equations=m.equations + tuple(derivs),
                          outputs=outputs, chains=())       # chains are gates: none left to step together
        return CellModel(stepped, self.lookup, self.varying, self.rl_step)

    # ---- lookup tables ------------------------------------------------------------------
    def with_lookup(self, spec: LookupSpec | None, varying: tuple[int, ...] = (),
                    rl_step: float | None = None) -> "CellModel":
        """This model with its voltage-only parts read from tables (``None``: evaluated
        directly); parameters in ``varying`` differ between cells and stay out of the tables.

        ``rl_step``: the programs are for Rush–Larsen forward Euler with this fixed step only:
        a gate whose ``a`` and ``b`` depend on V alone outputs ``exp(h·a)`` and
        ``b·expm1(h·a)/a`` instead (tabulated), so its update is ``x ← a·x + b``
        (:attr:`table_gates`), as openCARP's tables do."""
        if spec is None:
            return CellModel(self.imported, jacobian=self.jacobian, full_jacobian=self.full_jacobian)
        return CellModel(self.imported, spec, tuple(varying), rl_step, self.jacobian, self.full_jacobian)

    def with_jacobian(self) -> "CellModel":
        """This model with the outputs ``jng`` (see the module's head)."""
        return CellModel(self.imported, self.lookup, self.varying, self.rl_step, jacobian=True)

    def with_full_jacobian(self) -> "CellModel":
        """This model with the whole Jacobian's entries as outputs after the b's (see the
        module's head; no lookup tables: a Rosenbrock step needs the Jacobian of the f it steps)."""
        if self.lookup is not None or self.rl_step is not None:
            raise ValueError("the full Jacobian is of the model evaluated directly (no lookup tables)")
        return CellModel(self.imported, full_jacobian=True)

    @property
    def _fixed(self) -> set[str]:
        return {p.name for k, p in enumerate(self.parameters) if k not in self.varying}

    @functools.cached_property
    def _program(self) -> tuple[tuple[tuple[str, Node], ...], tuple[str, ...], tuple[int, ...], tuple[Block, ...]]:
        """The equations, the outputs, the gates updated from tables (see ``rl_step``) and the
        blocks (see :attr:`blocks`)."""
        m = self.imported
        eqs, outs = [(e.name, reduce_strength(e.tree)) for e in m.equations], list(m.outputs)
        table_gates = []
        if self.rl_step is not None:
            ng, n_gates = self.n_nongating, self.n_gates
            voltage_only = variable_only(eqs, m.states[V_INDEX], self._fixed)
            for g in range(n_gates):
                a, b = outs[ng + g], outs[ng + n_gates + g]
                if a in voltage_only and b in voltage_only:
                    ha = Binary("*", Num(float(self.rl_step)), Name(a))
                    eqs += [(f"rl_{g}_E", Call("exp", (ha,))),
                            (f"rl_{g}_B", Binary("/", Binary("*", Name(b), Call("expm1", (ha,))), Name(a)))]
                    outs[ng + g], outs[ng + n_gates + g] = f"rl_{g}_E", f"rl_{g}_B"
                    table_gates.append(g)
        blocks: list[Block] = []
        if self.jacobian:
            ng, n_gates = self.n_nongating, self.n_gates
            jac_eqs, diagonal = jacobian_entries(eqs, list(zip(m.outputs[:ng], m.states[:ng])), JACOBIAN_PREFIX)
            eqs += [(name, reduce_strength(tree)) for name, tree in jac_eqs]
            eqs += [(f"{JACOBIAN_PREFIX}{k}", reduce_strength(tree)) for k, tree in enumerate(diagonal)]
            outs += [f"{JACOBIAN_PREFIX}{k}" for k in range(ng)]
            rates: dict[str, tuple[str, str | None]] = {s: (m.outputs[k], None) for k, s in enumerate(m.states[:ng])}
            rates |= {s: (m.outputs[ng + g], m.outputs[ng + n_gates + g]) for g, s in enumerate(m.states[ng:])}
            groups = list(m.chains) + [tuple(m.states[k] for k in g) for g in self.fast_groups]
            index = {s: k for k, s in enumerate(m.states)}
            for c, group in enumerate(groups):
                prefix = f"{JACOBIAN_PREFIX}c{c}_"
                entry_eqs, entries = block_entries(eqs, group, rates, prefix)
                eqs += [(name, reduce_strength(tree)) for name, tree in entry_eqs]
                blocks.append(Block(tuple(index[s] for s in group), tuple((i, j) for i, j, _ in entries),
                                    len(outs) - ng - 2 * n_gates))
                eqs += [(f"{prefix}{e}", reduce_strength(tree)) for e, (_, _, tree) in enumerate(entries)]
                outs += [f"{prefix}{e}" for e in range(len(entries))]
        if self.full_jacobian:
            eqs, outs = self._full_jacobian(eqs, outs)
        return tuple(eqs), tuple(outs), tuple(table_gates), tuple(blocks)

    def _full_jacobian(self, eqs: list[tuple[str, Node]], outs: list[str]) -> tuple[list, list]:
        """The program with the whole Jacobian of the y-form appended (see :meth:`_jacobian_entries`)."""
        extra, entries = self._jacobian_entries
        eqs = eqs + extra + [(f"{FULL_JACOBIAN_PREFIX}{e}", tree) for e, (_, _, tree) in enumerate(entries)]
        return eqs, outs + [f"{FULL_JACOBIAN_PREFIX}{e}" for e in range(len(entries))]

    @functools.cached_property
    def _jacobian_entries(self) -> tuple[list[tuple[str, Node]], list[tuple[int, int, Node]]]:
        """The equations of the y-form's gate derivatives (a·x + b) and of the whole Jacobian
        (:func:`~app.compute.codegen.differentiate.jacobian_columns`, strength-reduced), and the
        entries ``(row, column, tree)`` not identically 0."""
        m = self.imported
        ng, n_gates = self.n_nongating, self.n_gates
        eqs = [(e.name, reduce_strength(e.tree)) for e in m.equations]
        if any(n.startswith(FULL_JACOBIAN_PREFIX) for n in {name for name, _ in eqs} | set(m.states)):
            raise ValueError(f"model {self.name}: a name starts with {FULL_JACOBIAN_PREFIX!r}, the Jacobian's prefix")
        gate_f = [(f"{FULL_JACOBIAN_PREFIX}f{g}",
                   Binary("+", Binary("*", Name(m.outputs[ng + g]), Name(s)), Name(m.outputs[ng + n_gates + g])))
                  for g, s in enumerate(m.states[ng:])]
        field = list(m.outputs[:ng]) + [name for name, _ in gate_f]
        jac_eqs, entries = jacobian_columns(eqs + gate_f, field, m.states, FULL_JACOBIAN_PREFIX + "d")
        extra = gate_f + [(name, reduce_strength(tree)) for name, tree in jac_eqs]
        return extra, [(i, j, reduce_strength(tree)) for i, j, tree in entries]

    @property
    def jacobian_pattern(self) -> tuple[tuple[int, int], ...]:
        """(row, column) of each entry a model ``with_full_jacobian`` outputs after the b's."""
        return tuple((i, j) for i, j, _ in self._jacobian_entries[1])

    @property
    def blocks(self) -> tuple[Block, ...]:
        """The states GRL1 steps together: the Markov chains, then the fast groups
        (:mod:`.markov`; a model ``with_jacobian`` only, whose ``jng`` rows after the diagonal
        hold their blocks' entries)."""
        return self._program[3]

    @functools.cached_property
    def fast_groups(self) -> tuple[tuple[int, ...], ...]:
        """State indices of each fast group (:func:`.markov.fast_groups`), from the Jacobian at
        the initial state with the default parameters; none where it is not finite there. A
        group with which GRL1's step of :data:`.markov.STABILITY_STEP` amplifies more at rest
        than without it (:func:`.linear_step.grl1_radius`) is left out."""
        m = self.imported
        ng = self.n_nongating
        plain = CellModel(m)
        jac = plain.numeric_jacobian(plain.initial_state(), plain.parameter_vector())
        if not np.all(np.isfinite(jac)):
            return ()
        index = {s: k for k, s in enumerate(m.states)}
        kept = [tuple(index[s] for s in c) for c in m.chains]
        eligible = [k for k in range(ng + m.n_coupled) if m.states[k] not in {s for c in m.chains for s in c}]
        groups = []
        for group in fast_groups(jac, eligible):        # none that makes GRL1's tissue step less stable
            before = grl1_radius(jac, STABILITY_STEP, kept)
            if grl1_radius(jac, STABILITY_STEP, kept + [group]) <= before * (1 + MARGIN):
                kept.append(group)
                groups.append(group)
        return tuple(groups)

    def numeric_jacobian(self, y: np.ndarray, params: np.ndarray) -> np.ndarray:
        """dy/dt's Jacobian (S, S) at ``y`` (S,) by central differences of :meth:`derivative`
        (each state's step its size times 1e-6)."""
        n = len(y)
        out = np.empty((n, n))
        with np.errstate(all="ignore"):
            for j in range(n):
                step = 1e-6 * max(abs(y[j]), 1e-6)
                up, down = y.copy(), y.copy()
                up[j] += step
                down[j] -= step
                out[:, j] = (self.derivative(up[:, None], 0.0, params)[:, 0]
                             - self.derivative(down[:, None], 0.0, params)[:, 0]) / (2 * step)
        return out

    @property
    def outputs(self) -> tuple[str, ...]:
        return self._program[1]

    @property
    def table_gates(self) -> tuple[int, ...]:
        """Gates whose outputs are their update's coefficients (``rl_step``), not a and b."""
        return self._program[2]

    @functools.cached_property
    def lookup_plan(self) -> LookupPlan | None:
        if self.lookup is None:
            return None
        eqs, outs = self._program[:2]
        return plan_lookup(eqs, outs, self.imported.states[V_INDEX], self._fixed)

    @functools.cached_property
    def _tables(self) -> dict:
        return {}

    def table(self, params: np.ndarray) -> np.ndarray:
        """The lookup table for parameter values ``params`` ((P,), or (P, N) per cell: the
        fixed ones are the same in every cell), flat float64: for each row (voltage) and entry,
        the value and its difference to the next row."""
        return self._table_pair(params)[0]

    def _table_pair(self, params: np.ndarray) -> tuple[np.ndarray, list[float]]:
        """:meth:`table` and the same as Python floats (what the scalar program indexes)."""
        if self.lookup is None:
            raise ValueError(f"model {self.name} has no lookup tables")
        values = np.asarray(params, np.float64)
        values = values[:, 0] if values.ndim == 2 else values
        key = values.tobytes()
        if key not in self._tables:
            fixed = {p.name: float(values[k]) for k, p in enumerate(self.parameters) if k not in self.varying}
            plan = self.lookup_plan
            assert plan is not None
            pairs = tabulate(plan, self.lookup.grid(), fixed)
            if len(self._tables) > 8:
                self._tables.clear()
            self._tables[key] = (pairs.ravel(), pairs.ravel().tolist())
        return self._tables[key]

    # ---- printed programs ---------------------------------------------------------------
    def _inputs(self, state: Callable[[int], str], param: Callable[[int], str], stim: str) -> list[tuple[str, str]]:
        m = self.imported
        out = [(_symbol(s), state(k)) for k, s in enumerate(m.states)]
        out += [(_symbol(p.name), param(k)) for k, p in enumerate(m.parameters)]
        return out + [(_symbol(I_ST), stim)]

    def _python_body(self, printer: Callable, numpy: bool) -> list[str]:
        """Statements of the Python (or NumPy) program: inputs, then the equations; with tables
        the prelude, the lookup (direct evaluation outside the table) and the rest."""
        def assign(name: str, tree: Node) -> str:
            return f"{_symbol(name)} = {printer(tree, _symbol)}"

        lines = [f"{a} = {b}" for a, b in self._inputs(lambda k: f"y[{k}]", lambda k: f"p[{k}]", "i_st")]
        plan, spec = self.lookup_plan, self.lookup
        if plan is None or spec is None:
            return lines + [assign(n, t) for n, t in self._program[0]]
        lines += [assign(n, t) for n, t in plan.prelude]
        width, last = 2 * plan.n_entries, float(spec.rows - 1)
        lines.append(f"lut_x = ({_symbol(plan.variable)} - {spec.v_min!r}) * {1.0 / spec.step!r}")
        entries = [(_symbol(entry_name(k)), f"lut[lut_r + {2 * k}] + lut_f * lut[lut_r + {2 * k + 1}]", e)
                   for k, e in enumerate(plan.entries)]
        if numpy:
            lines += [f"lut_ok = (lut_x >= 0.0) & (lut_x < {last!r})",
                      "lut_i = np.where(lut_ok, lut_x, 0.0).astype(np.int64)",
                      "lut_f = lut_x - lut_i", f"lut_r = lut_i * {width}"]
            lines += [assign(n, t) for n, t in plan.helpers]
            lines += [f"{s} = np.where(lut_ok, {read}, {printer(e, _symbol)})" for s, read, e in entries]
        else:
            lines += [f"if lut_x >= 0.0 and lut_x < {last!r}:", "    lut_i = int(lut_x)",
                      "    lut_f = lut_x - lut_i", f"    lut_r = lut_i * {width}"]
            lines += [f"    {s} = {read}" for s, read, _ in entries]
            lines.append("else:")
            lines += ["    " + assign(n, t) for n, t in plan.helpers]
            lines += [f"    {s} = {printer(e, _symbol)}" for s, _, e in entries]
        return lines + [assign(n, t) for n, t in plan.main]

    def _function(self, func_name: str, body: list[str]) -> str:
        args = "y, i_st, p, lut" if self.lookup is not None else "y, i_st, p"
        outs = ", ".join(_symbol(o) for o in self.outputs)
        return "\n".join([f"def {func_name}({args}):", *("    " + x for x in body),
                          f"    return ({outs},)"]) + "\n"

    def python_source(self, func_name: str = "cell_rates") -> str:
        """``func_name(y, i_st, p[, lut])`` on floats (``y[k]``, ``p[k]``, ``lut`` the flat
        :meth:`table`) returning the outputs as a tuple: run as Python or compiled by numba."""
        return self._function(func_name, self._python_body(to_python, numpy=False))

    def simd_statements(self, state: Callable[[int], str], cell_parameter: Callable[[int], str], stim: str,
                        varying: tuple[int, ...] = ()) -> tuple[list[str], list[str], list[str], list[str]]:
        """The model for the fast-CPU loop over cells that LLVM vectorises (without tables):
        statements before the loop (the parameters every cell shares, ``pconst[k]``),
        statements for one cell (state ``k`` from ``state(k)``, the parameter in ``varying`` at
        position ``slot`` from ``cell_parameter(slot)``, the stimulus from ``stim``; printed with
        :data:`~app.compute.codegen.SIMD_FUNCTIONS`), the states' variables and the outputs'."""
        if self.lookup is not None:
            raise ValueError("the vectorised program has no lookup tables")
        slot = {k: j for j, k in enumerate(varying)}
        inputs = self._inputs(state, lambda k: cell_parameter(slot[k]) if k in slot else f"pconst[{k}]", stim)
        shared = [f"{a} = {b}" for a, b in inputs if b.startswith("pconst[")]
        per_cell = [f"{a} = {b}" for a, b in inputs if not b.startswith("pconst[")]
        per_cell += [f"{_symbol(n)} = {to_python(t, _symbol, SIMD_FUNCTIONS)}" for n, t in self._program[0]]
        states = [_symbol(name) for name in self.imported.states]
        return shared, per_cell, states, [_symbol(o) for o in self.outputs]

    def numpy_source(self, func_name: str = "rates") -> str:
        return self._function(func_name, self._python_body(to_numpy, numpy=True))

    @functools.cached_property
    def _numpy(self):
        scope: dict = {"np": np}
        exec(compile(self.numpy_source(), f"<{self.name} numpy>", "exec"), scope)  # noqa: S102
        return scope["rates"]

    @functools.cached_property
    def _scalar(self):
        scope: dict = {"math": _SafeMath, "min": min, "max": max, "abs": abs}
        exec(compile(self.python_source(), f"<{self.name} scalar>", "exec"), scope)  # noqa: S102
        return scope["cell_rates"]

    def _split(self, out, dtype):
        ng, nga = self.n_nongating, self.n_gates
        rows = np.stack(np.broadcast_arrays(*[np.asarray(o, dtype=dtype) for o in out]))
        parts = (rows[:ng], rows[ng:ng + nga], rows[ng + nga:ng + 2 * nga])     # no gates: empty a and b
        return parts + (rows[ng + 2 * nga:],) if self.jacobian or self.full_jacobian else parts

    def rates(self, y: np.ndarray, i_st, params: np.ndarray):
        """``(dng, a, b)`` (and ``jng`` ``with_jacobian``) at states ``y`` (S, ...) with stimulus
        ``i_st``; ``params`` (P,) or (P, ...) per cell."""
        lut = () if self.lookup is None else self._table_pair(params)
        if y.ndim == 2 and y.shape[1] == 1 and np.ndim(i_st) <= 1 and np.ndim(params) == 1:
            try:      # one cell: plain floats, ~50x less overhead than NumPy on 1-element arrays
                vals = self._scalar([float(v) for v in y[:, 0]], float(np.ravel(i_st)[0]),
                                    [float(q) for q in params], *lut[1:])
                return tuple(part[:, None] for part in self._split(vals, y.dtype))
            except (ArithmeticError, ValueError):
                pass           # a domain error (log of a negative, 0/0): NumPy gives nan/inf
        with np.errstate(all="ignore"):
            return self._split(self._numpy(y, i_st, params, *(t.astype(y.dtype) for t in lut[:1])), y.dtype)

    def derivative(self, y: np.ndarray, i_st, params: np.ndarray) -> np.ndarray:
        """Full dy/dt (S, ...) of an isolated cell."""
        if self.table_gates:
            raise ValueError("a model with tabulated gate updates (rl_step) has no derivative")
        dng, a, b = self.rates(y, i_st, params)[:3]
        return np.concatenate([dng, a * y[self.n_nongating:] + b])

    def _cuda_blocks(self, real: str) -> list[str]:
        """``MODEL_NJAC`` (the outputs after the b's), ``BLOCK_STATE[s]`` (state s is in a block)
        and ``model_block_update``: GRL1's step of each block (:func:`.markov.block_step`) from
        the old states ``y0`` and the outputs ``kk`` (diffusion in kk[0]) into state q of cell k
        at ``Yn[q * stride + k]`` (the state array, or a thread's registers: stride 1, k 0)
        (kernels/common/small_solve.cuh)."""
        ng, nga = self.n_nongating, self.n_gates
        in_block = {k for block in self.blocks for k in block.states}
        flags = ", ".join("true" if s in in_block else "false" for s in range(self.n_states))
        lines = [f"#define MODEL_NJAC {len(self.outputs) - ng - 2 * nga}",
                 f"__device__ constexpr bool BLOCK_STATE[{self.n_states}] = {{{flags}}};",
                 f"__device__ __forceinline__ void model_block_update(const {real}* __restrict__ kk, "
                 f"const {real}* __restrict__ y0, {real}* __restrict__ Yn, const int stride, const int k, "
                 f"const {real} h)", "{"]

        def entry(value: str) -> str:
            return f"(isnan({value}) ? ({real})0 : {value})"

        for block in self.blocks:
            n = len(block.states)
            lines += ["    {", f"        {real} m[{n * n}], x[{n}];",
                      f"        for (int i = 0; i < {n * n}; ++i) m[i] = 0;"]
            for i, q in enumerate(block.states):
                if q < ng:
                    diag, force = f"kk[{ng + 2 * nga + q}]", f"kk[{q}]"
                else:
                    diag, force = f"kk[{q}]", f"(kk[{q}] * y0[{q}] + kk[{nga + q}])"
                lines += [f"        m[{i * n + i}] = 1 - h * {entry(diag)};", f"        x[{i}] = h * {force};"]
            lines += [f"        m[{i * n + j}] = -h * {entry(f'kk[{ng + 2 * nga + block.first + e}]')};"
                      for e, (i, j) in enumerate(block.entries)]
            lines.append(f"        small_solve<{n}>(m, x);")
            lines += [f"        Yn[{q} * stride + k] = y0[{q}] + x[{i}];" for i, q in enumerate(block.states)]
            lines.append("    }")
        return lines + ["}"]

    def _cuda_full_jacobian(self, real: str, signature: str, inputs: list[str],
                            decl: Callable[[str, Node], str]) -> list[str]:
        """For a model ``with_full_jacobian``: ``model_derivative(y, i_st, pfield, cell, f)``,
        the y-form dy/dt (gates a·x + b) from the model alone (a Rosenbrock step's later
        stages), and ``model_field_and_jacobian(..., f, jac)``: dy/dt and the dense Jacobian
        (row-major, S×S) from :meth:`model_rates` (its first stage)."""
        ng, nga, ns = self.n_nongating, self.n_gates, self.n_states
        plain = CellModel(self.imported)
        pattern = self.jacobian_pattern
        field = [f"    f[{q}] = ({real}){_symbol(o)};" for q, o in enumerate(plain.outputs[:ng])]
        field += [f"    f[{ng + g}] = ({real}){_symbol(plain.outputs[ng + g])} * y[{ng + g}] "
                  f"+ ({real}){_symbol(plain.outputs[ng + nga + g])};" for g in range(nga)]
        rows = ", ".join(str(i) for i, _ in pattern) or "0"
        cols = ", ".join(str(j) for _, j in pattern) or "0"
        both = signature[:-1] + f", {real}* __restrict__ jac)"
        return [f"__device__ constexpr int JAC_ROW[{max(len(pattern), 1)}] = {{{rows}}};",
                f"__device__ constexpr int JAC_COL[{max(len(pattern), 1)}] = {{{cols}}};",
                f"__device__ __forceinline__ void model_derivative{signature.replace('out)', 'f)')}", "{",
                *inputs, *(decl(n, t) for n, t in plain._program[0]), *field, "}",
                f"__device__ __forceinline__ void model_field_and_jacobian{both.replace('out,', 'f,')}", "{",
                f"    {real} kk[{len(self.outputs)}];", "    model_rates(y, i_st, pfield, cell, kk);",
                *(f"    f[{q}] = kk[{q}];" for q in range(ng)),
                *(f"    f[{ng + g}] = kk[{ng + g}] * y[{ng + g}] + kk[{ng + nga + g}];" for g in range(nga)),
                f"    for (int i = 0; i < {ns * ns}; ++i) jac[i] = 0;",
                f"    for (int e = 0; e < {len(pattern)}; ++e)",
                f"        jac[JAC_ROW[e] * {ns} + JAC_COL[e]] = kk[{ng + 2 * nga} + e];",
                "}"]

    def cuda_source(self, real: str = "float", varying: tuple[int, ...] = (), compute: str | None = None) -> Code:
        """``model_rates(y, i_st, pfield, cell, out)``: a device function writing the outputs
        (non-gating dy/dt, then the gates' a, then b, then ``with_jacobian`` jng) to ``out[]``. Parameters are read from
        ``c_params[]``; those in ``varying`` per cell from ``pfield[slot * NPAD + cell]``; with
        tables, the voltage-only entries from ``c_lut`` (pairs value, difference; see :meth:`table`).
        ``real`` is the type of the states and outputs, ``compute`` (default ``real``) the one
        the model is evaluated in (``float`` under ``double`` states: the mixed precision).
        Before it: the blocks' update (:meth:`_cuda_blocks`)."""
        compute = compute or real
        if real not in ("float", "double") or compute not in ("float", "double"):
            raise ValueError("real and compute must be float or double")
        if self.lookup is not None and tuple(varying) != self.varying:
            raise ValueError(f"the tables were planned for varying parameters {self.varying}, not {tuple(varying)}")
        single = compute == "float"
        slot = {k: j for j, k in enumerate(varying)}

        def param(k: int) -> str:
            return f"({compute})pfield[{slot[k]} * NPAD + cell]" if k in slot else f"({compute})c_params[{k}]"

        def decl(name: str, tree: Node, indent: str = "    ") -> str:
            return f"{indent}const {compute} {_symbol(name)} = {to_c(tree, _symbol, single)};"

        plan, spec = self.lookup_plan, self.lookup
        outputs = [f"    out[{k}] = ({real}){_symbol(o)};" for k, o in enumerate(self.outputs)]
        flags = ", ".join("true" if g in self.table_gates else "false" for g in range(max(self.n_gates, 1)))
        lines = [f"__device__ constexpr bool GATE_TABLE[{max(self.n_gates, 1)}] = {{{flags}}};"
                 "   // gate update x <- a x + b (tabulated)", *self._cuda_blocks(real)]
        signature = (f"(const {real}* __restrict__ y, const {real} i_st, const {real}* __restrict__ pfield, "
                     f"const int cell, {real}* __restrict__ out)")
        inputs = [f"    const {compute} {a} = {b};"
                  for a, b in self._inputs(lambda k: f"({compute})y[{k}]", param, f"({compute})i_st")]
        if plan is None or spec is None:
            lines += ["#define MODEL_TABLES 0", f"__device__ __forceinline__ void model_rates{signature}", "{",
                      *inputs, *(decl(n, t) for n, t in self._program[0]), *outputs, "}"]
            if self.full_jacobian:
                lines += self._cuda_full_jacobian(real, signature, inputs, decl)
            return Code("\n".join(lines) + "\n")
        # the model body once, templated on how it gets entry k: inside the table by
        # interpolation, each entry read just before its first use (few live registers);
        # outside it from entries evaluated directly into a volatile local array (so they stay in
        # memory, not in registers: the rare branch must not raise the kernel's register count).
        # The stage kernel calls both in its own branches, so each uses its outputs where made.
        n_entries = plan.n_entries
        x = f"(({_symbol(plan.variable)} - ({compute}){spec.v_min!r}) * ({compute}){1.0 / spec.step!r})"
        prelude = [decl(n, t) for n, t in plan.prelude]
        args = "y, i_st, pfield, cell, out"
        lines += ["#define MODEL_TABLES 1", f"__constant__ const {compute}2* c_lut;",
                  f"__device__ __forceinline__ bool model_in_table(const {real} v)",
                  f"{{\n    const {compute} {_symbol(plan.variable)} = ({compute})v;",
                  f"    const {compute} lut_x = {x};",
                  f"    return lut_x >= ({compute})0 && lut_x < ({compute}){float(spec.rows - 1)!r};\n}}",
                  "template <class Entry>",
                  f"__device__ __forceinline__ void model_rates_body{signature[:-1]}, const Entry entry)",
                  "{", *inputs, *prelude]
        read: set[int] = set()
        for name, tree in plan.main:
            for k in sorted(_entries_read(tree) - read):
                lines.append(f"    const {compute} {_symbol(entry_name(k))} = entry({k});")
            read |= _entries_read(tree)
            lines.append(decl(name, tree))
        lines += [*outputs, "}",
                  f"__device__ __forceinline__ void model_rates_table{signature}", "{",
                  f"    const {compute} {_symbol(plan.variable)} = ({compute})y[{V_INDEX}];",
                  f"    const {compute} lut_x = {x};", "    const int lut_i = (int)lut_x;",
                  f"    const {compute} lut_f = lut_x - ({compute})lut_i;",
                  f"    const {compute}2* __restrict__ lut_r = c_lut + (size_t)lut_i * {n_entries};",
                  f"    model_rates_body({args}, [&](const int k) {{ const {compute}2 e = __ldg(lut_r + k); "
                  "return e.x + lut_f * e.y; });", "}",
                  f"__device__ __noinline__ void model_entries_direct(const {real}* __restrict__ y, "
                  f"const {real}* __restrict__ pfield, const int cell, volatile {compute}* lut_direct)", "{",
                  *(x for x in inputs if "i_st" not in x), *prelude,
                  *_soonest(plan, lambda n, t: decl(n, t),
                            lambda k, e: f"    lut_direct[{k}] = {to_c(e, _symbol, single)};"), "}",
                  f"__device__ __forceinline__ void model_rates_direct{signature}", "{",
                  f"    volatile {compute} lut_direct[{n_entries}];",
                  "    model_entries_direct(y, pfield, cell, lut_direct);",
                  f"    model_rates_body({args}, [&](const int k) {{ return ({compute})lut_direct[k]; }});", "}",
                  f"__device__ __forceinline__ void model_rates{signature}", "{",
                  f"    if (model_in_table(y[{V_INDEX}])) model_rates_table({args});",
                  f"    else model_rates_direct({args});", "}"]
        return Code("\n".join(lines) + "\n")


def _soonest(plan: LookupPlan, helper: Callable[[str, Node], str], entry: Callable[[int, Node], str]) -> list[str]:
    """The helpers in order, each entry printed right after the last helper it reads (so few
    helper values are live at once)."""
    position = {name: i for i, (name, _) in enumerate(plan.helpers)}
    due: dict[int, list[int]] = {}
    for k, e in enumerate(plan.entries):
        due.setdefault(max((position[n] for n in names_used(e) if n in position), default=-1), []).append(k)
    lines = [entry(k, plan.entries[k]) for k in due.get(-1, [])]
    for i, (name, tree) in enumerate(plan.helpers):
        lines.append(helper(name, tree))
        lines += [entry(k, plan.entries[k]) for k in due.get(i, [])]
    return lines


def _entries_read(tree: Node) -> set[int]:
    """Indices of the lookup entries a rewritten equation reads (a model name such as
    ``lut_gate``, component ``lut``, is not one)."""
    prefix = entry_name(0)[:-1]
    return {int(n[len(prefix):]) for n in names_used(tree) if n.startswith(prefix) and n[len(prefix):].isdigit()}


@functools.lru_cache(maxsize=32)
def _load(path: str, mtime: float, voltage: str | None, stimulus: str | None,
          extra: tuple[str, ...]) -> CellModel:
    return CellModel(import_cellml(path, voltage=voltage, stimulus=stimulus, extra_parameters=extra))


def load_model(name_or_path: str = DEFAULT_MODEL, voltage: str | None = None,
               stimulus: str | None = None, parameters: tuple[str, ...] = ()) -> CellModel:
    """A shipped model by name, or a CellML file (imported once per file version).
    ``parameters``: constants (``component.variable``) to make editable besides the annotated
    ones."""
    path = model_path(name_or_path)
    base = _load(str(path.resolve()), path.stat().st_mtime, voltage or None, stimulus or None, ())
    extra = tuple(sorted(set(parameters) - set(base.parameter_names)))
    if not extra:
        return base
    return _load(str(path.resolve()), path.stat().st_mtime, voltage or None, stimulus or None, extra)


def config_model(settings) -> CellModel:
    """The model of a config's ``model:`` block (its parameter keys made editable)."""
    keys = set(settings.parameters) | set(getattr(settings, "paintable", ()))
    for region in settings.regions:
        keys |= set(region.parameters)
    return load_model(settings.file, settings.voltage, settings.stimulus, tuple(sorted(keys)))


def crn_model() -> CellModel:
    """The default model, Courtemanche–Ramirez–Nattel 1998, from its CellML file."""
    return load_model(DEFAULT_MODEL)
