"""Compiled kernels on disk, so that a second start compiles nothing.

One file per module in the user cache folder (``platformdirs``; ``BIOGPU_CACHE_DIR`` overrides),
named by the SHA-256 of everything that decides the binary: the source and the headers it may
include, the options, the target architecture and kind, and the compiler's name and version.
Each file carries a header with that key and the payload's own SHA-256; an entry that does not
match (truncated, corrupt, or written for another key) is deleted and compiled again, never
loaded.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import stat
from pathlib import Path

from app.compute.compilers import Image
from app.fileio import atomic_write_bytes

log = logging.getLogger(__name__)

MAGIC = b"BIOGPU-KERNEL-1\n"
APP_NAME = "biogpu-studio"


def cache_dir() -> Path:
    """Where compiled kernels live."""
    if os.environ.get("BIOGPU_CACHE_DIR"):
        return Path(os.environ["BIOGPU_CACHE_DIR"])
    try:
        from platformdirs import user_cache_dir
        return Path(user_cache_dir(APP_NAME)) / "kernels"
    except ImportError:
        return Path.home() / ".cache" / APP_NAME / "kernels"


def cache_key(*parts: str) -> str:
    """SHA-256 over the parts (source, headers, options, target, compiler)."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode("utf-8", "surrogateescape"))
        h.update(b"\0")
    return h.hexdigest()


def load(key: str) -> Image | None:
    """The cached image for ``key``, or None (a bad entry is removed)."""
    path = cache_dir() / f"{key}.bin"
    if _ours(path) is None:
        return None
    try:
        blob = path.read_bytes()
    except OSError:
        return None
    try:
        if not blob.startswith(MAGIC):
            raise ValueError("not a kernel-cache file")
        header_end = blob.index(b"\n", len(MAGIC))
        header = json.loads(blob[len(MAGIC):header_end])
        payload = blob[header_end + 1:]
        if header.get("key") != key:
            raise ValueError("written for another key")
        if hashlib.sha256(payload).hexdigest() != header.get("sha256") or len(payload) != header.get("size"):
            raise ValueError("payload does not match its checksum")
        return Image(payload, header["kind"], int(header["arch"]))
    except (ValueError, KeyError, TypeError) as exc:
        log.warning("kernel cache entry %s is unusable (%s); compiling again", path.name, exc)
        if _ours(path) is not None:        # never someone else's file, nor through a link
            path.unlink(missing_ok=True)
        return None


def store(key: str, image: Image, label: str) -> None:
    """Write ``image`` under ``key``; a cache that cannot be written only costs a recompile."""
    header = {"key": key, "kind": image.kind, "arch": image.arch, "size": len(image.data),
              "sha256": hashlib.sha256(image.data).hexdigest(), "label": label}
    try:
        atomic_write_bytes(cache_dir() / f"{key}.bin",
                           MAGIC + json.dumps(header).encode() + b"\n" + image.data)
    except OSError as exc:
        log.warning("kernel cache not written (%s): %s", cache_dir(), exc)


_ENTRY_NAME = re.compile(r"[0-9a-f]{64}\.bin")


def _ours(path: Path) -> int | None:
    """The size of ``path`` if it is a cache entry this module wrote: a regular file (not a
    link), named by a key, starting with :data:`MAGIC`; else None."""
    if not _ENTRY_NAME.fullmatch(path.name):
        return None
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):       # a folder, a pipe, a device
        os.close(fd)
        return None
    with os.fdopen(fd, "rb") as fh:
        return info.st_size if fh.read(len(MAGIC)) == MAGIC else None


def entries() -> list[Path]:
    """The kernel files in :func:`cache_dir` (other files there, and links, are not ours)."""
    folder = cache_dir()
    if folder.is_symlink() or not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if _ours(p) is not None)


def clear() -> tuple[int, int]:
    """Delete the cached kernels (files carrying our header, nothing else); (files, bytes)."""
    files, size = 0, 0
    for p in entries():
        nbytes = _ours(p)          # checked again just before the unlink
        if nbytes is None:
            continue
        p.unlink(missing_ok=True)
        files, size = files + 1, size + nbytes
    return files, size
