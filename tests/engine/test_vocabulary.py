"""The bytes constrained decoding reads from a vocabulary: what LLGuidance's own builder reads,
read once per model file, and never carried over to another model or a freed one."""

from __future__ import annotations

import ctypes
import time

import llama_cpp

from app.engine import vocabulary
from app.engine.loader import LoadOptions, load_model


def _vocab(m):
    return llama_cpp.llama_model_get_vocab(m.llm.model)


def _old_digit_scan(vocab, n_vocab: int):
    """The scan the digit cap made before (pieces rendered without special tokens)."""
    buf = ctypes.create_string_buffer(256)
    only, trailing = [], []
    for t in range(n_vocab):
        n = llama_cpp.llama_token_to_piece(vocab, t, buf, 256, 0, False)
        piece = buf.raw[:max(n, 0)]
        stripped = piece.rstrip(b"0123456789")
        trailing.append(len(piece) - len(stripped))
        only.append(bool(piece) and not stripped)
    return only, trailing


def test_the_pieces_and_digits_are_llguidances_and_the_old_scans(model_path):
    from llguidance.llamacpp import lltokenizer_from_vocab

    m = load_model(model_path, LoadOptions(n_ctx=256, n_threads=1))
    try:
        vocab = _vocab(m)
        n = llama_cpp.llama_vocab_n_tokens(vocab)
        ours = vocabulary.tokenizer_for(vocab)
        theirs = lltokenizer_from_vocab(vocab)
        assert ours.vocab_size == theirs.vocab_size == n and ours.eos_token == theirs.eos_token
        for t in (*range(0, n, 997), n - 1):  # every piece is what llguidance reads (a sample)
            assert ours.decode_bytes([t]) == theirs.decode_bytes([t]), t
            assert ours.is_special_token(t) == theirs.is_special_token(t), t
        text = "The answer is 42, {\"a\": [1, 2]} — 東京 🦉"
        assert ours.tokenize_str(text) == theirs.tokenize_str(text)
        d = vocabulary.digits_for(vocab, n)
        only, trailing = _old_digit_scan(vocab, n)
        assert d.only.tolist() == only and d.trailing.tolist() == trailing
        assert d.only.sum() > 10  # Gemma writes digits one to a token
    finally:
        m.close()


def test_a_second_load_of_the_file_reuses_its_bytes_and_a_closed_model_leaves_nothing(model_path):
    first = load_model(model_path, LoadOptions(n_ctx=256, n_threads=1))
    v1 = _vocab(first)
    t = time.perf_counter()
    tok1 = vocabulary.tokenizer_for(v1)
    cold = time.perf_counter() - t
    assert vocabulary.tokenizer_for(v1) is tok1  # one per loaded model
    first.close()
    assert vocabulary._address(v1) not in vocabulary._tokenizers  # nothing on a freed vocabulary
    second = load_model(model_path, LoadOptions(n_ctx=256, n_threads=1))
    try:
        v2 = _vocab(second)
        t = time.perf_counter()
        tok2 = vocabulary.tokenizer_for(v2)
        warm = time.perf_counter() - t
        assert tok2 is not tok1 and tok2.vocab_size == tok1.vocab_size
        assert vocabulary.file_key(model_path) in vocabulary._pieces
        print(f"tokenizer: first load {cold:.2f} s, same file again {warm:.2f} s")
    finally:
        second.close()
