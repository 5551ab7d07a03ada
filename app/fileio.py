"""Files written as a whole: a temporary file in the same folder, then an atomic rename.

Lowest layer (no app imports), so that engines, the kernel cache and the GUI share it.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_bytes(path: str | Path, payload: bytes) -> Path:
    """Write ``payload`` to ``path`` so that readers see the old file or the whole new one.

    The file gets the usual mode under the user's umask (``mkstemp`` makes it 0600, and that
    mode would otherwise survive the rename).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # the writer's pid in the name lets a later run tell a killed writer's leftover (stale_temporaries)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True


def stale_temporaries(folder: str | Path, max_age_s: float = 86400.0) -> list[Path]:
    """Temporary files and folders (``.NAME.PID.XXXX.tmp``, ``.run-PID-XXXX.tmp``) in ``folder``
    left by a writer that is gone (its pid no longer runs) or older than ``max_age_s``."""
    import re
    import time

    folder = Path(folder)
    out = []
    try:
        entries = list(folder.iterdir())
    except OSError:
        return out
    pattern = re.compile(r"^\.(?:run-(\d+)-[^.]+|.+\.(\d+)\.[^.]+)\.tmp$")
    for entry in entries:
        m = pattern.match(entry.name)
        if not m:
            continue
        pid = int(m.group(1) or m.group(2))
        try:
            old = time.time() - entry.lstat().st_mtime > max_age_s
        except OSError:
            continue
        if old or not _alive(pid):
            out.append(entry)
    return out
