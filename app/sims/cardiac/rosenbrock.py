"""Rosenbrock methods for stiff single cells: RODAS4 with the model's full analytic Jacobian.

A Rosenbrock method is linearly implicit: each step solves ``s`` linear systems with one
matrix ``I/(h·γ) − J`` (J = ∂f/∂y at the step's start), no Newton iteration, so a stiff cell
takes steps of the size its accuracy allows, as CVODE does, and the work of a step is fixed,
which suits one GPU thread per cell (DiffEqGPU.jl's GPURodas4 ensemble kernels). The step in
the transformed variables U_i of Hairer & Wanner (Solving ODEs II, §IV.7, Eq. 7.25; their code
RODAS), for an autonomous problem:

    (I/(h·γ) − J)·U_i = f(y0 + Σ_{j<i} A_ij·U_j) + Σ_{j<i} (C_ij/h)·U_j,
    y1 = y0 + Σ m_i·U_i,   the embedded y1' = y0 + Σ m̂_i·U_i.

The cell model is autonomous between stimulus edges (the stimulus is a constant there): the
adaptive loop never steps across an edge (``Problem.next_breakpoint``, as CVODE is restarted
there), so the method's ∂f/∂t terms are 0 and left out. Every state is stepped in its y-form
(a gate by dx/dt = a·x + b, no Rush–Larsen): the method needs the Jacobian of one vector field.

The engines: NumPy (:func:`rosenbrock_step`, the reference: LAPACK's LU per stage), the
compiled CPU engine (:mod:`.rosenbrock_jit`: the step compiled by numba) and CUDA
(``kernels/common/rosenbrock.cuh``: one thread per cell, a dense LU with partial pivoting per
thread, the tableau printed by :func:`app.sims.cardiac.cuda.rosenbrock_source`). The tableau is
defined once, here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from app.compute.small_solve import solve_batch

DIFF_STEP = float(np.sqrt(np.finfo(np.float64).eps))   # relative forward-difference step (mend_jacobian)


@dataclass(frozen=True)
class Rosenbrock:
    """A Rosenbrock method in Hairer–Wanner's transformed form (see the module's head): the
    strictly lower ``a`` and ``c`` (s×s), the diagonal ``gamma``, the weights ``m`` and the
    embedded ``m_low``; ``alpha`` is the stages' time fractions (unused by the autonomous step,
    checked against the tableau in the tests)."""

    name: str
    label: str
    gamma: float
    a: tuple[tuple[float, ...], ...]
    c: tuple[tuple[float, ...], ...]
    m: tuple[float, ...]
    m_low: tuple[float, ...]
    alpha: tuple[float, ...]
    order: int
    order_low: int
    adaptive: bool = True          # the adaptive loop's attributes of a Runge–Kutta tableau
    rl: bool = False               # every state in its y-form, no Rush–Larsen
    grl: bool = False

    @property
    def stages(self) -> int:
        return len(self.m)


def _rodas4() -> Rosenbrock:
    # Hairer & Wanner's RODAS4 (Solving ODEs II, 2nd ed., Sect. IV.7; the coefficients of their
    # Fortran code rodas.f, subroutine ROCOE, METH = 1): order 4 with an embedded order 3, L-stable, stiffly
    # accurate (the 5th and 6th stages are the embedded and the final solution).
    a21 = 0.1544000000000000e+01
    a31, a32 = 0.9466785280815826e+00, 0.2557011698983284e+00
    a41, a42, a43 = 0.3314825187068521e+01, 0.2896124015972201e+01, 0.9986419139977817e+00
    a51, a52, a53, a54 = (0.1221224509226641e+01, 0.6019134481288629e+01, 0.1253708332932087e+02,
                          -0.6878860361058950e+00)
    c21 = -0.5668800000000000e+01
    c31, c32 = -0.2430093356833875e+01, -0.2063599157091915e+00
    c41, c42, c43 = -0.1073529058151375e+00, -0.9594562251023355e+01, -0.2047028614809616e+02
    c51, c52, c53, c54 = (0.7496443313967647e+01, -0.1024680431464352e+02, -0.3399990352819905e+02,
                          0.1170890893206160e+02)
    c61, c62, c63, c64, c65 = (0.8083246795921522e+01, -0.7981132988064893e+01, -0.3152159432874371e+02,
                               0.1631930543123136e+02, -0.6058818238834054e+01)
    last = (a51, a52, a53, a54)
    return Rosenbrock(
        "rodas4", "RODAS4 (Rosenbrock 4(3), stiff single cells)", 0.25,
        a=((0,) * 6, (a21, 0, 0, 0, 0, 0), (a31, a32, 0, 0, 0, 0), (a41, a42, a43, 0, 0, 0),
           (*last, 0, 0), (*last, 1.0, 0)),
        c=((0,) * 6, (c21, 0, 0, 0, 0, 0), (c31, c32, 0, 0, 0, 0), (c41, c42, c43, 0, 0, 0),
           (c51, c52, c53, c54, 0, 0), (c61, c62, c63, c64, c65, 0)),
        m=(*last, 1.0, 1.0), m_low=(*last, 1.0, 0.0),
        alpha=(0.0, 0.386, 0.21, 0.63, 1.0, 1.0), order=4, order_low=3)


ROSENBROCK: dict[str, Rosenbrock] = {t.name: t for t in [_rodas4()]}


def classical_form(tab: Rosenbrock) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(alpha, gamma_matrix, b, b_low)`` of the method written as
    ``(I − h·γ_ii·J)·k_i = h·f(y0 + Σ α_ij·k_j) + h·J·Σ γ_ij·k_j``, ``y1 = y0 + Σ b_i·k_i``
    (Hairer & Wanner, Eq. 7.4), where the order conditions are stated: Γ⁻¹ = I/γ − C,
    α = A·Γ, b = m·Γ."""
    s = tab.stages
    gamma = np.linalg.inv(np.eye(s) / tab.gamma - np.array(tab.c))
    return np.array(tab.a) @ gamma, gamma, np.array(tab.m) @ gamma, np.array(tab.m_low) @ gamma


def mend_jacobian(rhs: Callable[[np.ndarray], np.ndarray], y0: np.ndarray, f0: np.ndarray,
                  jac: np.ndarray) -> np.ndarray:
    """``jac`` (N, S, S) with every column that holds a NaN or an infinity replaced by the forward
    difference of ``rhs`` over :data:`DIFF_STEP` · max(1, |y_j|). The symbolic entries can be
    0·∞ where the derivative is finite (a power or an exponential at its limit inside a chain
    rule: Lindblad 1996's transient outward gates, the release channel of Hund–Rudy 2004);
    without this every step there is rejected until the step size falls below its floor."""
    bad = ~np.isfinite(jac).all(axis=1)                   # (N, S): cell c's column j
    if not bad.any():
        return jac
    jac = jac.copy()
    for j in np.flatnonzero(bad.any(axis=0)):
        y = y0.copy()
        y[j] = y0[j] + DIFF_STEP * np.maximum(1.0, np.abs(y0[j]))
        column = (rhs(y) - f0) / (y[j] - y0[j])           # (S, N)
        cells = bad[:, j]
        jac[cells, :, j] = column[:, cells].T
    return jac


def rosenbrock_step(rhs: Callable[[np.ndarray], np.ndarray], y0: np.ndarray, f0: np.ndarray,
                    jac: np.ndarray, h: float, tab: Rosenbrock) -> tuple[np.ndarray, np.ndarray]:
    """One step from ``y0`` (S, N) with ``f0`` = rhs(y0) and the Jacobian ``jac`` (N, S, S):
    ``(y_high, y_low)``. A non-finite Jacobian column is mended (:func:`mend_jacobian`); a
    singular matrix gives NaN (the step is rejected)."""
    eye = np.eye(y0.shape[0])
    with np.errstate(all="ignore"):
        jac = mend_jacobian(rhs, y0, f0, jac)
        matrix = eye / (h * tab.gamma) - jac
        us: list[np.ndarray] = []
        for i in range(tab.stages):
            if i == 0:
                fi = f0
            else:
                yi = y0 + sum(a * u for a, u in zip(tab.a[i], us) if a)
                fi = rhs(yi)
            r = fi + sum((c / h) * u for c, u in zip(tab.c[i], us) if c)
            us.append(solve_batch(matrix, r.T).T)
        high = y0 + sum(m * u for m, u in zip(tab.m, us) if m)
        low = y0 + sum(m * u for m, u in zip(tab.m_low, us) if m)
    return high, low


def dense_jacobian(pattern: tuple[tuple[int, int], ...], entries: np.ndarray, n_states: int) -> np.ndarray:
    """The Jacobian (N, S, S) from its structurally non-zero ``entries`` (E, N) at ``pattern``
    ((row, column) each)."""
    entries = np.asarray(entries, np.float64)
    out = np.zeros((entries.shape[1], n_states, n_states))
    if pattern:
        rows, cols = np.array(pattern).T
        out[:, rows, cols] = entries.T
    return out
