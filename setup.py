"""Build hook: the top-level ``kernels/`` and ``resources/`` go into the wheel as ``app/_data``,
and the built HTML documentation (``docs/_build/html``, from ``make docs``) as ``app/_data/docs``
where it has been built, for Help › Documentation.

The tree keeps them at the top, as the design has it; the installed package finds them through
``app.package_data`` (``importlib.resources``). Everything else is in pyproject.toml.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

DATA = ("kernels", "resources")
DOCS_HTML = Path("docs") / "_build" / "html"
IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", ".*")


class BuildPyWithData(build_py):
    """Copy the data folders into the built package."""

    def run(self):
        super().run()
        here = Path(__file__).resolve().parent
        for name in DATA:
            target = Path(self.build_lib) / "app" / "_data" / name
            if target.exists():
                shutil.rmtree(target)
            shutil.copytree(here / name, target, ignore=IGNORE)
        html = here / DOCS_HTML
        if (html / "index.html").is_file():
            target = Path(self.build_lib) / "app" / "_data" / "docs"
            if target.exists():
                shutil.rmtree(target)
            shutil.copytree(html, target, ignore=shutil.ignore_patterns(".buildinfo", ".doctrees"))


setup(cmdclass={"build_py": BuildPyWithData})
