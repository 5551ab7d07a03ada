"""Operator splitting of the monodomain equation (``solver.split_dt``): the cell model and the
diffusion of V advanced one after the other over a split step Δt_s (Sundnes et al. 2006,
"Computing the electrical activity in the heart", ch. 3; Qu & Garfinkel 1999):

1. the cell model alone (no diffusion) over Δt_s by k = Δt_s / dt substeps of the fixed-step
   method (``solver.method`` at ``solver.dt``), the stimulus applied at each substep's time;
2. dV/dt = L V alone over Δt_s by one damped first-order Runge–Kutta–Chebyshev super-step
   (RKC1; Sommeijer, Shampine & Verwer 1998; Verwer, Hundsdorfer & Sommeijer 1990) of s stages,
   each one pass of the operator over V only.

``solver.split: godunov`` is 1 then 2 (Lie splitting); ``strang`` is a diffusion super-step
over Δt_s/2, then 1, then another over Δt_s/2 (two super-steps of fewer stages each). Both are
first order in Δt_s here, the diffusion step being first order; what the second buys is
accuracy: RKC1 damps the wavefront's mid-frequency modes less than the exact diffusion does,
and two half steps halve that (the conduction velocities are in docs/user-guide/meshes.md).

RKC1 with s stages and damping ε has the amplification P_s(z) = T_s(w0 + w1 z) / T_s(w0),
w0 = 1 + ε/s², w1 = T_s(w0)/T_s'(w0) (T_s the Chebyshev polynomial), so P_s(z) = 1 + z + O(z²)
and |P_s(z)| ≤ 1/T_s(w0) < 1 for z in [−β_s, 0], β_s = (1 + w0)/w1 ≈ 1.93 s² at ε = 0.05. The
stage count is the smallest s with β_s ≥ Δt_s·ρ, ρ the Gershgorin bound 2·max_k Σ_j |w_kj|·D on
the operator's spectrum (:func:`app.sims.cardiac.fem.stable_dt` is 1/(max row sum)): s grows as
√(Δt_s / stable_dt), so the diffusion costs a few passes over the operator per split step
instead of one per dt.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

EPSILON = 0.05          # RKC damping (Verwer et al.'s choice for RKC1): keeps |P_s| ≤ 1 − ε/3 or so
MAX_STAGES = 1000


def _chebyshev(s: int, x: float) -> tuple[np.ndarray, float]:
    """T_0..T_s at x (s + 1,) and T_s'(x)."""
    t = np.empty(s + 1)
    dt_prev, dt_cur = 0.0, 1.0          # T_0', T_1'
    t[0] = 1.0
    if s >= 1:
        t[1] = x
    for j in range(2, s + 1):
        t[j] = 2 * x * t[j - 1] - t[j - 2]
        dt_prev, dt_cur = dt_cur, 2 * t[j - 1] + 2 * x * dt_cur - dt_prev
    return t, (dt_cur if s >= 1 else 0.0)


def rkc1_parameters(s: int, eps: float = EPSILON) -> tuple[float, float, float]:
    """(w0, w1, β_s) of the damped RKC1 method with ``s`` stages (one stage: forward Euler, undamped)."""
    w0 = 1.0 + eps / s ** 2 if s > 1 else 1.0
    t, dts = _chebyshev(s, w0)
    w1 = t[s] / dts
    return w0, w1, (1.0 + w0) / w1


def rkc1_stages(h: float, rho: float, eps: float = EPSILON) -> int:
    """Fewest stages whose stability interval covers h·ρ (ρ ≥ the operator's spectral radius)."""
    z = h * rho
    if z <= 0:
        return 1
    s = max(1, int(math.ceil(math.sqrt(z / (2.0 - 4.0 * eps / 3.0)))) - 1)
    while rkc1_parameters(s, eps)[2] < z:
        s += 1
        if s > MAX_STAGES:
            raise ValueError(f"diffusion super-step needs over {MAX_STAGES} stages (h·ρ = {z:.3g})")
    return s


def rkc1_amplification(z: np.ndarray, s: int, eps: float = EPSILON) -> np.ndarray:
    """P_s(z) = T_s(w0 + w1 z)/T_s(w0): what one super-step does to an eigenmode hλ = z."""
    w0, w1, _ = rkc1_parameters(s, eps)
    x = w0 + w1 * np.asarray(z, float)
    tx_prev, tx = np.ones_like(x), x.copy()
    for _ in range(2, s + 1):
        tx_prev, tx = tx, 2 * x * tx - tx_prev
    if s == 0:
        tx = np.ones_like(x)
    return tx / _chebyshev(s, w0)[0][s]


def rkc1_coefficients(s: int, eps: float = EPSILON) -> list[tuple[float, float, float]]:
    """(μ_j, ν_j, μ̃_j) of stages j = 1..s of :func:`rkc1_step` (stage 1: (1, 0, w1/w0)), what the
    CUDA stage kernel is passed."""
    w0, w1, _ = rkc1_parameters(s, eps)
    b = 1.0 / _chebyshev(s, w0)[0]
    return [(1.0, 0.0, w1 / w0)] + [(2 * w0 * b[j] / b[j - 1], -b[j] / b[j - 2], 2 * w1 * b[j] / b[j - 1])
                                    for j in range(2, s + 1)]


def rkc1_step(v: np.ndarray, h: float, operator: Callable[[np.ndarray], np.ndarray], s: int,
              eps: float = EPSILON) -> np.ndarray:
    """One RKC1 super-step of dv/dt = operator(v) over ``h`` with ``s`` stages:
    Y_1 = v + μ̃_1 h F(v), Y_j = μ_j Y_{j−1} + ν_j Y_{j−2} + μ̃_j h F(Y_{j−1}) with b_j = 1/T_j(w0),
    μ_j = 2 w0 b_j/b_{j−1}, ν_j = −b_j/b_{j−2}, μ̃_j = 2 w1 b_j/b_{j−1} (μ̃_1 = w1/w0)."""
    y_prev, y = v, v
    for mu, nu, mu_t in rkc1_coefficients(s, eps):
        y_prev, y = y, mu * y + nu * y_prev + mu_t * h * operator(y)
    return y


def spectral_bound(inv_d2: np.ndarray, D: float) -> float:
    """Gershgorin's bound ρ on |λ| of the operator D·Σ_j w_kj (V_j − V_k): 2·D·max_k Σ_j |w_kj|."""
    return 2.0 * abs(D) * float(np.abs(inv_d2).sum(axis=1).max()) if inv_d2.size else 0.0



def super_step_stages(inv_d2: np.ndarray, D: float, split_dt: float) -> dict[float, int]:
    """Stages of the diffusion super-step over the whole (1.0) and half (0.5) split step, for
    the weights ``inv_d2`` (recomputed when steering changes them); empty without splitting."""
    rho = spectral_bound(inv_d2, D)
    return {f: rkc1_stages(f * split_dt, rho) for f in (0.5, 1.0)} if split_dt > 0 else {}
