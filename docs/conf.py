"""Sphinx configuration of the BioGPU Studio documentation (MyST Markdown, Furo theme).

Build: ``make docs`` (HTML in ``docs/_build/html``; the app's Help › Documentation opens it).
The configuration and command-line references are generated from the code at build time by
``_ext/biogpu_reference.py``.
"""

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

html_theme = "furo"
html_title = f"BioGPU Studio {release}"
html_static_path: list[str] = []
html_copy_source = False         # the HTML ships in the wheel for Help › Documentation: no .md copies

# linkcheck (make docs) checks internal links only: the build must work offline.
linkcheck_ignore = [r"^https?://", r"^mailto:"]


def _list_benchmarks(app, docname, source):
    """Put ``benchmarks`` (generated from the committed benchmark results by
    ``scripts/bench_tables.py``) in the index's Performance toctree where the page exists."""
    if docname == "index" and (HERE / "benchmarks.md").exists():
        source[0] = source[0].replace("\nperformance/index\n", "\nbenchmarks\nperformance/index\n", 1)


def setup(app):
    app.connect("source-read", _list_benchmarks)
