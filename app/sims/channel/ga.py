"""Genetic-algorithm operators (Ben-Shalom et al. 2012) on Philox streams, in NumPy.

``kernels/channel.cu`` draws the same words for the same decisions, so given one population
and one set of scores both engines pick the same parents, crossover points and mutated genes
(the mutated values differ only by float32 rounding).

Per generation ``g`` and pair ``j`` (children 2j and 2j+1), stream ``GA_STREAM + j`` and draws
``g*K + d`` with K = 2 + P:
    d = 0      four tournament picks (two pairs; the better of each pair is a parent)
    d = 1      word 0: crossover if below the threshold; word 1: the cut point 1..P-1
    d = 2 + t//2, t = child*P + gene: words 2(t%2) and 2(t%2)+1: mutate?, new value
Slot 0 keeps the best individual unchanged (elitism).

A mutation redraws the gene uniformly in its range (the paper's operator). Optionally a
fraction ``creep_fraction`` of mutations (the lowest part of the same decision word's range)
instead multiplies the gene by 1 + creep*(2u - 1), clipped to the range: a local search step
like the late-generation mutation of Gurkiewicz & Korngreen (2007).
"""

from __future__ import annotations

import numpy as np

from app.compute import philox
from app.sims.common.progress import SetupProgress

GA_STREAM = 1 << 32
INIT_STREAM = 2 << 32
INIT_BLOCK = 1 << 16    # individuals drawn at once (bounds the temporaries; progress between)


def threshold(probability: float) -> int:
    """Integer threshold t with P(word < t) = probability for a uniform 32-bit word."""
    return int(round(min(max(probability, 0.0), 1.0) * 2**32))


def pick(words: np.ndarray, n: int) -> np.ndarray:
    """Uniform index in [0, n) from 32-bit words: (w * n) >> 32."""
    return ((words.astype(np.uint64) * np.uint64(n)) >> np.uint64(32)).astype(np.int64)


def draws_per_pair(n_params: int) -> int:
    return 2 + n_params


def initial_population(seed: int, size: int, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """Individuals uniform in their ranges: gene p of individual i is word p%4 of draw p//4
    (drawn in blocks of individuals, with a progress line for millions of them)."""
    n_params = len(lower)
    genes = np.empty((size, n_params))
    report = SetupProgress(f"drawing {size:,} initial individuals", size)
    for lo in range(0, size, INIT_BLOCK):
        hi = min(size, lo + INIT_BLOCK)
        streams = np.uint64(INIT_STREAM) + np.arange(lo, hi, dtype=np.uint64)
        for d in range((n_params + 3) // 4):
            words = philox.draw(seed, streams, d)
            for w in range(4):
                p = 4 * d + w
                if p < n_params:
                    genes[lo:hi, p] = lower[p] + philox.to_unit_float64(words[w]) * (upper[p] - lower[p])
        report(hi)
    return genes


def breed(population: np.ndarray, scores: np.ndarray, best: int, generation: int, seed: int,
          lower: np.ndarray, upper: np.ndarray, crossover: float, mutation: float,
          creep: float = 0.0, creep_fraction: float = 0.0) -> np.ndarray:
    """The next population from ``population`` (N, P) with ``scores`` (N,) (lower is better)."""
    size, n_params = population.shape
    pairs = (size + 1) // 2
    k = draws_per_pair(n_params)
    streams = np.repeat(np.uint64(GA_STREAM) + np.arange(pairs, dtype=np.uint64), k)
    counters = np.tile(np.uint64(generation * k) + np.arange(k, dtype=np.uint64), pairs)
    words = philox.draw(seed, streams, counters).reshape(4, pairs, k)
    a, b, c, d = (pick(words[i, :, 0], size) for i in range(4))
    first = np.where(scores[a] <= scores[b], a, b)
    second = np.where(scores[c] <= scores[d], c, d)
    cross = words[0, :, 1].astype(np.uint64) < np.uint64(threshold(crossover))
    point = 1 + pick(words[1, :, 1], max(n_params - 1, 1))
    keep = (np.arange(n_params)[None, :] < point[:, None]) | ~cross[:, None]
    children = np.stack([np.where(keep, population[first], population[second]),
                         np.where(keep, population[second], population[first])], axis=1)
    limit = np.uint64(threshold(mutation))
    creep_limit = np.uint64(threshold(mutation * creep_fraction))
    for t in range(2 * n_params):
        child, gene = divmod(t, n_params)
        w = words[:, :, 2 + t // 2]
        decision = w[2 * (t % 2)].astype(np.uint64)
        u = philox.to_unit_float64(w[2 * (t % 2) + 1])
        old = children[:, child, gene]
        value = np.where(decision < creep_limit,
                         np.clip(old * (1.0 + creep * (2.0 * u - 1.0)), lower[gene], upper[gene]),
                         lower[gene] + u * (upper[gene] - lower[gene]))
        children[:, child, gene] = np.where(decision < limit, value, old)
    new = children.reshape(2 * pairs, n_params)[:size]
    new[0] = population[best]
    return new
