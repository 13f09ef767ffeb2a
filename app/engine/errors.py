"""Typed errors whose str() is one line a user can act on.

The window shows str(err) in a message bar and the CLI prints it to stderr, so
every message names the thing that was wrong and why, without a traceback.
"""

from __future__ import annotations

from pathlib import Path


class EngineError(Exception):
    """Base for every failure the engine reports to a person."""


class ModelFileError(EngineError):
    """The file given as a model cannot be used; raised before llama.cpp sees it
    where possible, because llama.cpp's own messages go to its log, not to us."""

    def __init__(self, path: str | Path, reason: str):
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")


class ModelLoadError(EngineError):
    """llama.cpp refused a file that looked like a valid GGUF."""

    def __init__(self, path: str | Path, reason: str):
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")


class ContextOverflowError(EngineError):
    """A single message (plus the reply budget) cannot fit the context window."""


class GenerationError(EngineError):
    """llama.cpp failed while decoding."""
