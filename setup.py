"""Build hook: the top-level ``kernels/`` and ``resources/`` go into the wheel as ``app/_data``.

The tree keeps them at the top, as the design has it; the installed package finds them through
``app.package_data`` (``importlib.resources``). Everything else is in pyproject.toml.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

DATA = ("kernels", "resources")
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


setup(cmdclass={"build_py": BuildPyWithData})
