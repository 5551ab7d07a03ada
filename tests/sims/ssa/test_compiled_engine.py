"""The compiled (numba) SSA engine against the NumPy reference: same streams, same algorithm.

Both engines are float64 and do the same operations in the same order on the same Philox
words, so on these networks they agree exactly (counts, draws consumed, times to rounding);
the exact-law tests of the reference (tests/sims/ssa/test_cpu_engine.py) therefore carry over.
"""

import numpy as np
import pytest

from app.sims.common.simulation import PRESETS, load_run_config
from app.sims.ssa.compiled import CompiledEnsemble
from app.sims.ssa.cpu import CpuEnsemble
from app.sims.ssa.simulation import SSASimulation
from tests.sims.ssa.helpers import BIRTH_DEATH, config


def preset_network(name: str):
    _, cfg = load_run_config(PRESETS / "ssa" / name)
    return cfg.network()


def assert_same(ref: CpuEnsemble, fast: CompiledEnsemble) -> None:
    assert np.array_equal(ref.states(), fast.states())
    assert np.array_equal(ref.draws, fast.draws)
    assert ref.reactions_fired == fast.reactions_fired
    np.testing.assert_allclose(fast.t, ref.t, rtol=1e-12, atol=0)


@pytest.mark.parametrize("algorithm", ["direct", "logdirect"])
@pytest.mark.parametrize("preset,times", [
    ("00-decay-dimerization.yaml", (0.005, 0.01)),   # 2nd-order reaction, dependency updates
    ("schlogl.yaml", (0.5, 1.0)),                    # 3rd-order reaction, bimodal law
    ("toggle-switch.yaml", (1.0, 2.0)),
])
def test_agrees_with_numpy_reference_on_the_same_streams(preset, times, algorithm):
    net = preset_network(preset)
    ref = CpuEnsemble(net, 48, 11, algorithm, [0], 10)
    fast = CompiledEnsemble(net, 48, 11, algorithm, [0], 10)
    for t_to in times:
        assert ref.advance(t_to) and fast.advance(t_to)
        assert_same(ref, fast)
    assert fast.reactions_fired > 0


def test_bounded_slices_and_checkpoint_move_between_engines():
    net = preset_network("00-decay-dimerization.yaml")
    ref = CpuEnsemble(net, 32, 5, "direct", [0], 10)
    ref.advance(0.01)
    fast = CompiledEnsemble(net, 32, 5, "direct", [0], 10)
    fast.advance(0.003, max_steps=7)             # some work that the checkpoint overwrites
    fast.restore(ref.state())
    while not fast.advance(0.02, max_steps=50):   # many short slices
        pass
    assert ref.advance(0.02)
    assert_same(ref, fast)
    back = CpuEnsemble(net, 32, 5, "direct", [0], 10)
    back.restore(fast.state())
    assert back.advance(0.03) and fast.advance(0.03)
    assert_same(back, fast)


def test_rate_change_between_slices_matches_reference():
    net = preset_network("00-decay-dimerization.yaml")
    ref, fast = (E(net, 16, 3, "direct", [0], 10) for E in (CpuEnsemble, CompiledEnsemble))
    for engine in (ref, fast):
        engine.advance(0.01)
        engine.set_rates(net.rates * np.array([2.0, 0.5, 1.0, 3.0]))
        engine.advance(0.02)
    assert_same(ref, fast)


def test_simulation_backend_names_pick_the_engines():
    cfg = config(BIRTH_DEATH, realizations=64, t_end=1.0)
    fast = SSASimulation.from_config(cfg, "cpu")
    ref = SSASimulation.from_config(cfg, "cpu-reference")
    assert isinstance(fast.engine, CompiledEnsemble) and isinstance(ref.engine, CpuEnsemble)
    for sim in (fast, ref):
        while not sim.finished:
            sim.advance()
    assert np.array_equal(fast.final, ref.final)
    assert fast.results()[1]["compile_seconds"] >= 0
