"""The L2 access-policy window: the driver calls and the struct they pass (a stand-in driver;
the GPU runs are in ``scripts/cardiac/split_breakdown.py --l2``)."""

import ctypes
from types import SimpleNamespace

import pytest

from app.compute import l2_cache

MiB = 2**20


class Driver:
    """``libcuda``'s five calls: device attributes as given, the limit rounded down to whole
    MiB as a driver may, and what was asked of it kept."""

    def __init__(self, max_persisting: int, max_window: int, fail: str = ""):
        self.attributes = {l2_cache.ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE: max_persisting,
                           l2_cache.ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE: max_window}
        self.limit, self.windows, self.resets, self.fail = None, [], 0, fail

    def cuCtxGetDevice(self, device):
        device._obj.value = 0
        return 0

    def cuDeviceGetAttribute(self, value, attribute, device):
        value._obj.value = self.attributes[attribute]
        return 0

    def cuCtxSetLimit(self, limit, size):
        assert limit == l2_cache.LIMIT_PERSISTING_L2_CACHE_SIZE
        self.limit = size.value // MiB * MiB
        return 0

    def cuCtxGetLimit(self, size, limit):
        size._obj.value = self.limit
        return 0

    def cuStreamSetAttribute(self, handle, attribute, value):
        assert attribute == l2_cache.STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW
        w = value._obj.window
        self.windows.append((handle.value, w.base_ptr, w.num_bytes, w.hit_ratio, w.hit_prop, w.miss_prop))
        return 1 if self.fail == "stream" else 0

    def cuCtxResetPersistingL2Cache(self):
        self.resets += 1
        return 0


@pytest.fixture
def driver(monkeypatch):
    def install(*args, **kwargs):
        fake = Driver(*args, **kwargs)
        monkeypatch.setattr(l2_cache, "_driver", lambda: fake)
        return fake
    return install


def test_the_window_struct_has_cuda_h_layout():
    # CUaccessPolicyWindow: void*, size_t, float, two enums; inside a 64-byte attribute union
    assert [getattr(l2_cache._Window, f).offset for f in ("base_ptr", "num_bytes", "hit_ratio", "hit_prop",
                                                           "miss_prop")] == [0, 8, 16, 20, 24]
    assert ctypes.sizeof(l2_cache._StreamAttribute) == 64


def test_a_range_larger_than_the_set_aside_persists_in_the_fraction_that_fits(driver):
    fake = driver(max_persisting=int(37.5 * MiB), max_window=128 * MiB)
    stream = SimpleNamespace(handle=7)
    granted = l2_cache.persist_in_l2(stream, 0x1000, 60 * MiB)
    assert granted == 37 * MiB == fake.limit
    handle, base, nbytes, ratio, hit, miss = fake.windows[-1]
    assert (handle, base, nbytes) == (7, 0x1000, 60 * MiB)
    assert ratio == pytest.approx(37 / 60, rel=1e-6)
    assert (hit, miss) == (l2_cache.ACCESS_PERSISTING, l2_cache.ACCESS_STREAMING)


def test_a_small_range_persists_whole_and_the_window_is_capped(driver):
    fake = driver(max_persisting=40 * MiB, max_window=16 * MiB)
    assert l2_cache.persist_in_l2(SimpleNamespace(handle=1), 0x2000, 20 * MiB) == 16 * MiB
    assert fake.windows[-1][2:4] == (16 * MiB, 1.0)
    assert l2_cache.persist_in_l2(SimpleNamespace(handle=1), 0x2000, 3 * MiB) == 3 * MiB


def test_nothing_is_set_aside_without_a_device_stream_or_when_the_driver_refuses(driver, monkeypatch):
    fake = driver(max_persisting=0, max_window=128 * MiB)
    assert l2_cache.persist_in_l2(SimpleNamespace(handle=1), 0x1000, 10 * MiB) == 0
    assert fake.windows == []
    assert l2_cache.persist_in_l2(SimpleNamespace(synchronize=lambda: None), 0x1000, 10 * MiB) == 0
    driver(max_persisting=10 * MiB, max_window=10 * MiB, fail="stream")
    assert l2_cache.persist_in_l2(SimpleNamespace(handle=1), 0x1000, 10 * MiB) == 0
    monkeypatch.setattr(l2_cache, "_driver", lambda: None)
    assert l2_cache.persist_in_l2(SimpleNamespace(handle=1), 0x1000, 10 * MiB) == 0


def test_release_clears_the_window_and_the_set_aside(driver):
    fake = driver(max_persisting=8 * MiB, max_window=8 * MiB)
    stream = SimpleNamespace(handle=3)
    l2_cache.persist_in_l2(stream, 0x1000, 8 * MiB)
    l2_cache.release_l2(stream)
    assert fake.windows[-1][2] == 0 and fake.resets == 1 and fake.limit == 0
