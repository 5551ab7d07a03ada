"""Batches of SSA points in one launch: grouping (CPU) and bit-identity with lone runs (GPU)."""

from dataclasses import replace

import numpy as np
import pytest

from app.sims.ssa.batch import MAX_BATCH_REALIZATIONS, batch_key, group

from .helpers import BIRTH_DEATH, DECAY, config


def _with(cfg, *, rates=None, x0=None, seed=None, **ensemble):
    model = cfg.model
    if rates is not None:
        model = replace(model, parameters={**model.parameters, **rates})
    if x0 is not None:
        model = replace(model, species={**model.species, **x0})
    ens = replace(cfg.ensemble, **({"seed": seed} if seed is not None else {}), **ensemble)
    return replace(cfg, model=model, ensemble=ens)


def test_points_that_differ_in_rates_counts_and_seed_share_a_batch():
    base = config(BIRTH_DEATH, realizations=64)
    cfgs = [base, _with(base, rates={"k": 3.0}), _with(base, x0={"X": 7}, seed=9),
            config(DECAY, realizations=64),                      # another network
            _with(base, samples=9),                              # other sample times
            _with(base, rates={"g": 0.5})]
    assert batch_key(cfgs[0]) == batch_key(cfgs[1]) == batch_key(cfgs[2])
    assert sorted(map(sorted, group(cfgs))) == [[0, 1, 2, 5], [3], [4]]


def test_batches_are_cut_to_the_device_budget_and_need_whole_warps():
    base = config(BIRTH_DEATH, realizations=1 << 20)
    per = MAX_BATCH_REALIZATIONS // (1 << 20)
    assert [len(g) for g in group([base] * (per + 3))] == [per, 3]
    odd = config(BIRTH_DEATH, realizations=100)
    assert [len(g) for g in group([odd] * 3)] == [1, 1, 1]
    small = config(BIRTH_DEATH, realizations=64)
    assert [len(g) for g in group([small] * 9, parts=2)] == [5, 4]     # one batch per worker


@pytest.mark.gpu
@pytest.mark.usefixtures("cuda_context")
def test_a_point_of_a_batch_is_bit_identical_to_its_lone_run():
    from app.sims.ssa import batch
    from app.sims.ssa.simulation import SSASimulation

    base = config(BIRTH_DEATH, realizations=256, samples=6)
    cfgs = [_with(base, rates={"k": k}, seed=s, x0={"X": x}) for k, s, x in
            [(10.0, 1, 0), (2.5, 2, 5), (40.0, 3, 30), (10.0, 4, 0)]]
    batched = batch.run(cfgs)
    for cfg, (arrays, summary) in zip(cfgs, batched):
        lone = SSASimulation(cfg, "cuda")
        while not lone.finished:
            lone.advance()
        ref, ref_summary = lone.results()
        lone.close()
        for key in ("mean", "std", "final", "hist_lo", "hist_width", "hist_counts"):
            assert np.array_equal(arrays[key], ref[key]), key
        assert summary["reactions_fired"] == ref_summary["reactions_fired"] > 0
        assert summary["batch_points"] == 4
    means = [a["mean"][-1, 0] for a, _ in batched]
    assert means[2] > means[0] > means[1]                 # each point ran its own rates
