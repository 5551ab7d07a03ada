"""The generated selection and firing of the CUDA direct method (``ssa_select``, ``ssa_fire``),
built for the host with a C++ compiler, against the rule in plain NumPy: the first reaction whose
cumulative propensity exceeds the target (the last positive one for a target at or past the
total), by the linear count and by the binary search, and every count moved by the fired
reaction's change with every propensity refreshed.
Covers the straight-line firing's packed changes in a 32-bit word (up to 4 reactions) and in a
64-bit one (5 to 8), a change too large for a byte, and the switch of a larger network."""

import subprocess

import numpy as np
import pytest

from app.sims.common.config import parse_yaml
from app.sims.ssa import codegen
from app.sims.ssa.codegen import model_block
from app.sims.ssa.config import load_config

from .test_tauleap_device_code import CXX, SHIM

pytestmark = pytest.mark.skipif(CXX is None, reason="no host C++ compiler")

MAIN = """
int main() {
    char op;
    while (scanf(" %c", &op) == 1) {
        float rate[SSA_NR], a[SSA_NR];
        int x[SSA_NS];
        for (int j = 0; j < SSA_NR; ++j) scanf("%f", &rate[j]);
        if (op == 'f') {                       // f rates... j x...: fire j from x
            int j;
            scanf("%d", &j);
            for (int s = 0; s < SSA_NS; ++s) scanf("%d", &x[s]);
            ssa_init(rate, x, a);
            ssa_fire(SSA_PICK_BASE + j * SSA_PICK_STEP, rate, x, a);
            for (int s = 0; s < SSA_NS; ++s) printf("%d ", x[s]);
            for (int k = 0; k < SSA_NR; ++k) printf("%.9g ", a[k]);
        } else {                               // s propensities... target: the chosen reaction
            float target;                      // and the pick's remainder (0 for a valid pick)
            for (int k = 0; k < SSA_NR; ++k) a[k] = rate[k];
            scanf("%f", &target);
            const int pick = ssa_select(a, target) - SSA_PICK_BASE;
            printf("%d %d", pick / SSA_PICK_STEP, pick % SSA_PICK_STEP);
        }
        printf("\\n");
    }
    return 0;
}
"""


def network(species: dict[str, int], reactions: list[str]):
    text = (f"domain: ssa\nmodel:\n  species: {species}\n  reactions:\n"
            + "".join(f"    - {r}\n" for r in reactions)
            + "ensemble: {realizations: 64, t_end: 1.0, samples: 2, seed: 1}\n")
    return load_config(parse_yaml(text)).network()


NETWORKS = {
    "dimer (4 reactions, 32-bit word)": network({"S1": 100, "S2": 0, "S3": 0}, [
        "{reactants: {S1: 1}, products: {}, rate: 1.0}",
        "{reactants: {S1: 2}, products: {S2: 1}, rate: 0.002}",
        "{reactants: {S2: 1}, products: {S1: 2}, rate: 0.5}",
        "{reactants: {S2: 1}, products: {S3: 1}, rate: 0.04}"]),
    "6 reactions (64-bit word)": network({"A": 50, "B": 40, "C": 30}, [
        "{reactants: {}, products: {A: 3}, rate: 2.0}",
        "{reactants: {A: 1, B: 1}, products: {C: 2}, rate: 0.01}",
        "{reactants: {C: 2}, products: {A: 1, B: 1}, rate: 0.02}",
        "{reactants: {B: 3}, products: {}, rate: 0.0001}",
        "{reactants: {C: 1}, products: {B: 1}, rate: 0.3}",
        "{reactants: {A: 1}, products: {}, rate: 0.1}"]),
    "a burst of 200 (no byte)": network({"M": 10, "P": 500}, [
        "{reactants: {M: 1}, products: {M: 1, P: 200}, rate: 1.0}",
        "{reactants: {P: 1}, products: {}, rate: 0.01}",
        "{reactants: {}, products: {M: 1}, rate: 2.0}"]),
    "12 reactions (switch)": network({"X": 60, "Y": 40}, [
        f"{{reactants: {{X: 1}}, products: {{Y: {k % 3 + 1}}}, rate: {0.01 * (k + 1)}}}" for k in range(6)] + [
        f"{{reactants: {{Y: 1}}, products: {{X: {k % 2 + 1}}}, rate: {0.02 * (k + 1)}}}" for k in range(6)]),
}


@pytest.fixture(scope="module", params=[(n, a) for n in NETWORKS for a in ("direct", "logdirect")],
                ids=lambda p: f"{p[0]}-{p[1]}")
def built(request, tmp_path_factory):
    name, algorithm = request.param
    net = NETWORKS[name]
    folder = tmp_path_factory.mktemp("select-fire")
    (folder / "main.cpp").write_text(SHIM + model_block(net, [0], algorithm) + MAIN)
    subprocess.run([CXX, "-O2", "-o", str(folder / "main"), str(folder / "main.cpp")], check=True,
                   capture_output=True, text=True)
    return net, folder / "main"


def ask(program, lines: list[str]) -> list[str]:
    out = subprocess.run([str(program)], input="\n".join(lines) + "\n", check=True, capture_output=True,
                         text=True).stdout
    return out.splitlines()


def test_the_small_networks_fire_without_a_switch():
    sources = {name: model_block(net, [0], "direct") for name, net in NETWORKS.items()}
    for name, src in sources.items():
        fire = src[src.index("void ssa_fire"):]
        fire = fire[:fire.index("\n}\n")]
        assert ("switch" in fire) == (NETWORKS[name].n_reactions > codegen.STRAIGHT_FIRE_LIMIT), name
    assert "ssa_signed_byte(0x2feffu, 0x0u, sel)" in sources["dimer (4 reactions, 32-bit word)"]
    assert "ssa_signed_byte(0x1ff03u, 0xff00u, sel)" in sources["6 reactions (64-bit word)"]
    assert "((sel & 7u) == 0 ? 200 : 0)" in sources["a burst of 200 (no byte)"]


def test_firing_moves_the_counts_and_refreshes_every_propensity(built):
    net, program = built
    rng = np.random.default_rng(5)
    rates = net.rates.astype(np.float32)
    cases = [(j, rng.integers(5, 300, net.n_species)) for j in range(net.n_reactions) for _ in range(3)]
    lines = [" ".join(["f", *map(repr, rates.tolist()), str(j), *map(str, x)]) for j, x in cases]
    for (j, x), line in zip(cases, ask(program, lines)):
        values = line.split()
        after = x + net.change[j].astype(np.int64)
        np.testing.assert_array_equal(np.array(values[:net.n_species], np.int64), after)
        np.testing.assert_allclose(np.array(values[net.n_species:], np.float64),
                                   net.propensities(after.astype(np.float64), rates.astype(np.float64)),
                                   rtol=2e-6)


def first_above(a: np.ndarray, target: float) -> int:
    """The rule in float32, summed in the kernel's order."""
    cum = np.cumsum(a.astype(np.float32), dtype=np.float32)
    above = np.flatnonzero(np.float32(target) < cum)
    return int(above[0]) if len(above) else int(np.flatnonzero(a > 0)[-1])


def test_selection_is_the_first_cumulative_sum_above_the_target(built):
    net, program = built
    rng = np.random.default_rng(9)
    nr, cases = net.n_reactions, []
    for trial in range(300):
        a = rng.uniform(0.1, 10.0, nr).astype(np.float32)
        a[rng.random(nr) < 0.3] = 0.0                   # zeros first, inside and last
        if not a.any():
            a[trial % nr] = 1.0
        total = np.float32(np.cumsum(a, dtype=np.float32)[-1])
        u = [0.0, 1e-7, rng.random(), 0.999999, 1.0, 1.5][trial % 6]
        cases.append((a, np.float32(u) * total))
    lines = [" ".join(["s", *(f"{v:.9g}" for v in a), f"{t:.9g}"]) for a, t in cases]
    for (a, target), line in zip(cases, ask(program, lines)):
        chosen, remainder = map(int, line.split())
        assert remainder == 0, line
        assert a[chosen] > 0, (a, target, chosen)
        assert chosen == first_above(a, target), (a, target, chosen)
