"""Sphinx configuration of the BioGPU Studio documentation (MyST Markdown, Furo theme).

Build: ``make docs`` (HTML in ``docs/_build/html``; the app's Help › Documentation opens it).
The configuration and command-line references are generated from the code at build time by
``_ext/biogpu_reference.py``.
"""

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE / "_ext")]

from app import __version__  # noqa: E402

project = "BioGPU Studio"
author = "the BioGPU Studio authors"
copyright = "the BioGPU Studio authors"
version = release = __version__

extensions = ["myst_parser", "biogpu_reference"]
source_suffix = {".md": "markdown"}
myst_enable_extensions = ["colon_fence", "deflist", "dollarmath"]
myst_heading_anchors = 3
exclude_patterns = ["_build", "screenshots"]
# docs/benchmarks.md is generated from the committed benchmark results (scripts/bench_tables.py);
# the index lists it through a glob, which may match nothing in a tree without it.
suppress_warnings = ["toc.empty_glob"]

html_theme = "furo"
html_title = f"BioGPU Studio {release}"
html_static_path: list[str] = []
html_last_updated_fmt = None
