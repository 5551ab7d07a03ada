"""Markov chains (app/sims/cardiac/markov.py): found in the expression tree, stepped together by
GRL1 exactly for frozen coefficients, first order against CVODE on a stiff chain, and on the
compiled CPU engine as on the NumPy one. The CUDA step: test_cuda_printer_host.py (g++ on the
printed function) and test_cuda_engine.py (gpu)."""

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from app.compute.codegen import parse
from app.sims.cardiac.cellml import import_cellml
from app.sims.cardiac.markov import block_increment, chain_matrix, find_chains
from app.sims.cardiac.model import CellModel
from app.sims.cardiac.solvers import METHODS, rk_step
from app.sims.cardiac.stability import jacobian

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
    (chain,) = m.chains
    assert chain.gates == (0, 1, 2) and sorted(chain.entries) == [(0, 1), (1, 0), (1, 2), (2, 1)]
    rng = np.random.default_rng(5)
    p = m.parameter_vector()
    for _ in range(4):
        y = np.concatenate([[rng.uniform(-90, 40)], rng.uniform(0.05, 1, m.n_states - 1)])
        _, a, _, jng = m.rates(y[:, None], np.zeros(1), p)
        got = chain_matrix(a[list(chain.gates)], chain.entries, jng[chain.first:chain.first + 4])[0]
        rows = [m.n_nongating + g for g in chain.gates]
        want = jacobian(m, y, p)[np.ix_(rows, rows)]
        np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-9 * np.abs(want).max())


def test_block_increment_matches_scipy_on_random_rate_matrices():
    """h·φ1(h·A)·f against the last column of SciPy's exp(h·[[A, f], [0, 0]]), on chains of 2
    to 15 states with rates 1e-3..1e3 per ms (h·‖A‖ up to ~10^4: many squarings)."""
    from scipy.linalg import expm
    rng = np.random.default_rng(2)
    for n in (2, 5, 9, 15):
        q = 10.0 ** rng.uniform(-3, 3, (8, n, n))
        q[:, np.arange(n), np.arange(n)] = 0.0
        q[:, np.arange(n), np.arange(n)] = -q.sum(axis=1)
        f = rng.normal(size=(8, n))
        got = block_increment(q, f, 0.05)
        for k in range(8):
            aug = np.zeros((n + 1, n + 1))
            aug[:n, :n], aug[:n, n] = 0.05 * q[k], 0.05 * f[k]
            want = expm(aug)[:n, n]
            assert np.max(np.abs(got[k] - want)) <= 1e-9 * max(np.abs(want).max(), 1e-3), (n, k)


def test_grl1_steps_the_chain_exactly_for_frozen_coefficients(tmp_path):
    """One GRL1 step of 0.5 ms (|h·λ| up to ~20 at +30 mV) from a depolarised state: the
    chain's states equal a Radau integration of the chain alone with V and the other gates
    frozen (to 1e-9), whatever the step; the chain conserves its occupancy."""
    m = CellModel(import_cellml(write_markov_model(tmp_path))).with_jacobian()
    p = m.parameter_vector()
    y = m.initial_state()
    y[0] = 30.0
    rows = [m.n_nongating + g for g in m.chains[0].gates]

    def chain_rhs(_, z):
        full = y.copy()
        full[rows] = z
        return m.derivative(full[:, None], 0.0, p)[rows, 0]

    want = solve_ivp(chain_rhs, (0.0, 0.5), y[rows], method="Radau", rtol=1e-12, atol=1e-14).y[:, -1]
    high, _ = rk_step(lambda t, yy: m.rates(yy, np.zeros(1), p), 0.0, y[:, None].copy(), 0.5,
                      METHODS["grl1"], m.n_nongating, m.chains)
    np.testing.assert_allclose(high[rows, 0], want, rtol=0, atol=1e-9)
    assert abs(high[rows, 0].sum() - 1.0) < 1e-12


def test_grl1_on_a_stiff_chain_is_first_order_against_cvode(tmp_path):
    """One beat of the synthetic cell against CVODE at 1e-10: the largest V difference halves
    as the step halves (measured ratios 1.99 and 1.99: first order, the splitting of the chain
    from V), and GRL1's APD90 error at 0.05 ms is a tenth of RLFE's, which steps each of the
    chain's states alone (measured 0.22 ms against 2.9 ms)."""
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
def test_compiled_grl1_on_a_chain_matches_the_numpy_engine(tmp_path, lookup):
    """A 6-cell strip of the synthetic cell, GRL1 in float64: the compiled step (vectorised
    module, or the table module with lookup tables) against the NumPy engine, every state, to
    rounding (1e-9 relative: numba's exp against NumPy's over 600 steps)."""
    from .helpers import config
    from app.sims.cardiac.simulation import CardiacSimulation
    path = write_markov_model(tmp_path)
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
