"""The Runge-Kutta methods, with the Rush-Larsen treatment of the gates inside every stage.

Every method is a Butcher tableau (``a``, ``b``, ``c``; adaptive pairs add ``b_low``).
The non-gating states are advanced by the tableau as usual. For the gates,
dw/dt = a(Y)·w + b(Y), each stage value (and the final value) is the exact solution of that
linear equation over ``c_i·h`` with the stage's a and b replaced by the tableau-weighted
averages of the earlier stages' coefficients:

    ā = Σ_j a_ij·a_j,  b̄ = Σ_j a_ij·b_j,   w_i = w_0 + h·(ā·w_0 + b̄)·φ1(h·ā),  φ1(z) = (e^z − 1)/z

(the row sums are c_i, so ā/c_i is the weighted mean rate). With one stage this is the
Rush-Larsen forward Euler of the paper (Alg. 2); for the explicit midpoint method the stage
value is the paper's step 2 exactly (RL over h/2 with the rates at Y^j) and the final value
uses the midpoint rates over the whole step (the exponential midpoint rule, second order; the
paper chains two half steps instead). Without RL (``rl=False``) the gates are stepped by the
tableau like every other state. With RL the gates are at most second-order accurate
whatever the tableau, which is what the paper measured for RKF(RL) (Section 5.2.3); the
non-gating states keep the tableau's order.

The generalized Rush–Larsen method GRL1 (Sundnes, Artebrant, Skavhaug and Tveito 2009,
"A second-order algorithm for solving dynamic cell membrane equations", IEEE TBME 56; what
openCARP and Chaste ship) is the one-stage tableau with ``grl``: every state, gate or not, is
stepped exactly for its linearisation dy/dt ≈ f(y0) + J_ii·(y − y0) with the diagonal Jacobian
entry J_ii, y1 = y0 + h·f(y0)·φ1(h·J_ii). For a gate J_ii is its ``a`` (RL exactly); for the
non-gating states the model outputs J_ii (``CellModel.with_jacobian``). First order, like RLFE,
but stable on stiff non-gating states (buffers, concentrations) that forward Euler blows up on
at tissue steps. The states of each block (:mod:`.markov`: a Markov chain, or a group of states
that exchange fast) are stepped together instead, by the linearly implicit Euler step on the
block, y_B + h·(I − h·J_BB)⁻¹·f_B.

Adaptive pairs use local extrapolation (the high-order solution is kept), the error of a
step is ``max_i |y_high − y_low| / (at + rt·|y_old|)`` over every state of every cell, and
the next step is ``h·clip(0.9·err^(−1/(P+1)), fac_min, fac_max)`` (Eq. 15, P = the low order).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction as Fr
from typing import Sequence

import numpy as np

from app.sims.cardiac.markov import Block, block_step
from app.sims.cardiac.rosenbrock import ROSENBROCK


@dataclass(frozen=True)
class Tableau:
    name: str
    label: str
    a: tuple[tuple[float, ...], ...]
    b: tuple[float, ...]
    c: tuple[float, ...]
    order: int
    b_low: tuple[float, ...] | None = None
    order_low: int | None = None
    rl: bool = True
    grl: bool = False          # the non-gating states too by their diagonal Jacobian (one stage only)

    @property
    def stages(self) -> int:
        return len(self.b)

    @property
    def adaptive(self) -> bool:
        return self.b_low is not None


def _f(rows):
    return tuple(tuple(float(x) for x in r) for r in rows)


def _v(xs):
    return tuple(float(x) for x in xs)


METHODS: dict[str, Tableau] = {t.name: t for t in [
    Tableau("fe", "Forward Euler (no Rush-Larsen)", _f([[0]]), _v([1]), _v([0]), 1, rl=False),
    Tableau("rlfe", "Forward Euler, Rush-Larsen (RLFE)", _f([[0]]), _v([1]), _v([0]), 1),
    Tableau("grl1", "Generalized Rush-Larsen 1 (GRL1)", _f([[0]]), _v([1]), _v([0]), 1, grl=True),
    Tableau("midpoint", "Explicit midpoint, RL", _f([[0, 0], [Fr(1, 2), 0]]), _v([0, 1]),
            _v([0, Fr(1, 2)]), 2),
    Tableau("trapezoidal", "Trapezoidal (Heun), RL", _f([[0, 0], [1, 0]]), _v([Fr(1, 2), Fr(1, 2)]),
            _v([0, 1]), 2),
    Tableau("te21", "Trapezoidal-Euler 2(1), RL", _f([[0, 0], [1, 0]]), _v([Fr(1, 2), Fr(1, 2)]),
            _v([0, 1]), 2, b_low=_v([1, 0]), order_low=1),
    Tableau("bs32", "Bogacki-Shampine 3(2), RL",
            _f([[0, 0, 0, 0], [Fr(1, 2), 0, 0, 0], [0, Fr(3, 4), 0, 0],
                [Fr(2, 9), Fr(1, 3), Fr(4, 9), 0]]),
            _v([Fr(2, 9), Fr(1, 3), Fr(4, 9), 0]), _v([0, Fr(1, 2), Fr(3, 4), 1]), 3,
            b_low=_v([Fr(7, 24), Fr(1, 4), Fr(1, 3), Fr(1, 8)]), order_low=2),
    Tableau("rkf45", "Runge-Kutta-Fehlberg 5(4), RL",
            _f([[0] * 6,
                [Fr(1, 4), 0, 0, 0, 0, 0],
                [Fr(3, 32), Fr(9, 32), 0, 0, 0, 0],
                [Fr(1932, 2197), Fr(-7200, 2197), Fr(7296, 2197), 0, 0, 0],
                [Fr(439, 216), -8, Fr(3680, 513), Fr(-845, 4104), 0, 0],
                [Fr(-8, 27), 2, Fr(-3544, 2565), Fr(1859, 4104), Fr(-11, 40), 0]]),
            _v([Fr(16, 135), 0, Fr(6656, 12825), Fr(28561, 56430), Fr(-9, 50), Fr(2, 55)]),
            _v([0, Fr(1, 4), Fr(3, 8), Fr(12, 13), 1, Fr(1, 2)]), 5,
            b_low=_v([Fr(25, 216), 0, Fr(1408, 2565), Fr(2197, 4104), Fr(-1, 5), 0]), order_low=4),
]}
IMPLICIT = {"cvode": "CVODE (SUNDIALS): BDF, Newton, dense Jacobian (single cells; app.sims.cardiac.implicit)"}
AUTO = "auto"       # a single cell's default: the engine picks (app.sims.cardiac.config.for_backend)
FIXED = tuple(n for n, t in METHODS.items() if not t.adaptive)
ADAPTIVE = tuple(n for n, t in METHODS.items() if t.adaptive) + tuple(ROSENBROCK)   # Rosenbrock: stiff single cells


def with_rl(tableau: Tableau, rl: bool) -> Tableau:
    from dataclasses import replace
    return replace(tableau, rl=rl)


def phi1(z: np.ndarray) -> np.ndarray:
    """(e^z − 1)/z, 1 at z = 0."""
    small = np.abs(z) < 1e-5
    safe = np.where(small, 1.0, z)
    with np.errstate(over="ignore", invalid="ignore"):
        return np.where(small, 1.0 + 0.5 * z, np.expm1(safe) / safe)


def grl_euler(y0: np.ndarray, h: float, f: np.ndarray, jac: np.ndarray) -> np.ndarray:
    """GRL1 on non-gating states: ``y0 + h·f·φ1(h·J)``; where J is NaN, forward Euler."""
    z = h * np.where(np.isnan(jac), 0.0, jac).astype(y0.dtype)
    return (y0 + h * f * phi1(z)).astype(y0.dtype)


def combine(y0: np.ndarray, h: float, weights, ks, n_nongating: int, rl: bool) -> np.ndarray:
    """y0 + one row of the tableau; ``ks`` holds per stage (k_nongating, a, b, w_stage)."""
    ng = n_nongating
    out = np.empty_like(y0)
    acc = np.zeros_like(y0[:ng])
    for w, (kng, _, _, _) in zip(weights, ks):
        if w:
            acc += w * kng
    out[:ng] = y0[:ng] + h * acc
    w0 = y0[ng:]
    if rl:
        abar = np.zeros_like(w0)
        bbar = np.zeros_like(w0)
        for w, (_, a, b, _) in zip(weights, ks):
            if w:
                abar += w * a
                bbar += w * b
        out[ng:] = w0 + h * (abar * w0 + bbar) * phi1(h * abar)
    else:
        acc = np.zeros_like(w0)
        for w, (_, a, b, ws) in zip(weights, ks):
            if w:
                acc += w * (a * ws + b)
        out[ng:] = w0 + h * acc
    return out


def rk_step(f, t: float, y0: np.ndarray, h: float, tab: Tableau, n_nongating: int, blocks: Sequence[Block] = ()):
    """One step of ``tab`` from (t, y0); ``f(t, y) -> (k_nongating, a, b)``.

    Returns ``(y_high, y_low)``; ``y_low`` is None for fixed-step methods. GRL1 (``tab.grl``):
    ``f`` returns ``(k_nongating, a, b, jac)`` (the non-gating states' diagonal Jacobian, then
    the entries of the ``blocks``' Jacobians, whose states are stepped together: :mod:`.markov`)."""
    if tab.grl:
        kng, a, b, jac = f(t, y0)
        high = combine(y0, h, tab.b, [(kng, a, b, y0[n_nongating:])], n_nongating, True)
        high[:n_nongating] = grl_euler(y0[:n_nongating], h, kng, jac[:n_nongating])
        for block in blocks:
            block_step(high, y0, h, kng, a, b, jac, n_nongating, block)
        return high, None
    ks = []
    for i in range(tab.stages):
        yi = y0 if i == 0 else combine(y0, h, tab.a[i][:i], ks, n_nongating, tab.rl)
        kng, a, b = f(t + tab.c[i] * h, yi)
        ks.append((kng, a, b, yi[n_nongating:]))
    high = combine(y0, h, tab.b, ks, n_nongating, tab.rl)
    low = combine(y0, h, tab.b_low, ks, n_nongating, tab.rl) if tab.adaptive else None
    return high, low


def error_ratio(high: np.ndarray, low: np.ndarray, y0: np.ndarray, at: float, rt: float) -> float:
    """max |high − low| / (at + rt·|y0|); inf where the step produced NaN."""
    with np.errstate(invalid="ignore"):
        r = np.max(np.abs(high - low) / (at + rt * np.abs(y0)))
    return float(r) if np.isfinite(r) else float("inf")


def next_step(h: float, ratio: float, order_low: int, safety: float = 0.9,
              fac_min: float = 0.2, fac_max: float = 5.0) -> float:
    """Eq. 15 with the safety factor, the change clipped to [fac_min, fac_max]."""
    if not np.isfinite(ratio):
        return h * fac_min
    if ratio <= 0.0:
        return h * fac_max
    return h * min(fac_max, max(fac_min, safety * ratio ** (-1.0 / (order_low + 1))))
