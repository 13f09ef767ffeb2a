"""Typed store and transcript errors, each one line naming the file and the reason.

They subclass EngineError because the CLI and the window already turn that
base into a one-line message (exit code 2, message bar); a history problem
deserves the same treatment as a model problem, never a traceback.
"""

from __future__ import annotations

from pathlib import Path

from app.engine.errors import EngineError


class StoreError(EngineError):
    """Base for every failure of the conversation store, its exports and imports."""

    def __init__(self, path: str | Path, reason: str):
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")


class StoreVersionError(StoreError):
    """The database was written by a newer LlamaDesk; we must not touch it,
    because an older schema's writes could corrupt data we do not understand."""


class StoreUnavailableError(StoreError):
    """The database cannot be opened and could not be moved aside either."""


class ConversationNotFound(StoreError):
    """No (live) conversation has that id."""


class TranscriptError(StoreError):
    """A JSON transcript is malformed or of a version this build cannot read."""


class ExportError(StoreError):
    """The export file could not be written; nothing was left half-written."""
