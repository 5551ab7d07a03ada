"""Entry point of the desktop bundle: the same CLI as ``python -m app`` (no argument: the GUI)."""

import sys

from app.cli import main

if __name__ == "__main__":
    sys.exit(main())
