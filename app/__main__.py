"""Allows ``python -m app`` to behave exactly like the ``llamadesk`` script."""

import sys

from app.cli import main

sys.exit(main())
