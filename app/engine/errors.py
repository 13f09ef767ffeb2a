"""Typed errors whose str() is one line a user can act on.

All subclass app.errors.LlamaDeskError, which the window and the CLI turn
into one line; these add what the engine knows about the failure.
"""

from __future__ import annotations

from app.errors import FileProblem, LlamaDeskError


class EngineError(LlamaDeskError):
    """Base for every failure the engine reports to a person."""


class ModelFileError(FileProblem, EngineError):
    """The file given as a model cannot be used; raised before llama.cpp sees it
    where possible, because llama.cpp's own messages go to its log, not to us."""


class ModelLoadError(FileProblem, EngineError):
    """llama.cpp refused a file that looked like a valid GGUF."""


class ContextOverflowError(EngineError):
    """A single message (plus the reply budget) cannot fit the context window."""


class GenerationError(EngineError):
    """llama.cpp failed while decoding."""
