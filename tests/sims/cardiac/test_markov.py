"""Blocks (app/sims/cardiac/markov.py): Markov chains found in the expression tree and fast groups
found in the Jacobian at rest, stepped together by GRL1 (the linearly implicit Euler step on the
block), first order against CVODE on a stiff chain and on a stiff pair of membrane potentials,
and on the compiled CPU engine as on the NumPy one. The CUDA step: test_cuda_printer_host.py (g++ on the
printed function) and test_cuda_engine.py (gpu)."""

import numpy as np
import pytest

from app.compute.codegen import parse
from app.sims.cardiac.cellml import import_cellml
from app.sims.cardiac.markov import FAST_RATE, block_entries, block_increment, block_matrix, fast_groups, find_chains
from app.sims.cardiac.model import CellModel
from app.sims.cardiac.solvers import METHODS, rk_step

from .helpers import run
from .synthetic import markov_run, trace_difference, write_markov_model


def program(text: str, states=("V", "x", "y", "z", "c")):
    """``name = expression`` lines as a program over ``states``."""
    out, names = [], set(states)
    for line in text.strip().splitlines():
        name, expr = (s.strip() for s in line.split("="))
        out.append((name, parse(expr, names)))
        names.add(name)
    return out


RATES = {s: (f"a_{s}", f"b_{s}") for s in ("x", "y", "z")}
STATES = ("V", "x", "y", "z", "c")


def test_an_affine_chain_is_found_in_state_order():
    """x ⇌ y ⇌ z with V- and c-dependent rates (c a concentration outside the chain)."""
    p = program("""
        k = exp(V / 20)
        a_x = -k
        b_x = 2 * y
        a_y = -(2 + c)
        b_y = k * x + 3 * z
        a_z = -3
        b_z = c * y""")
    assert find_chains(p, STATES, RATES) == (("x", "y", "z"),)


def test_a_member_not_affine_in_the_chain_leaves_it():
    """z's b reads y·y (not affine): z leaves, x ⇌ y stays a chain. A gate whose own rate a
    reads a partner (x's a reads y) leaves too, and a chain of one is no chain."""
    p = program("""
        a_x = -1
        b_x = 2 * y
        a_y = -2
        b_y = x + z
        a_z = -3
        b_z = y * y""")
    assert find_chains(p, STATES, RATES) == (("x", "y"),)
    p = program("""
        a_x = -y
        b_x = 2 * y
        a_y = -2
        b_y = x
        a_z = -3
        b_z = 1""")
    assert find_chains(p, STATES, RATES) == ()


def test_the_synthetic_channel_is_one_chain_and_its_matrix_is_the_jacobians_block(tmp_path):
    """C ⇌ O ⇌ I of synthetic.write_markov_model: one chain; A (diagonal a, entries printed
    from the symbolic derivatives) equals the central-difference Jacobian's block at random
    states, within the differences' truncation (1e-7 relative)."""
    m = CellModel(import_cellml(write_markov_model(tmp_path))).with_jacobian()
    assert m.imported.chains == (("cell_C", "cell_O", "cell_I"),)
    (chain,) = m.blocks
    assert chain.states == (1, 2, 3) and sorted(chain.entries) == [(0, 1), (1, 0), (1, 2), (2, 1)]
    rng = np.random.default_rng(5)
    p = m.parameter_vector()
    for _ in range(4):
        y = np.concatenate([[rng.uniform(-90, 40)], rng.uniform(0.05, 1, m.n_states - 1)])
        _, a, _, jng = m.rates(y[:, None], np.zeros(1), p)
        rows = list(chain.states)
        got = block_matrix(a[[k - m.n_nongating for k in rows]], chain.entries, jng[chain.first:chain.first + 4])[0]
        want = m.numeric_jacobian(y, p)[np.ix_(rows, rows)]
        np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-9 * np.abs(want).max())


def test_grl1_steps_the_chain_by_backward_euler_with_frozen_coefficients(tmp_path):
    """One GRL1 step of 0.5 ms (h·|λ| up to ~20 at +30 mV) from a depolarised state: the
    chain's new states solve the implicit Euler equation of the chain alone, V and the other
    gates frozen, x1 = x0 + h·f(x1) (residual at rounding), stay in [0, 1] and keep the chain's
    total (a closed chain); the diagonal-only step (each state alone) leaves a residual of
    order 0.1."""
    m = CellModel(import_cellml(write_markov_model(tmp_path))).with_jacobian()
    p = m.parameter_vector()
    y = m.initial_state()
    y[0] = 30.0
    rows = list(m.blocks[0].states)

    def chain_rhs(z):
        full = y.copy()
        full[rows] = z
        return m.derivative(full[:, None], 0.0, p)[rows, 0]

    def rates(_, yy):
        return m.rates(yy, np.zeros(1), p)

    h = 0.5
    for chains in (m.blocks, ()):
        high, _ = rk_step(rates, 0.0, y[:, None].copy(), h, METHODS["grl1"], m.n_nongating, chains)
        x1 = high[rows, 0]
        residual = np.max(np.abs(x1 - y[rows] - h * chain_rhs(x1)))
        if not chains:
            assert residual > 0.05, residual
            continue
        assert residual < 1e-12 and np.all((x1 >= 0) & (x1 <= 1)), (residual, x1)
        assert abs(x1.sum() - 1.0) < 1e-13


def test_block_increment_solves_the_implicit_step_on_random_rate_matrices():
    """h·(I − h·A)⁻¹·f on chains of 2 to 15 states with rates 1e-3..1e3 per ms: the increment
    d satisfies d = h·(f + A·d) to rounding."""
    rng = np.random.default_rng(2)
    for n in (2, 5, 9, 15):
        q = 10.0 ** rng.uniform(-3, 3, (8, n, n))
        q[:, np.arange(n), np.arange(n)] = 0.0
        q[:, np.arange(n), np.arange(n)] = -q.sum(axis=1)
        f = rng.normal(size=(8, n))
        d = block_increment(q, f, 0.05)
        residual = d - 0.05 * (f + np.einsum("kij,kj->ki", q, d))
        assert np.max(np.abs(residual)) < 1e-12 * max(1.0, np.abs(d).max()), n


def test_grl1_on_a_stiff_chain_is_first_order_against_cvode(tmp_path):
    """One beat of the synthetic cell against CVODE at 1e-10: the largest V difference halves
    as the step halves (measured ratios 1.99 and 1.99: first order, the splitting of the chain
    from V), and GRL1's APD90 error at 0.05 ms is a tenth of RLFE's, which steps each of the
    chain's states alone (measured 0.15 ms against 2.9 ms)."""
    path = write_markov_model(tmp_path)
    ref_arrays, ref = run(markov_run(path, "{method: cvode, at: 1.0e-10, rt: 1.0e-10}"))
    errors = []
    for dt in (0.1, 0.05, 0.025):
        arrays, s = run(markov_run(path, f"{{method: grl1, dt: {dt}, precision: float64}}"))
        errors.append(trace_difference(arrays, ref_arrays))
        if dt == 0.05:
            grl1_apd = abs(s["apd90_ms"] - ref["apd90_ms"])
    assert 1.8 < errors[0] / errors[1] < 2.2 and 1.8 < errors[1] / errors[2] < 2.2, errors
    _, s = run(markov_run(path, "{method: rlfe, dt: 0.05, precision: float64}"))
    assert grl1_apd < 0.1 * abs(s["apd90_ms"] - ref["apd90_ms"]), (grl1_apd, s["apd90_ms"], ref["apd90_ms"])


@pytest.mark.parametrize("lookup", [False, True])
@pytest.mark.parametrize("tubule", [None, (10.0, 40.0)])
def test_compiled_grl1_on_blocks_matches_the_numpy_engine(tmp_path, lookup, tubule):
    """A 6-cell strip of the synthetic cell, GRL1 in float64: the compiled step (vectorised
    module, or the table module with lookup tables) against the NumPy engine, every state, to
    rounding (1e-9 relative: numba's exp against NumPy's over 600 steps); with ``tubule``, V is
    in a fast group with Vt, its diffusion current frozen in f_V."""
    from .helpers import config
    from app.sims.cardiac.simulation import CardiacSimulation
    path = write_markov_model(tmp_path, tubule=tubule)
    text = (f"model: {{file: '{path}'}}\nmesh: {{kind: sheet, nx: 6, ny: 1, dx_mm: 0.1}}\nprotocol: {{t_end: 30.0}}\n"
            f"solver: {{method: grl1, dt: 0.05, precision: float64, lookup_tables: {str(lookup).lower()}}}\n")
    final = {}
    for backend in ("cpu", "cpu-reference"):
        sim = CardiacSimulation(config(text), backend)
        while not sim.finished:
            sim.advance()
        final[backend] = sim.engine.y.copy()
    assert final["cpu"][0].max() > 0.0                           # the strip is excited
    np.testing.assert_allclose(final["cpu"], final["cpu-reference"], rtol=1e-9, atol=1e-12)


def test_split_coupling_names_the_fastest_exchange_outside_the_chains(tmp_path):
    """The synthetic cell at rest: the fastest two-way exchange √(J_ij·J_ji) is O ⇌ I inside the
    chain (1.16/ms), which GRL1 steps together, so the fastest one it splits is another pair's,
    slower, with its rate from the same Jacobian."""
    from app.sims.cardiac.stability import split_coupling
    m = CellModel(import_cellml(write_markov_model(tmp_path)))
    p = m.parameter_vector()
    jac = m.numeric_jacobian(m.initial_state(), p)
    index = {s: k for k, s in enumerate(m.states)}
    o, i = index["cell.O"], index["cell.I"]
    inside = np.sqrt(jac[o, i] * jac[i, o])
    split = split_coupling(m, p)
    assert split is not None and not set(split.states) <= {"cell.C", "cell.O", "cell.I"}
    a, b = (index[s] for s in split.states)
    assert split.rate == pytest.approx(np.sqrt(jac[a, b] * jac[b, a]), rel=1e-12) and split.rate < 0.1 * inside


TUBULE = (10.0, 40.0)     # V and Vt of the synthetic cell exchange at √(10·40) = 20/ms


def test_fast_groups_join_the_fastest_exchanges_first_within_the_cap():
    """A hand-written Jacobian: pairs exchanging above FAST_RATE join transitively, one-way or
    oscillating couplings (J_ij·J_ji ≤ 0), slow pairs and states not eligible stay apart, and a
    join beyond the cap is skipped (the slower link of 0–1–2 at cap 2)."""
    j = np.diag([-1.0] * 7)
    def couple(a, b, rate, sign=1.0):
        j[a, b], j[b, a] = rate, sign * rate
    couple(0, 1, 100.0)
    couple(1, 2, 30.0)
    couple(3, 4, 50.0, -1.0)           # oscillating: no exchange
    j[5, 3] = 1e3                       # one-way
    couple(5, 6, 0.9 * FAST_RATE)       # slow
    couple(2, 6, 40.0)
    assert fast_groups(j, range(7)) == ((0, 1, 2, 6),)
    assert fast_groups(j, [0, 1, 2, 3, 4, 5]) == ((0, 1, 2),)
    assert fast_groups(j, range(7), cap=2) == ((0, 1), (2, 6))


def test_the_tubule_cell_steps_v_and_vt_together_and_their_block_is_the_jacobians(tmp_path):
    """The synthetic cell with a t-tubular potential: its blocks are the chain and the fast
    group (V, Vt); J_BB (diagonal from jng, entries printed from the symbolic derivatives)
    equals the central-difference Jacobian's block at random states (1e-7 relative)."""
    m = CellModel(import_cellml(write_markov_model(tmp_path, tubule=TUBULE))).with_jacobian()
    assert m.states[:2] == ("cell.V", "cell.Vt") and m.fast_groups == ((0, 1),)
    chain, group = m.blocks
    assert chain.states == (2, 3, 4) and group.states == (0, 1) and sorted(group.entries) == [(0, 1), (1, 0)]
    rng = np.random.default_rng(7)
    p = m.parameter_vector()
    for _ in range(4):
        y = np.concatenate([rng.uniform(-90, 40, 2), rng.uniform(0.05, 1, m.n_states - 2)])
        _, _, _, jng = m.rates(y[:, None], np.zeros(1), p)
        got = block_matrix(jng[:2], group.entries, jng[group.first:group.first + 2])[0]
        want = m.numeric_jacobian(y, p)[:2, :2]
        np.testing.assert_allclose(got, want, rtol=1e-7)


def test_grl1_steps_a_fast_group_by_the_linearly_implicit_euler_step(tmp_path):
    """One GRL1 step of 0.5 ms of the tubule cell from V = −20 mV: the fast group's new (V, Vt)
    solve the linearised implicit equation x1 = x0 + h·(f(y0) + J_BB·(x1 − x0)) (J_BB by central
    differences: 1e-6 relative), the other states frozen."""
    m = CellModel(import_cellml(write_markov_model(tmp_path, tubule=TUBULE))).with_jacobian()
    p = m.parameter_vector()
    y = m.initial_state()
    y[0] = -20.0
    h = 0.5

    def rates(_, yy):
        return m.rates(yy, np.zeros(1), p)

    high, _ = rk_step(rates, 0.0, y[:, None].copy(), h, METHODS["grl1"], m.n_nongating, m.blocks)
    jac, f0 = m.numeric_jacobian(y, p), m.derivative(y[:, None], 0.0, p)[:, 0]
    d = high[:2, 0] - y[:2]
    residual = d - h * (f0[:2] + jac[:2, :2] @ d)
    assert np.all(np.abs(d) > 1.0) and np.max(np.abs(residual)) < 1e-6 * np.max(np.abs(d)), (d, residual)


def test_block_entries_of_a_gate_whose_rate_reads_the_block():
    """A hand-written program: c (non-gating) and x (a gate whose a reads c) exchange; J_BB's
    entries are ∂(dc)/∂x and ∂(a·x + b)/∂c = x·∂a/∂c + ∂b/∂c, against central differences."""
    from app.compute.codegen import evaluate
    p = program("""
        a_x = -(1 + c * c)
        b_x = 2 * c + V / 100
        dc = -5 * c + 3 * x * x
    """)
    eqs, entries = block_entries(p, ("c", "x"), {"c": ("dc", None), "x": ("a_x", "b_x")}, "probe_")
    env = {"V": np.float64(-30.0), "c": np.float64(0.7), "x": np.float64(0.4), "y": 0.0, "z": 0.0}

    def run_program(env):
        out = dict(env)
        for name, tree in p + eqs:
            out[name] = evaluate(tree, out)
        return out

    def f(state, env):
        out = run_program(env)
        return out["dc"] if state == "c" else out["a_x"] * out["x"] + out["b_x"]

    values = run_program(env)
    got = {(i, j): float(evaluate(tree, values)) for i, j, tree in entries}
    for (i, j), (s, t) in (((0, 1), ("c", "x")), ((1, 0), ("x", "c"))):
        up, down = dict(env), dict(env)
        up[t], down[t] = env[t] + 1e-6, env[t] - 1e-6
        assert got[i, j] == pytest.approx((f(s, up) - f(s, down)) / 2e-6, rel=1e-7)
    assert got[1, 0] == pytest.approx(2.0 - 2 * 0.7 * 0.4)


def test_grl1_on_a_fast_pair_of_potentials_is_first_order_against_cvode(tmp_path, monkeypatch):
    """One beat of the tubule cell (V and Vt exchanging at 20/ms) against CVODE at 1e-10: the
    largest V difference halves as the step halves (measured ratios 1.96 and 1.98: first order),
    and at 0.05 ms (h·rate 1) it is a tenth of the error with V and Vt stepped apart (measured
    4.2 mV against 82 mV; APD90 +0.24 ms against −53 ms)."""
    path = write_markov_model(tmp_path, tubule=TUBULE)
    ref_arrays, _ = run(markov_run(path, "{method: cvode, at: 1.0e-10, rt: 1.0e-10}"))
    errors = [trace_difference(run(markov_run(path, f"{{method: grl1, dt: {dt}, precision: float64}}"))[0], ref_arrays)
              for dt in (0.1, 0.05, 0.025)]
    assert 1.7 < errors[0] / errors[1] < 2.3 and 1.7 < errors[1] / errors[2] < 2.3, errors
    monkeypatch.setattr(CellModel, "fast_groups", property(lambda self: ()))
    apart = trace_difference(run(markov_run(path, "{method: grl1, dt: 0.05, precision: float64}"))[0], ref_arrays)
    assert errors[1] < apart / 10, (errors[1], apart)
