"""The cell model as both engines see it: one checked equation text (``crn.EQUATIONS``), a
NumPy rate function and a CUDA device function printed from it."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from app.sims.cardiac import crn
from app.sims.cardiac.modelgen import ModelSource

N_STATES = len(crn.STATES)
N_NONGATING = len(crn.NONGATING)
N_GATES = len(crn.GATES)
V_INDEX = 0


@dataclass(frozen=True)
class CellModel:
    """The CRN model: names, initial state, parameters and the two generated programs."""

    source: ModelSource

    states = crn.STATES
    nongating = crn.NONGATING
    gates = crn.GATES

    @property
    def parameter_names(self) -> tuple[str, ...]:
        return self.source.parameters

    def parameter_vector(self, values: Mapping[str, float] | None = None) -> np.ndarray:
        merged = {**crn.PARAMETERS, **(values or {})}
        unknown = set(merged) - set(crn.PARAMETERS)
        if unknown:
            raise ValueError(f"unknown model parameters {sorted(unknown)}; valid: {list(crn.PARAMETERS)}")
        return np.array([float(merged[p]) for p in self.source.parameters])

    def initial_state(self) -> np.ndarray:
        return np.array([crn.INITIAL[s] for s in crn.STATES])

    @functools.cached_property
    def _numpy(self):
        return self.source.numpy_function("crn_rates")

    @functools.cached_property
    def _scalar(self):
        return self.source.scalar_function("crn_rates_scalar")

    def rates(self, y: np.ndarray, i_st, params: np.ndarray):
        """Rates at states ``y`` (21, ...) with stimulus ``i_st`` (pA/pF).

        Returns ``(dng, a, b)``: the derivatives of the 6 non-gating states (without diffusion)
        and the gates' dw/dt = a*w + b coefficients, a = -1/tau, b = w_inf/tau, each (k, ...)."""
        if y.ndim == 2 and y.shape[1] == 1 and np.ndim(i_st) <= 1:   # one cell: plain floats
            vals = self._scalar(*(float(v) for v in y[:, 0]), float(np.ravel(i_st)[0]),
                                *(float(q) for q in params))
            out = np.array(vals, dtype=y.dtype).reshape(-1, 1)
        else:
            out = np.broadcast_arrays(*self._numpy(*y, i_st, *params))
        dng = np.stack(out[:N_NONGATING])
        inf = np.stack(out[N_NONGATING:N_NONGATING + N_GATES])
        tau = np.stack(out[N_NONGATING + N_GATES:])
        with np.errstate(divide="ignore", invalid="ignore"):    # a blown-up stage: caught later
            return dng, -1.0 / tau, inf / tau

    def derivative(self, y: np.ndarray, i_st, params: np.ndarray) -> np.ndarray:
        """Full dy/dt (21, ...) of an isolated cell."""
        dng, a, b = self.rates(y, i_st, params)
        return np.concatenate([dng, a * y[N_NONGATING:] + b])

    def cuda_source(self, real: str = "float") -> str:
        """``crn_rates(states..., i_st, params, &dV..., &m_inf..., &tau_m...)`` as CUDA C."""
        return self.source.cuda_source("crn_rates", real)


@functools.lru_cache(maxsize=1)
def crn_model() -> CellModel:
    outputs = crn.DERIVATIVES + crn.GATE_INF + crn.GATE_TAU
    src = ModelSource.parse(crn.EQUATIONS, inputs=crn.STATES + ("i_st",), constants=crn.CONSTANTS,
                            parameters=tuple(crn.PARAMETERS), outputs=outputs)
    return CellModel(src)
