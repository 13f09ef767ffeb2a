"""The frozen bundle's entry point: `llamadesk` exactly as the console script.

PyInstaller needs a script, not an `app.cli:main` reference. Run from a
checkout without an install, the repo root is put on sys.path so
`python packaging/entry.py --version` checks the same entry the bundle uses.
"""

import sys
from pathlib import Path

if not getattr(sys, "frozen", False):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.cli import main

if __name__ == "__main__":
    sys.exit(main())
