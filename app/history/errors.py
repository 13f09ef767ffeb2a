"""Typed store and transcript errors, each one line naming the file and the reason.

They share app.errors' base with the engine's errors, so the CLI and the
window report a history problem as they report a model problem: one line.
"""

from __future__ import annotations

from app.errors import FileProblem


class StoreError(FileProblem):
    """Base for every failure of the conversation store, its exports and imports."""


class StoreBug(StoreError):
    """SQLite refused what LlamaDesk asked (bad SQL, a broken constraint, a misused
    connection): our fault, not the machine's. Logged with its traceback; the user is told it
    is a bug, in one line, instead of being sent to check a disk that is fine."""


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
