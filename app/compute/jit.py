"""Settings shared by the numba-compiled CPU engines."""

from __future__ import annotations

import contextlib
import sys
import threading

# numba's on-disk cache locates a function by its source file; a PyInstaller bundle keeps the
# modules in an archive (no source files), where cache=True would fail at import. There the
# engines compile at first use in each process; everywhere else the machine code is cached.
CACHE = not getattr(sys, "frozen", False)


def generated_folder():
    """Where generated numba modules are written (beside numba's cache, so it keeps their code)."""
    import os
    from pathlib import Path

    base = os.environ.get("NUMBA_CACHE_DIR")
    if base:
        folder = Path(base) / "biogpu-generated"
    else:
        home_cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        folder = Path(home_cache) / "biogpu-studio" / "numba-generated"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def generated_module(prefix: str, source: str):
    """Import ``source`` (printed code) as a module written once per text to
    :func:`generated_folder`, so numba's on-disk cache holds its machine code across runs."""
    import hashlib
    import importlib.util
    import os

    name = f"{prefix}_{hashlib.sha256(source.encode()).hexdigest()[:16]}"
    module = sys.modules.get(name)
    if module is not None:
        return module
    path = generated_folder() / f"{name}.py"
    if not path.exists() or path.read_text() != source:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(source)
        os.replace(tmp, path)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load the generated module {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module     # numba's cache finds the module's globals by its name
    spec.loader.exec_module(module)
    return module


# numba's 'workqueue' threading layer (used where neither TBB nor GNU OpenMP's libgomp is
# installed, e.g. a bare Debian machine) aborts the process ("Fatal Python error: Aborted")
# when two threads enter parallel regions at once; 'omp' and 'tbb' are thread-safe.
_PARALLEL_LOCK = threading.RLock()
_threadsafe: bool | None = None


def threadsafe_layer() -> bool:
    """Whether numba's threading layer lets several threads run parallel regions at once
    (starts the layer's threads, as the first parallel call would)."""
    global _threadsafe
    if _threadsafe is None:
        try:
            import numba
            from numba.np.ufunc import parallel

            parallel._launch_threads()
            _threadsafe = numba.threading_layer() in ("omp", "tbb")
        except Exception:             # noqa: BLE001  (unknown: serialise, the safe choice)
            _threadsafe = False
    return _threadsafe


def parallel_guard():
    """A context in which this thread may run numba parallel code: the process-wide lock of
    parallel work where the threading layer is not thread-safe, else nothing."""
    return contextlib.nullcontext() if threadsafe_layer() else _PARALLEL_LOCK
