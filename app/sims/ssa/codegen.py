"""CUDA code for one reaction network, generated from its compiled arrays (never from user text).

Species and reactions become integer indices and rate constants a device array read through
``rate`` (one row per parameter set of a batch), so nothing the user typed reaches the C source. Small networks are fully unrolled so the state
and propensities stay in registers; above ``UNROLL_LIMIT`` reactions the sums and searches
are loops over local arrays (the per-reaction update switch stays unrolled).
"""

from __future__ import annotations

from app.compute.kernels import read_kernel
from app.sims.common.engine import choose
from app.sims.ssa.model import Network

UNROLL_LIMIT = 64


def _term(s: int, m: int) -> str:
    x = f"(float)x[{s}]"
    if m == 1:
        return x
    if m == 2:
        return f"(0.5f * {x} * (float)(x[{s}] - 1))"
    return f"((1.0f / 6.0f) * {x} * (float)(x[{s}] - 1) * (float)(x[{s}] - 2))"


def _propensity(j: int, reactants: list[tuple[int, int]]) -> str:
    return " * ".join([f"rate[{j}]", *(_term(s, m) for s, m in reactants)])


def _binary_search(lo: int, hi: int, indent: str) -> str:
    if lo == hi:
        return f"{indent}j = {lo};\n"
    mid = (lo + hi) // 2
    return (f"{indent}if (target < cum[{mid}]) {{\n{_binary_search(lo, mid, indent + '    ')}"
            f"{indent}}} else {{\n{_binary_search(mid + 1, hi, indent + '    ')}{indent}}}\n")


def _direct_selection(nr: int, pragma: str, unrolled: bool) -> list[str]:
    return [f"    float acc = 0.f;\n    int j = -1, last = 0;\n{pragma}\n"
            "    for (int k = 0; k < SSA_NR; ++k) {\n        acc += a[k];\n"
            "        if (a[k] > 0.f) last = k;\n        if (j < 0 && target < acc) j = k;\n"
            "    }\n    return j < 0 ? last : j;\n}\n"]


def _logdirect_selection(nr: int, pragma: str, unrolled: bool) -> list[str]:
    out = [f"    float cum[SSA_NR];\n    float acc = 0.f;\n    int last = 0;\n{pragma}\n"
           "    for (int k = 0; k < SSA_NR; ++k) { acc += a[k]; cum[k] = acc; if (a[k] > 0.f) last = k; }\n"
           "    if (!(target < cum[SSA_NR - 1])) return last;\n    int j;"]
    if unrolled:
        out.append(_binary_search(0, nr - 1, "    ").rstrip("\n"))
    else:
        out.append("    int lo = 0, hi = SSA_NR - 1;\n    while (lo < hi) {\n"
                   "        const int mid = (lo + hi) >> 1;\n"
                   "        if (target < cum[mid]) hi = mid; else lo = mid + 1;\n    }\n    j = lo;")
    out.append("    return j;\n}\n")
    return out


SELECTIONS = {"direct": _direct_selection, "logdirect": _logdirect_selection}   # by algorithm name


def model_block(net: Network, hist_idx: list[int], algorithm: str) -> str:
    """The generated definitions ``kernels/ssa.cu`` expects for ``net``."""
    ns, nr, hs = net.n_species, net.n_reactions, len(hist_idx)
    reactants = net.reactant_lists()
    unrolled = nr <= UNROLL_LIMIT
    out = [f"// generated for {ns} species, {nr} reactions, algorithm {algorithm}",
           f"#define SSA_NS {ns}", f"#define SSA_NR {nr}", f"#define SSA_HS {hs}",
           f"__constant__ int c_hist_species[SSA_HS] = {{{', '.join(map(str, hist_idx))}}};",
           "",
           "__device__ __forceinline__ int ssa_hist(const int h, const int* x)\n{\n    switch (h) {"]
    out += [f"    case {h}: return x[{s}];" for h, s in enumerate(hist_idx)]
    out += ["    }\n    return 0;\n}", ""]
    out.append("__device__ __forceinline__ void ssa_init(const float* __restrict__ rate, const int* x, "
               "float* a)\n{")
    out += [f"    a[{j}] = {_propensity(j, r)};" for j, r in enumerate(reactants)]
    out += ["}", ""]
    pragma = "#pragma unroll" if unrolled else "#pragma unroll 1"
    out.append(f"__device__ __forceinline__ float ssa_total(const float* a)\n{{\n    float s = 0.f;\n"
               f"{pragma}\n    for (int k = 0; k < SSA_NR; ++k) s += a[k];\n    return s;\n}}\n")
    # Selection: first k with cumulative propensity > target; rounding at the very top falls
    # back to the last reaction with a positive propensity.
    out.append("__device__ __forceinline__ int ssa_select(const float* a, const float target)\n{")
    out += choose(SELECTIONS, algorithm, "SSA algorithm")(nr, pragma, unrolled)
    deps = net.dependents()
    out.append("__device__ __forceinline__ void ssa_fire(const int j, const float* __restrict__ rate, "
               "int* x, float* a)\n{\n    switch (j) {")
    for j in range(nr):
        body = [f"x[{s}] += {int(d)};" for s, d in enumerate(net.change[j]) if d]
        body += [f"a[{k}] = {_propensity(k, reactants[k])};" for k in deps[j]]
        out.append(f"    case {j}: {' '.join(body)} break;")
    out += ["    }\n}", ""]
    return "\n".join(out)


def kernel_source(net: Network, hist_idx: list[int], algorithm: str) -> str:
    """The whole translation unit for ``net``: generated block + ``kernels/ssa.cu``."""
    return model_block(net, hist_idx, algorithm) + "\n" + read_kernel("ssa.cu")
