"""The CUDA engine's node order (reverse Cuthill–McKee, int16 row offsets) and its fallback."""

import numpy as np
import pytest

from app.sims.cardiac.fem import UNIT_TISSUE, operator_arrays
from app.sims.cardiac.node_order import OFFSET_MAX, NodeOrder, device_order
from app.sims.cardiac.shapes import sheet, ventricle_shell


def bandwidth(neighbours: np.ndarray) -> int:
    return int(np.abs(neighbours - np.arange(len(neighbours))[:, None]).max())


def check_rows(order: NodeOrder, neighbours: np.ndarray, weights: np.ndarray) -> None:
    """The device rows name each node's neighbours in the mesh's slot order, with its weights."""
    rows, w = order.rows(neighbours, weights)
    n = len(neighbours)
    index = rows.T.astype(np.int64) + (np.arange(n)[:, None] if order.row16 else 0)
    np.testing.assert_array_equal(order.node[index], neighbours[order.node])
    np.testing.assert_array_equal(w.T, weights[order.node])


def test_a_sheet_takes_a_permuted_order_with_int16_offsets():
    mesh = sheet(7, 3, 0.1)
    order = device_order(mesh.neighbours)
    assert order.row16 and not order.is_identity and order.row_bytes_per_slot() == 6
    np.testing.assert_array_equal(np.sort(order.node), np.arange(21))
    np.testing.assert_array_equal(order.position[order.node], np.arange(21))
    rows, _ = order.rows(mesh.neighbours, mesh.inv_d2)
    assert rows.dtype == np.int16 and rows.shape == (mesh.width, 21)
    padding = (mesh.inv_d2 == 0)[order.node].T
    assert (rows[padding] == 0).all()                   # a padding slot points at its own node
    check_rows(order, mesh.neighbours, mesh.inv_d2)
    v = np.random.default_rng(1).normal(size=(2, 21))
    np.testing.assert_array_equal(order.to_file(order.to_device(v)), v)
    with pytest.raises(ValueError, match="for a tissue of 21 nodes"):        # a checkpoint of another mesh
        order.to_device(np.zeros((2, 22)))
    # the operator applied in the device's order is the file's, permuted (the same sums)
    d = order.to_device(v[0])
    idx = rows.T.astype(np.int64) + np.arange(21)[:, None]
    lap = np.sum(order.to_device(mesh.inv_d2.T).T * (d[idx] - d[:, None]), axis=1)
    np.testing.assert_array_equal(order.to_file(lap), mesh.laplacian(v[0], 1.0))


def test_the_bench_shell_fits_int16_offsets_at_a_modest_size():
    """The benchmark's generator at 20,000 nodes (the quick bench): RCM's bandwidth is a few
    hundred, two orders of magnitude inside int16."""
    nbr, w = operator_arrays(ventricle_shell(20_000), UNIT_TISSUE)
    order = device_order(nbr)
    assert order.row16 and not order.is_identity
    assert bandwidth(order.position[nbr[order.node]]) < OFFSET_MAX // 10
    check_rows(order, nbr, w)


def test_long_edges_keep_the_file_order_and_int32_indices():
    """A ring of 200,000 nodes with a random chord at each (long edges everywhere: an expander,
    whose every order puts some chord's ends a sizeable fraction of the nodes apart; RCM's
    bandwidth here is about n / 4, 50,000): the offsets can't fit int16, so the engine keeps
    the file's order with int32 indices."""
    n = 200_000
    k = np.arange(n)
    chord = np.random.default_rng(7).permutation(n).reshape(-1, 2)
    partner = np.empty(n, np.int64)
    partner[chord[:, 0]], partner[chord[:, 1]] = chord[:, 1], chord[:, 0]
    neighbours = np.stack([(k + 1) % n, (k - 1) % n, partner], 1).astype(np.int32)
    weights = np.ones(neighbours.shape)
    order = device_order(neighbours)
    assert not order.row16 and order.is_identity and order.row_bytes_per_slot() == 8
    rows, w = order.rows(neighbours, weights)
    assert rows.dtype == np.int32
    np.testing.assert_array_equal(rows, neighbours.T)
    check_rows(order, neighbours, weights)


@pytest.mark.parametrize("n", [0, 1])
def test_no_order_without_a_tissue(n):
    order = device_order(np.zeros((n, 1), np.int32))
    assert order.is_identity and not order.row16


def test_a_float32_runs_weights_go_to_the_device_in_half_precision_where_each_row_keeps_2_11():
    """float32: half precision when every row's largest weight is in half's normal range (its
    smaller weights may be subnormal: their error stays under 2^-11 of the row's largest) and
    below half its maximum; float32 otherwise; other precisions keep theirs."""
    from app.sims.cardiac.node_order import row_weight_dtype
    w = np.array([[25.0, 25.0, 1e-6, 0.0], [0.0, 0.0, 0.0, 0.0], [3e-4, 1e-7, 0.0, 0.0]])
    assert row_weight_dtype(w, np.float32) == np.float16
    assert row_weight_dtype(w, np.float64) == np.float64
    assert row_weight_dtype(np.array([[1e-5, 1e-6]]), np.float32) == np.float32       # a row all below 2^-14
    assert row_weight_dtype(np.array([[4e4, 1.0]]), np.float32) == np.float32         # too close to 65504
    rounded = w.astype(np.float16).astype(float)
    assert np.all(np.abs(rounded - w) <= 2.0 ** -11 * np.abs(w).max(axis=1, keepdims=True))
