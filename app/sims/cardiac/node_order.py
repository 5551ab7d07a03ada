"""The CUDA engine's internal node order and operator-row format. A tissue's nodes are stored on
the device in reverse Cuthill–McKee order of the mesh's neighbour graph, which brings each
node's neighbours close to it: where every neighbour lies within an int16 of its node in that
order, the padded operator row stores 16-bit offsets (``j = k + offset``) instead of 32-bit
indices, 6 B a slot instead of 8 with float32 weights. A mesh whose bandwidth is too large
keeps the file's order and 32-bit indices. The slots of a row stay as the mesh has them (the
same neighbours in the same order), so each row's sum is the same arithmetic, permuted.

Everything the host hands the device per node goes through :meth:`NodeOrder.to_device`, and
everything it reads back through :meth:`NodeOrder.to_file`: results and checkpoints are in the
file's order whatever the engine stores."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

OFFSET_MIN, OFFSET_MAX = np.iinfo(np.int16).min, np.iinfo(np.int16).max
HALF_NORMAL_MIN, HALF_MAX = 2.0 ** -14, 65504.0        # IEEE half precision's normal range


def row_weight_dtype(weights: np.ndarray, real) -> np.dtype:
    """How the device stores a run's operator weights (N, K): half precision for a float32 run
    whose rows each round to within 2^-11 of their largest weight (the largest below half's
    maximum, each row's largest in its normal range: a smaller weight may be subnormal); the
    N-version slab moves by 0.04 ms at most (scripts/cardiac/weights16_study.py). Otherwise the
    run's precision."""
    if np.dtype(real) != np.float32:
        return np.dtype(real)
    largest = np.abs(np.asarray(weights, float)).max(axis=-1)
    largest = largest[largest != 0]
    fits = largest.size == 0 or (largest.min() >= HALF_NORMAL_MIN and largest.max() < HALF_MAX / 2)
    return np.dtype(np.float16 if fits else np.float32)


@dataclass(frozen=True)
class NodeOrder:
    """``node[p]``: the file index of the node at device position p; ``position[i]``: the device
    position of file node i (its inverse); ``row16``: rows store int16 offsets."""

    node: np.ndarray
    position: np.ndarray
    row16: bool

    @classmethod
    def identity(cls, n: int) -> NodeOrder:
        index = np.arange(n, dtype=np.int64)
        return cls(index, index, False)

    @cached_property
    def is_identity(self) -> bool:
        return bool((self.node == np.arange(len(self.node))).all())

    def row_bytes_per_slot(self, weight_dtype=np.float32) -> int:
        """Bytes of one operator-row slot on the device (offset or index, weight)."""
        return (2 if self.row16 else 4) + np.dtype(weight_dtype).itemsize

    def to_device(self, values: np.ndarray) -> np.ndarray:
        """Per-node ``values`` (..., N) in file order, in device order."""
        return self._per_node(values)[..., self.node]

    def to_file(self, values: np.ndarray) -> np.ndarray:
        """Per-node ``values`` (..., N) in device order, in file order."""
        return self._per_node(values)[..., self.position]

    def _per_node(self, values: np.ndarray) -> np.ndarray:
        values = np.asarray(values)
        if values.shape[-1:] != (len(self.node),):
            raise ValueError(f"per-node values of shape {values.shape} for a tissue of {len(self.node)} nodes")
        return values

    def rows(self, neighbours: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The operator's padded rows (N, K) in device order, transposed to (K, N) as the
        kernels read them: int16 offsets (row16) or int32 indices, and the weights."""
        nbr = self.position[neighbours[self.node]]
        if self.row16:
            nbr = nbr - np.arange(len(self.node))[:, None]
        return nbr.T.astype(np.int16 if self.row16 else np.int32), np.asarray(weights)[self.node].T


def device_order(neighbours: np.ndarray) -> NodeOrder:
    """The order a tissue's nodes take on the device: reverse Cuthill–McKee of the graph of
    ``neighbours`` (N, K) (padding slots point at their own node) if every slot's offset then
    fits int16, else the file's order with int32 indices. A single cell: no order."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import reverse_cuthill_mckee

    n = len(neighbours)
    if n <= 1:
        return NodeOrder.identity(n)
    rows = np.repeat(np.arange(n), neighbours.shape[1])
    cols = neighbours.ravel().astype(np.int64)
    edge = rows != cols
    graph = csr_matrix((np.ones(int(edge.sum()), np.int8), (rows[edge], cols[edge])), shape=(n, n))
    node = reverse_cuthill_mckee(graph, symmetric_mode=False).astype(np.int64)
    position = np.empty(n, np.int64)
    position[node] = np.arange(n)
    offsets = position[neighbours[node]] - np.arange(n)[:, None]
    if offsets.min() < OFFSET_MIN or offsets.max() > OFFSET_MAX:
        return NodeOrder.identity(n)
    return NodeOrder(node, position, True)
