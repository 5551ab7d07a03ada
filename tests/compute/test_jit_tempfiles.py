"""Generated modules and the kernel cache never write through a link nor delete what is not
theirs: a link planted at any name a run could use (the module, every temporary name a pid
could give) leaves its target untouched; ``cache clear`` removes only files with our header,
in the cache folder itself (a user's ``*.bin``, links, folders and look-alikes stay)."""

from __future__ import annotations

import hashlib
import os
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.compute import jit, kernel_cache
from app.compute.compilers import Image


def _name(source: str) -> str:
    return f"h25test_{hashlib.sha256(source.encode()).hexdigest()[:16]}"


@pytest.fixture
def numba_dir(tmp_path, monkeypatch):
    """The generated-module folder moved into tmp_path (not through NUMBA_CACHE_DIR: numba
    reloads its whole configuration when a NUMBA_ variable changes)."""
    folder = tmp_path / "numba" / "biogpu-generated"
    monkeypatch.setattr(jit, "generated_folder", lambda: jit._own_folder(folder))
    yield folder
    for name in [n for n in sys.modules if n.startswith("h25test_")]:
        del sys.modules[name]


@pytest.mark.parametrize("where", ["module", "old-style tmp", "pid tmp", "dot tmp"])
def test_planted_link_is_not_written_through(numba_dir, tmp_path, where):
    source = f"VALUE = {len(where)}\n"
    name = _name(source)
    victim = tmp_path / "victim.txt"
    victim.write_text("the user's file\n")
    numba_dir.mkdir(parents=True)
    planted = {"module": f"{name}.py", "old-style tmp": f"{name}.{os.getpid()}.tmp",
               "pid tmp": f"{name}.py.{os.getpid()}.tmp", "dot tmp": f".{name}.{os.getpid()}.tmp"}[where]
    (numba_dir / planted).symlink_to(victim)
    module = jit.generated_module("h25test", source)
    assert module.VALUE == len(where)
    assert victim.read_text() == "the user's file\n"
    assert not (numba_dir / f"{name}.py").is_symlink()
    assert not [p for p in numba_dir.iterdir() if p.name.endswith(".tmp") and not p.is_symlink()]


@settings(derandomize=True, max_examples=25, deadline=None)
@given(value=st.integers(0, 10**6), pid_offset=st.integers(-3, 3))
def test_generated_module_with_links_at_guessable_names(tmp_path_factory, value, pid_offset):
    root = tmp_path_factory.mktemp("jit")
    folder = root / "numba" / "biogpu-generated"
    original = jit.generated_folder
    jit.generated_folder = lambda: jit._own_folder(folder)
    try:
        folder.mkdir(parents=True)
        source = f"VALUE = {value}\n"
        name = _name(source)
        victim = root / "victim"
        victim.write_text("keep")
        for pid in {os.getpid() + pid_offset, os.getpid()}:
            for planted in (f"{name}.{pid}.tmp", f".{name}.{pid}.x.tmp"):
                (folder / planted).symlink_to(victim)
        sys.modules.pop(name, None)
        assert jit.generated_module("h25test", source).VALUE == value
        assert victim.read_text() == "keep"
    finally:
        jit.generated_folder = original
        sys.modules.pop(_name(f"VALUE = {value}\n"), None)


def test_generated_folder_that_is_a_link_is_refused(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "biogpu-generated").symlink_to(outside)
    with pytest.raises(OSError, match="is a link"):
        jit._own_folder(tmp_path / "biogpu-generated")


# ---- the kernel cache ----------------------------------------------------------------------
@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    folder.mkdir()
    monkeypatch.setenv("BIOGPU_CACHE_DIR", str(folder))
    return folder


def _store(n: int) -> list[str]:
    keys = [kernel_cache.cache_key(f"source {k}") for k in range(n)]
    for k, key in enumerate(keys):
        kernel_cache.store(key, Image(b"payload %d" % k, "cubin", 90), f"k{k}")
    return keys


FOREIGN = {
    "user bin": lambda d, o: (d / "results.bin").write_bytes(b"the user's data"),
    "hex-named user bin": lambda d, o: (d / ("ab" * 32 + ".bin")).write_bytes(b"no header"),
    "link to outside bin": lambda d, o: (d / ("cd" * 32 + ".bin")).symlink_to(o),
    "folder named bin": lambda d, o: (d / ("ef" * 32 + ".bin")).mkdir(),
    "header but other name": lambda d, o: (d / "notes.bin").write_bytes(kernel_cache.MAGIC + b"{}\n"),
    "text file": lambda d, o: (d / "readme.txt").write_text("hello"),
}


@pytest.mark.parametrize("kind", sorted(FOREIGN))
@pytest.mark.parametrize("ours", [0, 1, 3])
def test_clear_removes_only_our_entries(cache, tmp_path, kind, ours):
    outside = tmp_path / "outside.bin"
    outside.write_bytes(kernel_cache.MAGIC + b"looks like ours\n")
    FOREIGN[kind](cache, outside)
    before = {p.name for p in cache.iterdir()}
    keys = _store(ours)
    assert len(kernel_cache.entries()) == ours
    files, size = kernel_cache.clear()
    assert files == ours and (size > 0) == (ours > 0)
    assert {p.name for p in cache.iterdir()} == before
    assert outside.read_bytes().startswith(kernel_cache.MAGIC)
    assert all(kernel_cache.load(k) is None for k in keys)


def test_cache_folder_that_is_a_link_is_left_alone(tmp_path, monkeypatch):
    real = tmp_path / "real"
    real.mkdir()
    monkeypatch.setenv("BIOGPU_CACHE_DIR", str(real))
    _store(2)
    link = tmp_path / "link"
    link.symlink_to(real)
    monkeypatch.setenv("BIOGPU_CACHE_DIR", str(link))
    assert kernel_cache.clear() == (0, 0)
    assert len(list(real.iterdir())) == 2


def test_cli_cache_clear_names_the_count(cache, capsys):
    from app.cli import main

    (cache / "mine.bin").write_bytes(b"user")
    _store(2)
    assert main(["cache", "clear"]) == 0
    assert "removed 2 compiled kernels" in capsys.readouterr().out
    assert (cache / "mine.bin").read_bytes() == b"user"


def test_unusable_entry_that_is_not_ours_is_not_deleted(cache):
    key = kernel_cache.cache_key("x")
    path = cache / f"{key}.bin"
    path.write_bytes(b"someone else's file")
    assert kernel_cache.load(key) is None
    assert path.read_bytes() == b"someone else's file"
