"""Environment settings the app reads, checked once at start so a bad one is named as such
(instead of surfacing later as an engine error or a nonsense size)."""

from __future__ import annotations

import os

from app.sims.common.config import ConfigError

MAX_THREADS = 4096

# name -> what it must be (checked where set)
_WHOLE_THREADS = ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
_FOLDERS = ("BIOGPU_CACHE_DIR", "NUMBA_CACHE_DIR")


def check_environment(environ: dict[str, str] | None = None) -> None:
    """Raise :class:`ConfigError` naming the first bad setting, its value and what it must be."""
    env = os.environ if environ is None else environ
    for name in _WHOLE_THREADS:
        text = env.get(name)
        if text is None or text == "":
            continue
        try:
            value = int(text.strip())
        except ValueError:
            value = 0
        if not 1 <= value <= MAX_THREADS:
            raise ConfigError(f"{text!r} is not a thread count: it must be a whole number from 1 "
                              f"to {MAX_THREADS} (or unset for every core)", f"environment setting {name}")
    for name in _FOLDERS:
        text = env.get(name)
        if text and os.path.exists(text) and not os.path.isdir(text):
            raise ConfigError(f"{text!r} is a file, not a folder", f"environment setting {name}")
    from app.sims.common.memory import parse_memory_limit
    parse_memory_limit(env.get("BIOGPU_MEMORY_LIMIT", ""))
