"""Settings shared by the numba-compiled CPU engines."""

from __future__ import annotations

import sys

# numba's on-disk cache locates a function by its source file; a PyInstaller bundle keeps the
# modules in an archive (no source files), where cache=True would fail at import. There the
# engines compile at first use in each process; everywhere else the machine code is cached.
CACHE = not getattr(sys, "frozen", False)
