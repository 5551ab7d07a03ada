"""CUDA code for one reaction network, generated from its compiled arrays (never from user text).

Species and reactions become integer indices and rate constants a device array read through
``rate`` (one row per parameter set of a batch), so nothing the user typed reaches the C source. Small networks are fully unrolled so the state
and propensities stay in registers; above ``UNROLL_LIMIT`` reactions the sums and searches
are loops over local arrays (the per-reaction update switch stays unrolled). Up to
``STRAIGHT_FIRE_LIMIT`` mass-action reactions the update is straight-line code instead.
"""

from __future__ import annotations

import numpy as np

from app.compute.codegen import to_c
from app.compute.kernels import read_kernel
from app.sims.ssa.events import MAX_CASCADE
from app.sims.common.engine import choose
from app.sims.ssa.model import Network

NEVER = 1e308     # the instant of a species event (no time event is due then)

UNROLL_LIMIT = 64
STRAIGHT_FIRE_LIMIT = 8   # reactions up to which ssa_fire is straight-line code, not a switch
RECIPROCALS = 192   # 1/k up to the Poisson inversion's longest search (mean below 80)


def _term(s: int, m: int) -> str:
    x = f"(float)x[{s}]"
    if m == 1:
        return x
    if m == 2:
        return f"(0.5f * {x} * (float)(x[{s}] - 1))"
    return f"((1.0f / 6.0f) * {x} * (float)(x[{s}] - 1) * (float)(x[{s}] - 2))"


def _propensity(j: int, reactants: list[tuple[int, int]], net: Network | None = None) -> str:
    factors = [f"rate[{j}]", *(_term(s, m) for s, m in reactants)]
    if net is not None and net.laws and net.laws[j] is not None:
        index = {n: i for i, n in enumerate(net.species)}
        factors.append(f"({to_c(net.laws[j], lambda n: f'(float)x[{index[n]}]', single=True)})")   # unclamped: ssa_bad
        factors += [f"(x[{s}] >= {n} ? 1.f : 0.f)" for s, n in net.guards()[j]]
    return " * ".join(factors)


def _events_block(net: Network) -> list[str]:
    """Event triggers and assignments (double precision), assignment-rule species."""
    index = {n: i for i, n in enumerate(net.species)}

    def symbol(name: str) -> str:
        return f"(double)x[{index[name]}]"

    ne = len(net.events)
    times = [NEVER if e.time is None else float(e.time) for e in net.events] or [NEVER]
    out = [f"#define SSA_NE {ne}", f"#define SSA_CASCADE {MAX_CASCADE}",
           f"__constant__ double c_event_time[{max(ne, 1)}] = {{{', '.join(map(repr, times))}}};",
           "__device__ __forceinline__ void ssa_assign(const int e, int* x)\n{\n    switch (e) {"]
    for e, event in enumerate(net.events):
        values = [f"const double v{k} = fmax(0.0, rint({to_c(tree, symbol)}));"
                  for k, (_, tree) in enumerate(event.assignments)]
        stores = [f"x[{s}] = (int)v{k};" for k, (s, _) in enumerate(event.assignments)]
        out.append(f"    case {e}: {{ {' '.join(values + stores)} }} break;")
    out += ["    }\n}", "__device__ __forceinline__ bool ssa_trigger(const int e, const int* x)\n{\n    switch (e) {"]
    out += [f"    case {e}: return ({to_c(ev.trigger, symbol)}) > 0.5;"
            for e, ev in enumerate(net.events) if ev.trigger is not None]
    out += ["    }\n    return false;\n}", "__device__ __forceinline__ void ssa_derive(int* x)\n{"]
    out += [f"    x[{s}] = (int)rint({to_c(tree, symbol)});" for s, tree in net.derived]
    out += ["}", ""]
    return out


def _binary_search(lo: int, hi: int, indent: str) -> str:
    if lo == hi:
        return f"{indent}j = {lo};\n"
    mid = (lo + hi) // 2
    return (f"{indent}if (target < cum[{mid}]) {{\n{_binary_search(lo, mid, indent + '    ')}"
            f"{indent}}} else {{\n{_binary_search(mid + 1, hi, indent + '    ')}{indent}}}\n")


def _g_text(hor: int, need: int) -> str:
    """CGP 2006's g_i (as ``tauleap._g``) as float C over ``xi``."""
    d1 = "1.f / fmaxf(xi - 1.f, 1.f)"
    if hor == 1:
        return "1.f"
    if hor == 2:
        return f"(2.f + {d1})" if need >= 2 else "2.f"
    if need >= 3:
        return f"(3.f + {d1} + 2.f / fmaxf(xi - 2.f, 1.f))"
    return f"(1.5f * (2.f + {d1}))" if need == 2 else "3.f"


def _tau_block(net: Network) -> list[str]:
    """The tau-leaping hooks, straight-line code with constant species indices (so the counts,
    propensities and critical flags stay in registers): the critical reactions and their total
    propensity, CGP's leap bound tau', and k firings of reaction j."""
    from app.sims.ssa.tauleap import N_CRITICAL, check_network, species_orders

    check_network(net)
    hor, need = species_orders(net)
    change = net.change
    out = ["#define SSA_TAU 1", f"#define SSA_NC {N_CRITICAL}",
           "#define SSA_TAU_NONE 3.0e38f   // no bound: above every leap and sample interval",
           f"#define SSA_RECIPROCALS {RECIPROCALS}   // 1/(j + 1) for the Poisson inversion's search",
           "__constant__ __align__(16) float c_reciprocal[SSA_RECIPROCALS] = {"
           + ", ".join(f"{1.0 / (j + 1)!r}f" for j in range(RECIPROCALS)) + "};",
           "__device__ __forceinline__ float ssa_tau_critical(const int* x, const float* a, bool* crit)",
           "{", "    float a0c = 0.f;"]
    for j, row in enumerate(change):
        runs = [f"x[{i}]" if v == -1 else f"x[{i}] / {-int(v)}" for i, v in enumerate(row) if v < 0]
        if not runs:
            out.append(f"    crit[{j}] = false;")
            continue
        fewest = runs[0]
        for r in runs[1:]:
            fewest = f"min({fewest}, {r})"
        out += [f"    crit[{j}] = a[{j}] > 0.f && {fewest} < SSA_NC;", f"    if (crit[{j}]) a0c += a[{j}];"]
    out += ["    return a0c;", "}", "",
            "__device__ __forceinline__ float ssa_tau_prime(const int* x, const float* a, const bool* crit, "
            "const float eps)", "{", "    float tau = SSA_TAU_NONE;"]
    for i in np.flatnonzero(hor):
        moves = [(j, int(change[j, i])) for j in range(len(change)) if change[j, i]]
        if not moves:
            continue
        mu = " + ".join(f"(crit[{j}] ? 0.f : {v}.f * a[{j}])" for j, v in moves)
        sig = " + ".join(f"(crit[{j}] ? 0.f : {v * v}.f * a[{j}])" for j, v in moves)
        out += ["    {", f"        const float xi = (float)x[{i}];", f"        const float mu = {mu};",
                f"        const float sig = {sig};",
                f"        const float bound = fmaxf(eps * xi / {_g_text(int(hor[i]), int(need[i]))}, 1.f);",
                "        if (mu != 0.f) tau = fminf(tau, bound / fabsf(mu));",
                "        if (sig > 0.f) tau = fminf(tau, bound * bound / sig);", "    }"]
    out += ["    return tau;", "}", "",
            "__device__ __forceinline__ void ssa_tau_apply(const int j, const int k, int* x)",
            "{", "    switch (j) {"]
    for j, row in enumerate(change):
        body = " ".join(f"x[{i}] += {int(v)} * k;" for i, v in enumerate(row) if v)
        out.append(f"    case {j}: {body} break;")
    out += ["    }", "}", ""]
    return out


# The total is summed again here, so that the cut below it and the cumulative sums compared
# with the target are the same floats whatever the compiler fuses (a zero propensity then adds
# exactly nothing, and a reaction chosen is one whose propensity is positive). A target at or
# above the total (u * a0 can round up to it) is taken as the float just below: the first sum
# above it then belongs to the last reaction with a positive propensity.
_BELOW_TOTAL = ("    float total = 0.f;\n{pragma}\n    for (int k = 0; k < SSA_NR; ++k) total += a[k];\n"
                "    target = fminf(target, __int_as_float(__float_as_int(total) - 1));   // total > 0\n")


def _direct_selection(nr: int, pragma: str, unrolled: bool) -> list[str]:
    # the first k with target < cumulative sum is the number of sums <= target before the last
    # (they never decrease, and the last is above target): a count, no branch per reaction
    return [_BELOW_TOTAL.format(pragma=pragma) + f"    float acc = 0.f;\n    int pick = SSA_PICK_BASE;\n{pragma}\n"
            "    for (int k = 0; k < SSA_NR - 1; ++k) {\n        acc += a[k];\n"
            "        if (acc <= target) pick += SSA_PICK_STEP;\n    }\n    return pick;\n}\n"]


def _logdirect_selection(nr: int, pragma: str, unrolled: bool) -> list[str]:
    out = [_BELOW_TOTAL.format(pragma=pragma) + f"    float cum[SSA_NR];\n    float acc = 0.f;\n{pragma}\n"
           "    for (int k = 0; k < SSA_NR; ++k) { acc += a[k]; cum[k] = acc; }\n    int j;"]
    if unrolled:
        out.append(_binary_search(0, nr - 1, "    ").rstrip("\n"))
    else:
        out.append("    int lo = 0, hi = SSA_NR - 1;\n    while (lo < hi) {\n"
                   "        const int mid = (lo + hi) >> 1;\n"
                   "        if (target < cum[mid]) hi = mid; else lo = mid + 1;\n    }\n    j = lo;")
    out.append("    return SSA_PICK_BASE + j * SSA_PICK_STEP;\n}\n")
    return out


# by algorithm name; tau-leaping's exact steps select inside ssa_tau_run (ssa_select unused there)
SELECTIONS = {"direct": _direct_selection, "logdirect": _logdirect_selection, "tau-leap": _direct_selection}


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
    out += _events_block(net)
    if algorithm == "tau-leap":
        out += _tau_block(net)
    out.append("__device__ __forceinline__ void ssa_init(const float* __restrict__ rate, const int* x, "
               "float* a)\n{")
    out += [f"    a[{j}] = {_propensity(j, r, net)};" for j, r in enumerate(reactants)]
    out += ["}", ""]
    pragma = "#pragma unroll" if unrolled else "#pragma unroll 1"
    out.append(f"__device__ __forceinline__ float ssa_total(const float* a)\n{{\n    float s = 0.f;\n"
               f"{pragma}\n    for (int k = 0; k < SSA_NR; ++k) s += a[k];\n    return s;\n}}\n")
    # 1 + the first reaction whose propensity is not a finite number >= 0, else 0. Mass action
    # cannot go negative, so there the total (already summed) screens every step for free.
    general = not net.mass_action
    # A total that overflows float32 while every term is finite names the largest term.
    out.append(f"#define SSA_GUARD {int(general)}\n#define SSA_FINITE(v) ((v) >= 0.f && (v) <= 3.4028234663852886e38f)\n"
               "__device__ __forceinline__ int ssa_bad(const float* a, const float a0)\n{\n"
               "    if (!SSA_GUARD && SSA_FINITE(a0)) return 0;\n    int worst = 0;\n"
               f"{pragma}\n    for (int k = 0; k < SSA_NR; ++k) {{\n"
               "        if (!SSA_FINITE(a[k])) return k + 1;\n        if (a[k] > a[worst]) worst = k;\n    }\n"
               "    return SSA_FINITE(a0) ? 0 : worst + 1;\n}\n")
    straight = _straight_fire(net)
    # Selection: first k with cumulative propensity > target; a target rounded up to the total is
    # cut just below it, which picks the last reaction with a positive propensity.
    out.append(f"#define SSA_PICK_BASE {PICK_BASE if straight else 0}\n#define SSA_PICK_STEP {PICK_STEP if straight else 1}\n"
               "__device__ __forceinline__ int ssa_select(const float* a, float target)\n{")
    out += choose(SELECTIONS, algorithm, "SSA algorithm")(nr, pragma, unrolled)
    out += _fire(net, reactants)
    return "\n".join(out)


# With straight-line firing the selection returns reaction j as the byte selector
# 0x8880 + j * 0x1111 (PTX prmt: nibble 0 picks byte j, the others replicate its sign), so a
# count moves by a sign-extended byte of its packed changes in one instruction.
PICK_BASE, PICK_STEP = "0x8880", "0x1111"
# byte j (= nibble 0 of sel) of the 8 bytes (hi:lo), sign-extended
SIGNED_BYTE = """__device__ __forceinline__ int ssa_signed_byte(const unsigned lo, const unsigned hi, const unsigned sel)
{
#ifdef __CUDA_ARCH__
    unsigned r;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(lo), "r"(hi), "r"(sel));
    return (int)r;
#else
    return (int)(signed char)((((unsigned long long)hi << 32) | lo) >> (8 * (sel & 7u)));
#endif
}
"""


def _straight_fire(net: Network) -> bool:
    return net.n_reactions <= STRAIGHT_FIRE_LIMIT and net.mass_action


def _fire(net: Network, reactants: list[list[tuple[int, int]]]) -> list[str]:
    """``ssa_fire``: a switch over the reactions, each case updating its species and refreshing
    the propensities that depend on them; for a small mass-action network, straight-line code
    instead (each count moved by its change under the fired reaction, then every propensity
    that any reaction can change recomputed: the same values, and the lanes of a warp, which
    fire different reactions, no longer take the cases one after another)."""
    deps = net.dependents()
    head = "__device__ __forceinline__ void ssa_fire(const int pick, const float* __restrict__ rate, int* x, float* a)\n{"
    if _straight_fire(net):
        # species s moves by byte j of the (lo, hi) words holding its change under each reaction
        out = [SIGNED_BYTE, head, "    const unsigned sel = (unsigned)pick;"]
        for s in range(net.n_species):
            column = [int(net.change[j, s]) for j in range(net.n_reactions)]
            if not any(column):
                continue
            if all(-128 <= d <= 127 for d in column):
                packed = sum((d & 0xFF) << (8 * j) for j, d in enumerate(column))
                out.append(f"    x[{s}] += ssa_signed_byte({packed & 0xFFFFFFFF:#x}u, {packed >> 32:#x}u, sel);")
            else:
                moves = [f"((sel & 7u) == {j} ? {d} : 0)" for j, d in enumerate(column) if d]
                out.append(f"    x[{s}] += {' + '.join(moves)};")
        out += [f"    a[{k}] = {_propensity(k, reactants[k], net)};" for k in sorted(set().union(*deps))]
        return out + ["}", ""]
    out = [head + "\n    switch (pick) {"]
    for j in range(net.n_reactions):
        body = [f"x[{s}] += {int(d)};" for s, d in enumerate(net.change[j]) if d]
        body += [f"a[{k}] = {_propensity(k, reactants[k], net)};" for k in deps[j]]
        out.append(f"    case {j}: {' '.join(body)} break;")
    return out + ["    }\n}", ""]


def kernel_source(net: Network, hist_idx: list[int], algorithm: str) -> str:
    """The whole translation unit for ``net``: generated block + ``kernels/ssa.cu`` (the
    tau-leaping error bound is a launch argument, so one module serves every epsilon)."""
    return model_block(net, hist_idx, algorithm) + "\n" + read_kernel("ssa.cu")
