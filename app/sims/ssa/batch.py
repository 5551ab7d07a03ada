"""Many SSA runs that differ only in rates, initial counts and seed, in one CUDA launch per
sample time (the sweep runner's batching; see :class:`app.sims.ssa.cuda.CudaBatch`).

Each point keeps its own :class:`SSASimulation` (the same statistics, frames and results as a
run of its own, bit for bit: same Philox key and realization counters); only the engine is
shared. The batch's wall time is every point's ``wall_seconds``.
"""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any, Sequence

import numpy as np

from app.sims.common.config import to_plain
from app.sims.ssa.config import SSAConfig

MAX_BATCH_REALIZATIONS = 1 << 24     # ~100 MB of counts and draw counters for a few species


def batch_key(cfg: SSAConfig) -> tuple:
    """Configs with equal keys can share one launch (rates, initial counts and seed may differ)."""
    net = cfg.network()
    ens = json.dumps(to_plain(dataclasses.replace(cfg.ensemble, seed=0)), sort_keys=True)
    return (ens, net.structure_key(), tuple(cfg.histogram_indices(net)))


def group(configs: Sequence[SSAConfig], parts: int = 1) -> list[list[int]]:
    """Indices of ``configs`` in batches that one launch can run (order kept within a batch),
    each set of compatible points cut into at least ``parts`` batches (one per worker)."""
    groups: dict[tuple, list[int]] = {}
    for i, cfg in enumerate(configs):
        groups.setdefault(batch_key(cfg), []).append(i)
    out = []
    for members in groups.values():
        per = max(1, min(MAX_BATCH_REALIZATIONS // configs[members[0]].ensemble.realizations,
                         -(-len(members) // max(1, parts))))
        if configs[members[0]].ensemble.realizations % 32:
            per = 1                     # a batch needs warps that belong to one point
        out += [members[i:i + per] for i in range(0, len(members), per)]
    return out


def run(configs: Sequence[SSAConfig]) -> list[tuple[dict[str, np.ndarray], dict[str, Any]]]:
    """Run a batch from :func:`group` on the current CUDA context; (arrays, summary) per point."""
    from app.sims.ssa.cuda import CudaBatch, CudaEnsemble
    from app.sims.ssa.simulation import SSASimulation

    first = configs[0]
    ens = first.ensemble
    nets = [cfg.network() for cfg in configs]
    hist_idx = first.histogram_indices(nets[0])
    start = time.perf_counter()
    batch = CudaBatch(nets, ens.realizations, [c.ensemble.seed for c in configs], ens.algorithm,
                      hist_idx, ens.histogram_bins, epsilon=ens.epsilon)
    try:
        sims = [SSASimulation(cfg, "cuda", engine=CudaEnsemble(net, ens.realizations, cfg.ensemble.seed,
                                                               ens.algorithm, hist_idx, ens.histogram_bins,
                                                               batch=batch, point=p))
                for p, (cfg, net) in enumerate(zip(configs, nets))]
        while not sims[0].finished:
            for sim in sims:            # the first advances the whole batch; the rest read it
                sim.advance()
        wall = time.perf_counter() - start
        out = []
        for sim in sims:
            sim.wall = wall
            arrays, summary = sim.results()
            summary["batch_points"] = len(configs)
            out.append((arrays, summary))
        return out
    finally:
        batch.close()
