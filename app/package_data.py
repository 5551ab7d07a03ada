"""Where the kernels and resources are, in a source checkout and in an installed wheel.

The tree keeps them at the top (``kernels/``, ``resources/``, as the design has it); the wheel
build maps them into the package as ``app/_data/kernels`` and ``app/_data/resources`` (see
``setup.py``), and the desktop bundle does the same. Found through ``importlib.resources``, so
they work from any working directory.
"""

from __future__ import annotations

import functools
from importlib import resources
from pathlib import Path

NAMES = ("kernels", "resources")


@functools.lru_cache(maxsize=None)
def data_dir(name: str) -> Path:
    """The folder ``kernels`` or ``resources``: packaged copy first, else the checkout's."""
    if name not in NAMES:
        raise ValueError(f"unknown data folder {name!r}")
    packaged = resources.files("app").joinpath("_data", name)
    if packaged.is_dir():
        return Path(str(packaged))
    checkout = Path(str(resources.files("app"))).resolve().parent / name
    if checkout.is_dir():
        return checkout
    raise FileNotFoundError(f"the app's {name}/ folder is missing (looked in {packaged} and "
                            f"{checkout}); reinstall the package")
