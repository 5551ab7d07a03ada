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
    return _own_folder(folder)


def _own_folder(folder):
    """``folder``, created if missing; OSError when it is a link or not a folder."""
    folder.mkdir(parents=True, exist_ok=True)
    if folder.is_symlink() or not folder.is_dir():
        raise OSError(f"{folder} (the folder of generated modules) is a link or not a folder; "
                      "remove it or set NUMBA_CACHE_DIR to another folder")
    return folder


def generated_module(prefix: str, source: str):
    """Import ``source`` (printed code) as a module written once per text to
    :func:`generated_folder`, so numba's on-disk cache holds its machine code across runs."""
    import hashlib
    import importlib.util
    import os
    import tempfile
    from pathlib import Path

    name = f"{prefix}_{hashlib.sha256(source.encode()).hexdigest()[:16]}"
    module = sys.modules.get(name)
    if module is not None:
        return module
    path = generated_folder() / f"{name}.py"
    if _current_text(path) != source:
        # a fresh temporary (O_EXCL: a planted name or link is never opened), renamed over the
        # name: a link there is replaced, never written through
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.{os.getpid()}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(source)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load the generated module {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module     # numba's cache finds the module's globals by its name
    spec.loader.exec_module(module)
    return module


def _current_text(path) -> str | None:
    """The text of the regular file at ``path`` (a link, a folder or a device reads as None)."""
    import os
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    with os.fdopen(fd, "rb") as fh:
        try:
            return fh.read().decode("utf-8")
        except UnicodeDecodeError:
            return None
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
