"""Runs `llamadesk ARGS...` for packaging/gpu-check.sh with Qt made unimportable.

The device image has no PySide6, and the rehearsal's machine does: blocking the
import in both places proves the same thing on each, that the engine, the
batch engine and the command line need no Qt (the layers promise it; this is
the run that relies on it).
"""

from __future__ import annotations

import sys

BLOCKED = ("PySide6", "shiboken6", "qasync")


class _NoQt:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"gpu-check: {name} is blocked (the command line must not need Qt)")
        return None


sys.meta_path.insert(0, _NoQt())

from app.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
