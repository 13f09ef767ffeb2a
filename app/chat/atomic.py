"""Atomic file writes: a reader (or a crash) sees the old file or the new one, never half.

The temporary file lives in the target's own folder because os.replace is
only atomic within one filesystem.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from app.chat.errors import ExportError


def write_text(path: str | Path, text: str) -> Path:
    path = Path(path)
    data = text.encode("utf-8")
    tmp = None
    try:
        if path.is_dir():
            raise IsADirectoryError(21, "it is a folder")
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        tmp = None
    except OSError as e:
        raise ExportError(path, f"cannot write it: {e.strerror or e}; nothing was written") from e
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    return path
