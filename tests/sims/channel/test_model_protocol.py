import numpy as np
import pytest

from app.sims.channel.config import load_config
from app.sims.common.config import ConfigError, parse_yaml

from .helpers import model, preset

MODEL = """domain: channel
model:
  states: [C, O]
  open_states: [O]
  parameters:
    - {name: a, min: 0, max: 1, value: 0.5}
    - {name: gmax, min: 0, max: 10, value: 5}
  rates:
    - k12 = a*exp(v/10)
    - k21 = a
protocols:
  - name: act
    holding: -100
    segments: [{voltage: step, duration: 5, record: true}]
    steps: {start: -50, stop: 50, increment: 25}
"""


def load(text):
    return load_config(parse_yaml(text, "fit.yaml"))


def test_shipped_models_and_sizes():
    assert model("model-a").n_params == 5 and model("model-b").n_params == 9
    assert model("model-c").n_params == 13 and model("hh-potassium").n_states == 5
    cfg = preset()
    assert cfg.protocol().n_points == 12_500          # the paper's data-set size
    gk = preset("hh-potassium-surrogate").protocol()
    assert gk.n_points == 11 * 1500 + 12 * 2786       # Gurkiewicz & Korngreen (2007)


def test_q_matrix_columns_sum_to_zero():
    m = model("hh-potassium")
    p = m.lower + np.random.default_rng(0).uniform(size=(20, m.n_params)) * (m.upper - m.lower)
    q = m.q_matrix(p, -30.0)
    assert np.allclose(q.sum(axis=1), 0.0)
    assert (q - np.eye(5) * q >= 0).all()


def test_removable_singularity_is_evaluated_beside_it():
    m = model("hh-potassium")
    p = m.true_values[None, :]
    at = m.rate_values(p, -55.0)["alpha"]         # v = a2: 0/0 in the formula
    near = m.rate_values(p, -55.0 + 1e-3)["alpha"]
    assert np.isfinite(at).all() and np.isclose(at, near)
    assert np.isclose(at, 0.01 * 10.0, rtol=1e-3)  # the limit a1*a3


@pytest.mark.parametrize("bad,message,line", [
    (MODEL.replace("k12 = a*exp(v/10)", "k12 = a*exp(v/10);}"), "character ';' is not allowed", 9),
    (MODEL.replace("k21 = a", "k31 = a"), "outside 1..2", 10),
    (MODEL.replace("k21 = a", "k21 = b"), "unknown name 'b'", 10),
    (MODEL.replace("value: 0.5", "value: 1.5"), "outside its range [0, 1]", 6),
    (MODEL.replace("open_states: [O]", "open_states: [X]"), "open states must name states", 4),
    (MODEL.replace("duration: 5, record: true", "duration: 5.05, record: true"),
     "whole number of dt", 14),
    (MODEL.replace("increment: 25", "increment: -25"), "valid range", 15),
    (MODEL + "ga: {population: 1}\n", "valid range is [2, 4e+06]", 16),
])
def test_bad_models_and_protocols_name_the_line(bad, message, line):
    with pytest.raises(ConfigError) as info:
        load(bad)
    assert message in str(info.value)
    assert info.value.line == line


def test_protocol_expansion():
    cfg = load(MODEL)
    protocol = cfg.protocol()
    assert [s.label for s in protocol.sweeps] == ["act -50 mV", "act -25 mV", "act 0 mV", "act 25 mV", "act 50 mV"]
    assert protocol.n_points == 5 * 50
    assert np.allclose(protocol.sweeps[0].times()[:3], [0.1, 0.2, 0.3])
