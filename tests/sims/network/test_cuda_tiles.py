"""net_run's tile plan (host side: no GPU needed)."""

import numpy as np
import pytest

from app.sims.network.cuda import (LANES, RUN_MAX_SHARED, RUN_MAX_THREADS, SYNAPSE_SHARED_BYTES, TilePlan, run_kernel,
                                   tile_plan)
from app.sims.network.model import connectivity


@pytest.mark.parametrize("width, height, radius, multiprocessors", [
    (100, 100, 2.001, 132), (100, 100, 2.001, 114), (13, 11, 2.3, 12), (10, 10, 0.4, 132),
    (37, 5, 1.7, 16), (120, 120, 3.2, 132),
])
def test_tiles_cover_the_culture_with_one_resident_block_each(width, height, radius, multiprocessors):
    plan = tile_plan(width, height, radius, multiprocessors)
    assert plan is not None
    assert plan.blocks <= multiprocessors
    assert plan.tiles_x * plan.tile_w >= width
    assert plan.blocks // plan.tiles_x * plan.tile_h >= height
    assert plan.threads <= RUN_MAX_THREADS and plan.threads % 32 == 0
    assert plan.threads >= plan.tile_w * plan.tile_h * LANES
    assert plan.shared_bytes <= RUN_MAX_SHARED


@pytest.mark.parametrize("radius", [0.6, 1.0, 1.5, 2.0, 2.001, 2.6])
def test_every_synapse_lies_within_the_halo(radius):
    """A source further than the halo from its target's tile would be read from stale shared
    memory: the halo must cover the longest synapse along x and along y."""
    width = height = 30
    rng = np.random.default_rng(1)
    radii = rng.uniform(0.0, radius, width * height)
    radii[0] = radius
    conn = connectivity(width, height, radii, np.zeros(width * height, bool), 1.0)
    plan = tile_plan(width, height, radii.max(), 132)
    dx = np.abs(conn.pre % width - conn.post % width)
    dy = np.abs(conn.pre // width - conn.post // width)
    assert conn.size > 0
    assert max(dx.max(), dy.max()) <= plan.halo


def test_cultures_too_large_for_resident_blocks_have_no_plan():
    assert tile_plan(1000, 1000, 2.001, 132) is None


@pytest.mark.parametrize("radius", [1.0, 1.5, 2.0, 2.001])
def test_the_halo_is_no_wider_than_the_longest_synapse(radius):
    """With every radius equal, some synapse spans the whole halo: polling a wider one would
    only cost time."""
    width = height = 20
    radii = np.full(width * height, radius)
    conn = connectivity(width, height, radii, np.zeros(width * height, bool), 1.0)
    reach = max(np.abs(conn.pre % width - conn.post % width).max(),
                np.abs(conn.pre // width - conn.post // width).max())
    assert tile_plan(width, height, radius, 132).halo == reach


@pytest.mark.parametrize("tile_w, tile_h", [(8, 10), (1, 1), (11, 11), (4, 4), (16, 8)])
def test_a_warps_synapse_slots_fall_in_distinct_banks(tile_w, tile_h):
    """Slot k of tile neuron g is at k * stride + g in shared memory; the LANES lanes of the
    32 / LANES neurons of a warp read slots lane, lane + LANES, ... at once."""
    plan = TilePlan(tile_w, tile_h, 1, 1, 1)
    stride = plan.synapse_stride
    assert stride >= tile_w * tile_h
    for first in range(0, tile_w * tile_h, 32 // LANES):
        for row in range(3):
            banks = {((row * LANES + lane) * stride + first + g) % 32
                     for g in range(32 // LANES) for lane in range(LANES)}
            assert len(banks) == 32


def test_the_equilibrium_cultures_synapse_rows_fit_a_blocks_shared_memory():
    """100x100 at radius 2.001 (at most 48 synapses a neuron here): halo and rows within the
    227 KB an H100 or H200 block may opt in to; rows four times as wide do not (the culture then
    runs chunk by chunk)."""
    width = height = 100
    radii = np.full(width * height, 2.001)
    conn = connectivity(width, height, radii, np.zeros(width * height, bool), 1.0)
    slots = int(np.bincount(conn.post, minlength=width * height).max())
    plan = tile_plan(width, height, 2.001, 132)
    assert plan.run_shared_bytes(slots) == plan.shared_bytes + plan.synapse_stride * slots * SYNAPSE_SHARED_BYTES
    assert plan.run_shared_bytes(slots) <= 227 * 1024 < plan.run_shared_bytes(4 * slots)


def test_the_benchmark_culture_gets_the_narrow_kernel():
    plan = tile_plan(100, 100, 2.001, 132)             # 8 x 10 neurons x 8 lanes
    assert plan.threads == 640 and run_kernel(plan.threads) == "net_run_narrow"
    assert run_kernel(RUN_MAX_THREADS) == "net_run"
