"""The GA operators of :mod:`ga` compiled (numba), pairs of children spread over all cores
(:func:`app.compute.cpu_threads.in_threads`).

The same Philox words make the same decisions as :func:`ga.breed` (tournaments, crossover
point, which genes mutate, creep or uniform redraw) and every new gene is the same float64
expression, so the next population equals the NumPy operators' bit for bit (tested).
"""

from __future__ import annotations

import numpy as np
from numba import njit, uint64

from app.compute.cpu_threads import in_threads
from app.compute.jit import CACHE
from app.compute.philox_numba import philox_words, unit_float64
from app.sims.channel.ga import GA_STREAM, threshold


@njit(inline="always", cache=CACHE)
def _pick(word, n):
    """Uniform index in [0, n) from a 32-bit word, as :func:`ga.pick`."""
    return np.int64((uint64(word) * uint64(n)) >> uint64(32))


@njit(inline="always", cache=CACHE, error_model="numpy")
def _mutate(old, decision, u, limit, creep_limit, creep, lower, upper):
    if uint64(decision) >= limit:
        return old
    if uint64(decision) < creep_limit:
        return min(max(old * (1.0 + creep * (2.0 * u - 1.0)), lower), upper)
    return lower + u * (upper - lower)


@njit(nogil=True, cache=CACHE, error_model="numpy")
def _breed_pairs(population, scores, first_pair, last_pair, generation, key_lo, key_hi, lower, upper,
                 cross_limit, limit, creep_limit, creep, out):
    """Children 2j and 2j + 1 of pairs j = first_pair .. last_pair - 1 into ``out``."""
    size, n_params = population.shape
    draws = 2 + n_params
    for j in range(first_pair, last_pair):
        stream = uint64(GA_STREAM) + uint64(j)
        base = uint64(generation) * uint64(draws)
        a, b, c, d = philox_words(key_lo, key_hi, base, stream)
        a, b, c, d = _pick(a, size), _pick(b, size), _pick(c, size), _pick(d, size)
        first = a if scores[a] <= scores[b] else b
        second = c if scores[c] <= scores[d] else d
        w0, w1, _, _ = philox_words(key_lo, key_hi, base + uint64(1), stream)
        cross = uint64(w0) < cross_limit
        point = 1 + _pick(w1, max(n_params - 1, 1))
        for t in range(2 * n_params):
            child, gene = t // n_params, t % n_params
            row = 2 * j + child
            if row >= size:          # an odd population: the last pair's second child is dropped
                break
            keep = gene < point or not cross
            parent = first if keep == (child == 0) else second
            words = philox_words(key_lo, key_hi, base + uint64(2 + t // 2), stream)
            decision, u = (words[0], words[1]) if t % 2 == 0 else (words[2], words[3])
            out[row, gene] = _mutate(population[parent, gene], decision, unit_float64(u), limit,
                                     creep_limit, creep, lower[gene], upper[gene])


def breed(population: np.ndarray, scores: np.ndarray, best: int, generation: int, seed: int,
          lower: np.ndarray, upper: np.ndarray, crossover: float, mutation: float,
          creep: float = 0.0, creep_fraction: float = 0.0) -> np.ndarray:
    """The next population, as :func:`ga.breed` (same arguments, same result)."""
    seed = int(seed) & 0xFFFFFFFFFFFFFFFF
    population = np.ascontiguousarray(population, np.float64)
    out = np.empty_like(population)
    scores = np.ascontiguousarray(scores, np.float64)
    lower, upper = np.asarray(lower, np.float64), np.asarray(upper, np.float64)
    limits = (np.uint64(threshold(crossover)), np.uint64(threshold(mutation)),
              np.uint64(threshold(mutation * creep_fraction)))

    def run(first: int, last: int) -> None:
        _breed_pairs(population, scores, first, last, int(generation), np.uint64(seed & 0xFFFFFFFF),
                     np.uint64(seed >> 32), lower, upper, *limits, float(creep), out)

    in_threads(run, 0, (len(population) + 1) // 2)
    out[0] = population[best]
    return out


def warm_up(n_params: int) -> None:
    """Compile (or load from the on-disk cache) the operators."""
    population = np.zeros((3, n_params))
    breed(population, np.zeros(3), 0, 0, 1, np.zeros(n_params), np.ones(n_params), 0.5, 0.5, 0.1, 0.5)
