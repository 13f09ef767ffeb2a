"""The one base class for failures a person must read: str() is one line naming what and why.

Every layer raises its own subclasses (engine, store, batch files), and the two
front ends turn this base into a message: the CLI prints it and exits 2, the
window shows it in its message bar. Living here, below every layer, it lets
each package report errors without importing another package's errors.
"""

from __future__ import annotations

from pathlib import Path


class LlamaDeskError(Exception):
    """Base for every failure LlamaDesk reports to a person instead of a traceback."""


class FileProblem(LlamaDeskError):
    """A named file (model, database, transcript, export) and what is wrong with it."""

    def __init__(self, path: str | Path, reason: str):
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")
