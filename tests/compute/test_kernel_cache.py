"""The on-disk kernel cache: a second compile is a cache hit; bad entries are never loaded."""

import pytest

from app.cli import main
from app.compute import compilers, kernel_cache
from app.compute.kernels import STATS, compile_image

pytestmark = pytest.mark.skipif(not compilers.available(), reason="no CUDA compiler here")

SOURCE = 'extern "C" __global__ void k(float* x) { x[threadIdx.x] *= SCALE; }\n'


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("BIOGPU_CACHE_DIR", str(tmp_path / "kernels"))
    return tmp_path / "kernels"


def _compile(scale=2):
    return compile_image(SOURCE, "k.cu", {"SCALE": scale}, 90)


def test_second_compile_comes_from_the_cache(cache):
    before = (STATS.compiled, STATS.from_cache)
    first = _compile()
    second = _compile()
    assert second == first
    assert (STATS.compiled - before[0], STATS.from_cache - before[1]) == (1, 1)
    assert len(list(cache.glob("*.bin"))) == 1
    _compile(scale=3)                                   # other options, other entry
    assert len(list(cache.glob("*.bin"))) == 2


@pytest.mark.parametrize("damage", ["truncate", "flip", "foreign", "garbage"])
def test_a_damaged_entry_is_compiled_again(cache, damage):
    good = _compile()
    (entry,) = cache.glob("*.bin")
    blob = entry.read_bytes()
    if damage == "truncate":
        entry.write_bytes(blob[: len(blob) // 2])
    elif damage == "flip":
        entry.write_bytes(blob[:-10] + bytes(b ^ 0xFF for b in blob[-10:]))
    elif damage == "foreign":                            # another module's valid file under this key
        _compile(scale=5)
        other = next(p for p in cache.glob("*.bin") if p != entry)
        entry.write_bytes(other.read_bytes())
    else:
        entry.write_bytes(b"\x00" * 64)
    compiled = STATS.compiled
    assert _compile() == good
    assert STATS.compiled == compiled + 1
    assert kernel_cache.load(entry.stem) == good        # rewritten, valid again


def test_cli_cache_info_and_clear(cache, capsys):
    _compile()
    assert main(["cache"]) == 0
    assert "1 compiled kernels" in capsys.readouterr().out
    assert main(["cache", "clear"]) == 0
    assert "removed 1 compiled kernels" in capsys.readouterr().out
    assert not list(cache.glob("*.bin"))
