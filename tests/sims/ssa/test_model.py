import numpy as np
import pytest

from app.sims.common.config import ConfigError, parse_yaml
from app.sims.common.simulation import load_run_config, presets
from app.sims.ssa.config import load_config
from app.sims.ssa.model import GridSpec, grid_network


def load(text):
    return load_config(parse_yaml(text, "net.yaml"))


BASE = """domain: ssa
model:
  species: {A: 10, B: 0}
  parameters: {k: 1.0}
  reactions:
    - {reactants: {A: 2}, products: {B: 1}, rate: k}
"""


def test_all_presets_load():
    for path in presets("ssa"):
        domain, cfg = load_run_config(path)
        assert domain.name == "ssa" and cfg.network().n_reactions > 0


def test_combinatorial_convention():
    net = load(BASE).network()
    # 2 A -> B fires at k * A (A - 1) / 2
    assert net.propensities(np.array([10, 0]))[0] == pytest.approx(45.0)
    assert net.propensities(np.array([1, 0]))[0] == 0.0


def test_dependency_graph_of_dimer():
    _, cfg = load_run_config(presets("ssa")[0])
    deps = cfg.network().dependents()
    # decay and dimerization change S1: both S1 reactions depend on them; S2 reactions too for 1, 2
    assert deps[0] == [0, 1]
    assert deps[1] == [0, 1, 2, 3]
    assert deps[3] == [2, 3]


@pytest.mark.parametrize("bad,message,line", [
    (BASE.replace("{A: 2}", "{C: 2}"), "unknown species 'C'", 6),
    (BASE.replace("A: 10", "A: -1"), "counts must be >= 0", 3),
    (BASE.replace("k: 1.0", "k: -2"), "rate constants must be finite and >= 0", 4),
    (BASE.replace("rate: k", "rate: q"), "rate 'q' is not a parameter", 6),
    ("domain: ssa\nmodel:\n  species: {}\n  reactions: []\n", "no species", 3),
    ("domain: ssa\nmodel:\n  species: {A: 1}\n  reactions: []\n", "no reactions", 4),
    (BASE + "ensemble: {realizations: -5}\n", "valid range is [1, 6.71089e+07]", 7),
    (BASE + "ensemble: {algorithm: fast}\n", "not one of: direct, logdirect", 7),
    (BASE + "ensemble: {histogram_species: [Z]}\n", "unknown species 'Z'", 7),
])
def test_bad_networks_are_reported_at_their_line(bad, message, line):
    with pytest.raises(ConfigError) as info:
        load(bad)
    assert message in str(info.value)
    assert info.value.line == line


def test_model_and_grid_are_exclusive():
    with pytest.raises(ConfigError, match="exactly one of 'model'"):
        load("domain: ssa\nensemble: {}\n")


def test_grid_template_any_n():
    for n in (2, 5, 12):
        net = grid_network(GridSpec(n=n))
        diffusion = 4 * n * (n - 1)            # directed neighbour pairs
        assert net.n_reactions == diffusion + n * n + 4
        assert net.grid_index.shape == (n, n)
        assert net.x0[net.grid_index].sum() == 100
    with pytest.raises(ValueError, match="outside the 4x4 grid"):
        grid_network(GridSpec(n=4, a_cell=[4, 0]))
