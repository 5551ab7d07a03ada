"""CUDA for one channel model, printed from its parsed rate trees (never from user text).

Rates, Q, exp(Q tau) and the steady state are computed in double (a few dozen times per
individual); the per-sample propagation and the residuals run in float32.
"""

from __future__ import annotations

from app.compute.codegen import to_c
from app.compute.kernels import read_kernel
from app.sims.channel.model import ChannelModel


def model_block(model: ChannelModel) -> str:
    """``ch_rates``, ``ch_fill_q`` and ``ch_open`` for ``model``, plus its sizes."""
    params = {name: f"p[{k}]" for k, name in enumerate(model.param_names)}
    rates = {name: f"r[{k}]" for k, (name, _) in enumerate(model.rate_defs)}

    def symbol(name: str) -> str:
        if name == "v":
            return "v"
        return rates.get(name) or params[name]

    n = model.n_states
    # Only checked identifiers (model.IDENTIFIER) and printed numbers reach this source; the
    # model's free-text name never does.
    lines = ["// generated channel model",
             f"#define CH_NS {n}", f"#define CH_NP {model.n_params}",
             f"#define CH_NRATES {len(model.rate_defs)}", f"#define CH_G {model.conductance}",
             f"#define CH_EREV {float(model.e_rev)!r}", "",
             "__device__ __forceinline__ void ch_rates(const double* p, const double v, double* r)\n{"]
    lines += [f"    r[{k}] = {to_c(tree, symbol)};  // {name}" for k, (name, tree) in enumerate(model.rate_defs)]
    lines += ["}", "", "__device__ __forceinline__ void ch_fill_q(const double* r, double* Q)\n{"]
    lines += [f"    Q[{k}] = 0.0;" for k in range(n * n)]
    for i, j, name in model.transitions:
        lines.append(f"    Q[{j * n + i}] += {rates[name]}; Q[{i * n + i}] -= {rates[name]};  // {name}")
    lines += ["}", "", "__device__ __forceinline__ float ch_open(const float* P)\n{"]
    terms = " + ".join(f"P[{k}]" for k in range(n) if model.open_mask[k])
    lines += [f"    return {terms};", "}", ""]
    return "\n".join(lines)


def kernel_source(model: ChannelModel) -> str:
    return model_block(model) + "\n" + read_kernel("channel.cu")
