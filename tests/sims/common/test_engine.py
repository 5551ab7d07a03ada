"""One engine surface: every domain's engines implement the Engine protocol, old method names
are refused, and algorithm names dispatch through tables (an unknown one is an error)."""

import numpy as np
import pytest

from app.sims.common.engine import (ENGINE_PREFIX, Engine, EngineBase, choose, config_from_state,
                                    config_state, engine_part, engine_state)
from app.sims.common.registry import DOMAINS
from app.sims.common.simulation import default_preset, load_run_config

PROTOCOL = ("advance", "state", "restore", "close")


@pytest.mark.parametrize("name", list(DOMAINS))
def test_every_engine_implements_the_protocol(name):
    for backend, path in DOMAINS[name].engines.items():
        cls = DOMAINS[name].engine_class(backend)
        missing = [m for m in PROTOCOL if not callable(getattr(cls, m, None))]
        assert not missing, f"{path} lacks {missing}"
        assert isinstance(getattr(cls, "compile_seconds", None), float) or issubclass(cls, EngineBase), path


def test_a_subclass_with_an_old_method_name_is_refused():
    class Base(EngineBase, renamed={"run": "advance"}):
        def advance(self, steps):
            return steps

    with pytest.raises(TypeError, match="defines run\\(\\); the Engine protocol calls it advance\\(\\)"):
        class Stale(Base):          # written before the rename: would be bypassed silently
            def run(self, steps):
                return 2 * steps


def test_unknown_ssa_algorithm_is_an_error_on_every_engine():
    from app.sims.ssa.codegen import kernel_source
    from app.sims.ssa.compiled import CompiledEnsemble
    from app.sims.ssa.cpu import CpuEnsemble

    _, cfg = load_run_config(default_preset("ssa"))
    net = cfg.network()
    for make in (lambda: CpuEnsemble(net, 4, 1, "first-reaction", [0], 8),
                 lambda: CompiledEnsemble(net, 4, 1, "first-reaction", [0], 8),
                 lambda: kernel_source(net, [0], "first-reaction")):
        with pytest.raises(ValueError, match="unknown SSA algorithm 'first-reaction'; valid: direct, logdirect"):
            make()


def test_both_ssa_algorithms_pick_the_same_reactions():
    """The tables really switch the selection: on the same draws the linear and the binary search
    pick the same reactions, so the two algorithms give identical ensembles."""
    from app.sims.ssa.cpu import CpuEnsemble

    _, cfg = load_run_config(default_preset("ssa"))
    net = cfg.network()
    runs = [CpuEnsemble(net, 16, 5, algorithm, [0], 8) for algorithm in ("direct", "logdirect")]
    for engine in runs:
        engine.advance(cfg.ensemble.t_end, 200)          # 200 reactions in every realization
    assert runs[0].search is not runs[1].search
    np.testing.assert_array_equal(runs[0].states(), runs[1].states())


def test_checkpoint_helpers_round_trip():
    _, cfg = load_run_config(default_preset("ssa"))
    from app.sims.ssa.config import load_config

    assert config_from_state(config_state(cfg), load_config) == cfg

    class Tiny(EngineBase):
        def __init__(self):
            self.x = np.arange(3)

        def advance(self):
            self.x += 1

        def state(self):
            return {"x": self.x.copy()}

        def restore(self, state):
            self.x = np.array(state["x"])

        def close(self):
            pass

    engine = Tiny()
    saved = {**engine_state(engine), "other": np.zeros(1)}
    assert list(saved) == [ENGINE_PREFIX + "x", "other"]
    engine.advance()
    engine.restore(engine_part(saved))
    np.testing.assert_array_equal(engine.x, [0, 1, 2])
    assert isinstance(engine, Engine)
    with pytest.raises(ValueError, match="unknown solver 'rk9'; valid: a, b"):
        choose({"a": 1, "b": 2}, "rk9", "solver")
