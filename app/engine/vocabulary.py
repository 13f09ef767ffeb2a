"""What constrained decoding needs of a loaded vocabulary, built once per model file.

LLGuidance's tokenizer and the digit-run cap both start from every token's
bytes, which llama.cpp gives one token at a time through ctypes (the slower
half of the setup: `tests/engine/test_vocabulary.py` prints both). The bytes belong to the GGUF file, not
to one load of it, so they are read once per file and kept for the next load
of the same file (a window reopening its model, a server's side context, a
draft on the same weights); only LLGuidance's index is built again for the new
vocabulary, since its tokenizer calls back into the vocabulary it was built on.

That tokenizer must live exactly as long as its model: the loader says when a
vocabulary appears and when it goes (`loaded`, `closed`), so a model that
llama.cpp happens to place at a freed one's address never inherits the old
model's tokenizer, nor a pointer into freed memory.
"""

from __future__ import annotations

import ctypes
import threading
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING

import llama_cpp
import numpy as np

if TYPE_CHECKING:
    from llguidance import LLTokenizer

FILES_KEPT = 2  # model files whose token bytes stay in memory: a window's model and one other
SPECIAL = b"\xff"  # LLGuidance's mark on a control token's bytes
DIGITS = b"0123456789"

_lock = threading.Lock()
_file_of: dict[int, tuple] = {}  # vocabulary address -> the file it was loaded from
_pieces: OrderedDict[tuple, list[bytes]] = OrderedDict()  # file -> its tokens' bytes, newest last
_tokenizers: dict[int, LLTokenizer] = {}
_digits: dict[int, Digits] = {}
_memos: dict[int, dict] = {}


def file_key(path: Path) -> tuple:
    """A model file as its bytes stand: a file rewritten in place is another file."""
    st = path.stat()
    return str(path.resolve()), st.st_size, st.st_mtime_ns


def _address(vocab) -> int:
    return ctypes.cast(vocab, ctypes.c_void_p).value or 0


def loaded(vocab, path: Path) -> None:
    """A model's vocabulary is live, read from `path`."""
    addr = _address(vocab)
    with _lock:
        _forget(addr)
        try:
            _file_of[addr] = file_key(path)
        except OSError:
            pass  # its bytes are then read from the vocabulary itself each time


def closed(vocab) -> None:
    """The vocabulary's model is being freed: nothing built on it may outlive it."""
    with _lock:
        _forget(_address(vocab))


def _forget(addr: int) -> None:
    _file_of.pop(addr, None)
    _tokenizers.pop(addr, None)
    _digits.pop(addr, None)
    _memos.pop(addr, None)


def memo(vocab) -> dict:
    """A dict that lives exactly as long as the loaded vocabulary: what a caller learnt about
    it (a constraint already tried on it) goes with it, never to a model at the same address."""
    with _lock:
        return _memos.setdefault(_address(vocab), {})


def _read_pieces(vocab) -> list[bytes]:
    """Every token's bytes as llguidance.llamacpp.lltokenizer_from_vocab reads them: rendered with
    special tokens, a control token (or a user-defined one written like "<…>") marked SPECIAL."""
    n = llama_cpp.llama_vocab_n_tokens(vocab)
    size = 16 * 1024
    buf = ctypes.create_string_buffer(size + 1)
    control, user = llama_cpp.LLAMA_TOKEN_ATTR_CONTROL, llama_cpp.LLAMA_TOKEN_ATTR_USER_DEFINED
    out: list[bytes] = []
    for t in range(n):
        k = llama_cpp.llama_token_to_piece(vocab, t, buf, size, 0, True)
        if k < 0:
            raise ValueError(f"token {t} does not fit a {size}-byte buffer ({k})")
        piece = buf.raw[:k]
        attr = llama_cpp.llama_token_get_attr(vocab, t)
        if attr & control or (attr & user and piece.startswith(b"<") and piece.endswith(b">")):
            piece = SPECIAL + piece
        out.append(piece)
    return out


def _pieces_for(vocab, addr: int) -> list[bytes]:
    """Called with the lock held."""
    key = _file_of.get(addr)
    if key is None:
        return _read_pieces(vocab)
    pieces = _pieces.get(key)
    if pieces is None:
        pieces = _pieces[key] = _read_pieces(vocab)
        while len(_pieces) > FILES_KEPT:
            _pieces.popitem(last=False)
    _pieces.move_to_end(key)
    return pieces


def tokenizer_for(vocab) -> LLTokenizer:
    """LLGuidance's view of a llama.cpp vocabulary, built once per loaded model and shared by
    every context on it: it only reads the vocabulary."""
    addr = _address(vocab)
    with _lock:
        tok = _tokenizers.get(addr)
        if tok is None:
            from llguidance import LLTokenizer

            fptr = ctypes.cast(llama_cpp.llama_cpp._lib.llama_tokenize, ctypes.c_void_p).value
            tok = LLTokenizer.from_llamacpp(  # type: ignore[attr-defined]  # (not in llguidance's stub)
                tokens=_pieces_for(vocab, addr), vocab_ptr=vocab, tokenize_fptr=fptr,
                eos_token=llama_cpp.llama_vocab_eos(vocab))
            _tokenizers[addr] = tok
        return tok


def ready(vocab) -> bool:
    """Whether a constrained reply on this vocabulary starts at once: its LLGuidance index and
    digit table are built (else the first one builds them, reading every token's bytes)."""
    addr = _address(vocab)
    with _lock:
        return addr in _tokenizers and addr in _digits


def prepare(vocab, n_vocab: int) -> None:
    """Build what a constrained reply needs now, so the user's first one does not wait for it:
    the window calls this when a reply format or tools are chosen."""
    tokenizer_for(vocab)
    digits_for(vocab, n_vocab)


class Digits:
    """Which tokens of a vocabulary are digits only, and how many trailing digits each piece
    ends with, for the digit-run cap. A control token writes no text, so it is neither."""

    def __init__(self, pieces: list[bytes], n_vocab: int):
        only = np.zeros(n_vocab, dtype=bool)
        trailing = np.zeros(n_vocab, dtype=np.int16)
        for t, piece in enumerate(pieces[:n_vocab]):
            if piece.startswith(SPECIAL) or not piece:
                continue
            stripped = piece.rstrip(DIGITS)
            trailing[t] = len(piece) - len(stripped)
            only[t] = not stripped
        self.only, self.trailing = only, trailing


def digits_for(vocab, n_vocab: int) -> Digits:
    addr = _address(vocab)
    with _lock:
        d = _digits.get(addr)
        if d is None:
            d = _digits[addr] = Digits(_pieces_for(vocab, addr), n_vocab)
        return d
