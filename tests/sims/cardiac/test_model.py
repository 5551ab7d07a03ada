"""The CRN equations: one text, checked, printed for NumPy, for Python floats and for CUDA."""

import numpy as np
import pytest

from app.sims.cardiac import crn
from app.sims.cardiac.model import N_GATES, N_NONGATING, crn_model
from app.sims.cardiac.modelgen import ModelError, ModelSource


def random_states(n, seed=0):
    rng = np.random.default_rng(seed)
    y = np.repeat(crn_model().initial_state()[:, None], n, axis=1)
    y[0] = rng.uniform(-100, 60, n)
    y[1] = rng.uniform(5, 20, n)
    y[2] = rng.uniform(120, 150, n)
    y[3] = rng.uniform(5e-5, 2e-3, n)
    y[4:6] = rng.uniform(0.2, 3, (2, n))
    y[N_NONGATING:] = rng.uniform(0, 1, (N_GATES, n))
    return y


def test_model_shape_and_split():
    m = crn_model()
    assert len(m.states) == 21 and len(m.gates) == 15 and len(m.nongating) == 6
    dng, a, b = m.rates(random_states(50), 0.0, m.parameter_vector())
    assert dng.shape == (6, 50) and a.shape == (15, 50) and b.shape == (15, 50)
    assert np.all(a < 0) and np.all(np.isfinite(b))          # a = -1/tau: every gate relaxes


def test_initial_state_is_near_rest():
    m = crn_model()
    d = m.derivative(m.initial_state(), 0.0, m.parameter_vector())
    assert abs(d[0]) < 0.01                                   # mV/ms at rest


def test_scalar_and_numpy_programs_agree_on_random_states():
    m = crn_model()
    y = random_states(40, seed=3)
    p = m.parameter_vector({"ACh": 0.05})
    vec = m.rates(y, -20.0, p)
    for k in range(0, 40, 7):
        one = m.rates(y[:, k:k + 1], -20.0, p)
        for u, v in zip(vec, one):
            np.testing.assert_allclose(u[:, k], v[:, 0], rtol=1e-12, atol=1e-300)


def test_ach_current_shortens_nothing_at_zero_and_repolarises_otherwise():
    m = crn_model()
    y = random_states(20, seed=5)
    y[0] = np.linspace(-70, 20, 20)
    d0 = m.rates(y, 0.0, m.parameter_vector())[0][0]
    d1 = m.rates(y, 0.0, m.parameter_vector({"ACh": 0.1}))[0][0]
    e_k = crn.CONSTANTS["R"] * crn.CONSTANTS["T"] / crn.CONSTANTS["F"] * np.log(5.4 / y[2])
    # an outward K+ current above E_K lowers dV/dt
    assert np.all(d1[y[0] > e_k] < d0[y[0] > e_k])


def test_cuda_source_has_every_output_and_no_python():
    src = crn_model().cuda_source("float")
    for name in crn.DERIVATIVES + crn.GATE_INF + crn.GATE_TAU:
        assert f"*out_{name} =" in src
    assert "np." not in src and "where(" not in src and "expf(" in src
    assert "exp(" in crn_model().cuda_source("double")


@pytest.mark.parametrize("text,message", [
    ("x = __import__('os')", "not allowed"),
    ("x = V ** 2", "pow"),
    ("x = unknown + 1", "unknown name"),
    ("x = V < 3", "comparison"),
    ("x = where(V, 1.0, 2.0)", "comparison"),
    ("x = V.real", "not allowed"),
    ("V = 1.0", "already defined"),
])
def test_whitelist_rejects(text, message):
    with pytest.raises(ModelError, match=message):
        ModelSource.parse(text, inputs=("V",), constants={}, parameters=(), outputs=())


def test_same_text_gives_same_numbers_in_all_printers():
    src = ModelSource.parse("a = where(V >= 0.0, exp(V) / 2.0, pow(V, 3) - fabs(V))\nb = sqrt(a * a)",
                            inputs=("V",), constants={}, parameters=(), outputs=("a", "b"))
    f_np, f_py = src.numpy_function(), src.scalar_function()
    for v in (-2.0, -0.5, 0.0, 1.5):
        assert np.allclose(f_np(np.array(v)), f_py(v))
    c = src.cuda_source("f", "double")
    assert "(V >= 0.0) ?" in c and "(V * V * V)" in c
