"""The cell model as every engine sees it: an imported CellML model (:mod:`.cellml`) and the
programs printed from its one expression tree (:mod:`app.compute.codegen`).

State order: the non-gating states (the membrane voltage first), then the Rush–Larsen gates.
Every program computes, for one cell or many, the outputs ``(dng, a, b)``: the non-gating
derivatives (without diffusion) and each gate's ``dx/dt = a·x + b`` coefficients, from the
states, the stimulus ``i_st`` (µA/µF, negative depolarises) and the parameters.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

import numpy as np

from app.compute.codegen import Code, to_c, to_numpy, to_python
from app.package_data import data_dir
from app.sims.cardiac.cellml import I_ST, CellMLImportError, ImportedModel, Parameter, import_cellml

V_INDEX = 0
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
class CellModel:
    """An imported model: names, initial state, parameters and the printed programs."""

    imported: ImportedModel

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

    # ---- printed programs ---------------------------------------------------------------
    def _lines(self, printer: Callable, state: Callable[[int], str], param: Callable[[int], str],
               stim: str) -> list[str]:
        m = self.imported
        lines = [f"{_symbol(s)} = {state(k)}" for k, s in enumerate(m.states)]
        lines += [f"{_symbol(p.name)} = {param(k)}" for k, p in enumerate(m.parameters)]
        lines.append(f"{_symbol(I_ST)} = {stim}")
        lines += [f"{_symbol(eq.name)} = {printer(eq.tree, _symbol)}" for eq in m.equations]
        return lines

    def python_source(self, func_name: str = "cell_rates") -> str:
        """``func_name(y, i_st, p)`` on floats (``y[k]``, ``p[k]``) returning the outputs as a
        tuple: run as Python or compiled by numba."""
        body = self._lines(to_python, lambda k: f"y[{k}]", lambda k: f"p[{k}]", "i_st")
        outs = ", ".join(_symbol(o) for o in self.imported.outputs)
        return "\n".join([f"def {func_name}(y, i_st, p):", *("    " + x for x in body),
                          f"    return ({outs},)"]) + "\n"

    def numpy_source(self, func_name: str = "rates") -> str:
        body = self._lines(to_numpy, lambda k: f"y[{k}]", lambda k: f"p[{k}]", "i_st")
        outs = ", ".join(_symbol(o) for o in self.imported.outputs)
        return "\n".join([f"def {func_name}(y, i_st, p):", *("    " + x for x in body),
                          f"    return ({outs},)"]) + "\n"

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
        out = np.broadcast_arrays(*[np.asarray(o, dtype=dtype) for o in out])
        return np.stack(out[:ng]), np.stack(out[ng:ng + nga]), np.stack(out[ng + nga:])

    def rates(self, y: np.ndarray, i_st, params: np.ndarray):
        """``(dng, a, b)`` at states ``y`` (S, ...) with stimulus ``i_st``; ``params`` (P,) or
        (P, ...) per cell."""
        if y.ndim == 2 and y.shape[1] == 1 and np.ndim(i_st) <= 1 and np.ndim(params) == 1:
            try:      # one cell: plain floats, ~50x less overhead than NumPy on 1-element arrays
                vals = self._scalar([float(v) for v in y[:, 0]], float(np.ravel(i_st)[0]),
                                    [float(q) for q in params])
                dng, a, b = self._split(vals, y.dtype)
                return dng[:, None], a[:, None], b[:, None]
            except (ArithmeticError, ValueError):
                pass           # a domain error (log of a negative, 0/0): NumPy gives nan/inf
        with np.errstate(all="ignore"):
            return self._split(self._numpy(y, i_st, params), y.dtype)

    def derivative(self, y: np.ndarray, i_st, params: np.ndarray) -> np.ndarray:
        """Full dy/dt (S, ...) of an isolated cell."""
        dng, a, b = self.rates(y, i_st, params)
        return np.concatenate([dng, a * y[self.n_nongating:] + b])

    def cuda_source(self, real: str = "float", varying: tuple[int, ...] = ()) -> Code:
        """``model_rates(y, i_st, pfield, cell, out)``: a device function writing the outputs
        (non-gating dy/dt, then the gates' a, then b) to ``out[]``. Parameters are read from
        ``c_params[]``; those in ``varying`` per cell from ``pfield[slot * NPAD + cell]``."""
        if real not in ("float", "double"):
            raise ValueError("real must be float or double")
        single = real == "float"
        slot = {k: j for j, k in enumerate(varying)}

        def param(k: int) -> str:
            return f"pfield[{slot[k]} * NPAD + cell]" if k in slot else f"c_params[{k}]"

        body = self._lines(lambda t, s: to_c(t, s, single), lambda k: f"y[{k}]", param, "i_st")
        lines = [f"__device__ __forceinline__ void model_rates(const {real}* __restrict__ y, "
                 f"const {real} i_st, const {real}* __restrict__ pfield, const int cell, "
                 f"{real}* __restrict__ out)", "{"]
        lines += [f"    const {real} {x};" for x in body]
        lines += [f"    out[{k}] = {_symbol(o)};" for k, o in enumerate(self.imported.outputs)]
        lines.append("}")
        return Code("\n".join(lines) + "\n")


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
    keys = set(settings.parameters)
    for region in settings.regions:
        keys |= set(region.parameters)
    return load_model(settings.file, settings.voltage, settings.stimulus, tuple(sorted(keys)))


def crn_model() -> CellModel:
    """The default model, Courtemanche–Ramirez–Nattel 1998, from its CellML file."""
    return load_model(DEFAULT_MODEL)
