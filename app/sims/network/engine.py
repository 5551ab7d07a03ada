"""What both cultured-network engines provide, and the noise both draw.

Engine state in canonical form (the checkpoint; either engine resumes the other's):
``step``, ``V``, ``refrac``, ``gE``, ``gI``, ``hist`` (uint64: bit b = the neuron spiked at
step ``step-1-b``), ``counts`` (spikes since the last growth update), ``radius`` and the
synapses' Tsodyks-Markram state in canonical order (by target, then source): ``syn_pre``,
``syn_post``, ``syn_u``, ``syn_r``, ``syn_last``. Weights follow from the radii.
"""

from __future__ import annotations

import numpy as np

from app.compute import philox
from app.sims.common.engine import EngineBase

STATE_KEYS = ("step", "V", "refrac", "gE", "gI", "hist", "counts", "radius",
              "syn_pre", "syn_post", "syn_u", "syn_r", "syn_last")


def noise_block(seed: int, n: int, m0: int, k: int) -> np.ndarray:
    """Standard normals (k, n) for steps m0..m0+k-1: Box-Muller on the two float32 uniforms of
    Philox draw ``m >> 1`` of stream ``neuron`` (words 0,1 for even steps, 2,3 for odd)."""
    steps = np.arange(m0, m0 + k, dtype=np.uint64)
    pairs = np.unique(steps >> np.uint64(1))
    stream = np.tile(np.arange(n, dtype=np.uint64), pairs.size)
    draws = np.repeat(pairs, n)
    words = philox.draw(seed, stream, draws).reshape(4, pairs.size, n)
    row = (steps >> np.uint64(1)) - pairs[0]
    odd = (steps & np.uint64(1)).astype(bool)
    a = np.where(odd[:, None], words[2][row.astype(np.int64)], words[0][row.astype(np.int64)])
    b = np.where(odd[:, None], words[3][row.astype(np.int64)], words[1][row.astype(np.int64)])
    u1 = philox.to_unit_float32(a).astype(np.float64)
    u2 = philox.to_unit_float32(b).astype(np.float64)
    return np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * np.pi * u2)


class NetworkEngine(EngineBase, renamed={"get_state": "state", "set_state": "restore", "run": "advance"}):
    """Interface of the CPU and CUDA engines."""

    step: int
    n_synapses: int

    def advance(self, nsteps: int) -> tuple[np.ndarray, np.ndarray]:
        """Advance ``nsteps`` steps; return the spikes as (step, neuron) arrays, in step order
        (the CUDA engine: in chunk order, unsorted inside a chunk of ``min delay`` steps)."""
        raise NotImplementedError

    def grow(self, epoch_seconds: float) -> np.ndarray:
        """Growth update from the spike counts; resets the counts; returns the rates (Hz)."""
        raise NotImplementedError

    def radius(self) -> np.ndarray:
        raise NotImplementedError

    def connectivity(self):
        """The synapses now (:class:`app.sims.network.model.Connectivity`)."""
        raise NotImplementedError

    def state(self) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def restore(self, state: dict[str, np.ndarray]) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass
