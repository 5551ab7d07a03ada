"""Keeping an array that every kernel of a step rereads in the GPU's L2 cache.

A stream's *access policy window* marks loads from one address range as persisting: lines
loaded from it stay in a part of L2 set aside for them while other kernels stream through the
rest (CUDA programming guide, "L2 cache access management"). pycuda does not wrap the calls, so
they go to the driver (``libcuda``) through ctypes.
"""

from __future__ import annotations

import ctypes
import functools

LIMIT_PERSISTING_L2_CACHE_SIZE = 0x06           # CUlimit
ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE = 108     # CUdevice_attribute
ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE = 109
STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW = 1
ACCESS_STREAMING, ACCESS_PERSISTING = 1, 2       # CUaccessProperty


class _Window(ctypes.Structure):
    _fields_ = [("base_ptr", ctypes.c_void_p), ("num_bytes", ctypes.c_size_t), ("hit_ratio", ctypes.c_float),
                ("hit_prop", ctypes.c_int), ("miss_prop", ctypes.c_int)]


class _StreamAttribute(ctypes.Union):
    _fields_ = [("pad", ctypes.c_char * 64), ("window", _Window)]     # CUlaunchAttributeValue


@functools.lru_cache(maxsize=1)
def _driver() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None


def _device_attribute(lib: ctypes.CDLL, attribute: int) -> int:
    device, value = ctypes.c_int(), ctypes.c_int()
    if lib.cuCtxGetDevice(ctypes.byref(device)) or lib.cuDeviceGetAttribute(ctypes.byref(value), attribute, device):
        return 0
    return value.value


def _set_window(lib: ctypes.CDLL, handle: int, base: int, nbytes: int, hit_ratio: float) -> bool:
    value = _StreamAttribute()
    value.window = _Window(base, nbytes, hit_ratio, ACCESS_PERSISTING, ACCESS_STREAMING)
    return lib.cuStreamSetAttribute(ctypes.c_void_p(handle), STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW,
                                    ctypes.byref(value)) == 0


def persist_in_l2(stream, base: int, nbytes: int) -> int:
    """Mark ``nbytes`` from device address ``base`` as persisting in L2 for the kernels on
    ``stream`` (a pycuda ``Stream``), setting aside as much L2 as the device allows, up to
    ``nbytes``; when the range is larger, that fraction of its lines persists and the rest
    streams. Returns the bytes set aside: 0 where the device, the driver or a stand-in stream
    offers none (the kernels then run as before)."""
    handle, lib = getattr(stream, "handle", None), _driver()
    if handle is None or lib is None or nbytes <= 0:
        return 0
    window = min(nbytes, _device_attribute(lib, ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE))
    wanted = min(window, _device_attribute(lib, ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE))
    if wanted <= 0 or lib.cuCtxSetLimit(LIMIT_PERSISTING_L2_CACHE_SIZE, ctypes.c_size_t(wanted)):
        return 0
    granted = ctypes.c_size_t()
    if lib.cuCtxGetLimit(ctypes.byref(granted), LIMIT_PERSISTING_L2_CACHE_SIZE) or not granted.value:
        return 0
    # more persisting lines than the set-aside holds would evict each other
    if not _set_window(lib, handle, base, window, min(1.0, granted.value / window)):
        lib.cuCtxSetLimit(LIMIT_PERSISTING_L2_CACHE_SIZE, ctypes.c_size_t(0))
        return 0
    return int(granted.value)


def release_l2(stream) -> None:
    """Undo :func:`persist_in_l2`: no window on ``stream``, the persisting lines back to normal
    and nothing set aside."""
    handle, lib = getattr(stream, "handle", None), _driver()
    if handle is None or lib is None:
        return
    _set_window(lib, handle, 0, 0, 0.0)
    lib.cuCtxResetPersistingL2Cache()
    lib.cuCtxSetLimit(LIMIT_PERSISTING_L2_CACHE_SIZE, ctypes.c_size_t(0))
