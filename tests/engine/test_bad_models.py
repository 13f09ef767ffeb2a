"""Every kind of bad model file gets one precise line from the engine (the CLI's
line for each is in tests/commands/test_bad_models_cli.py)."""

from __future__ import annotations

import pytest

from app.engine.errors import EngineError, ModelFileError, ModelLoadError
from app.engine.loader import LoadOptions, load_model
from tests.gguf_factory import BAD_MODEL_CASES as CASES
from tests.gguf_factory import make_bad_model as _make


@pytest.mark.parametrize("kind", list(CASES))
def test_engine_raises_typed_error_naming_file_and_reason(kind, tmp_path, model_path):
    p = _make(kind, tmp_path, model_path)
    with pytest.raises(EngineError) as err:
        load_model(p)
    assert isinstance(err.value, (ModelFileError, ModelLoadError))
    msg = str(err.value)
    assert str(p.name) in msg and CASES[kind] in msg
    assert "\n" not in msg


def _header_levels() -> dict[str, int] | None:
    """enum ggml_log_level as the ggml.h installed with this llama.cpp build spells it."""
    import re
    from pathlib import Path

    import llama_cpp

    header = Path(llama_cpp.__file__).parent.parent / "include" / "ggml.h"
    if not header.is_file():
        return None
    enum = re.search(r"enum ggml_log_level \{(.*?)\};", header.read_text(), re.S)
    return {m[0]: int(m[1]) for m in re.findall(r"GGML_LOG_LEVEL_(\w+)\s*=\s*(\d+)", enum.group(1))}


def test_log_levels_match_the_installed_ggml_header():
    from app.engine import backend

    levels = _header_levels()
    if levels is None:
        pytest.skip("this llama-cpp-python install ships no ggml.h")
    assert levels == {"NONE": backend.GGML_NONE, "DEBUG": backend.GGML_DEBUG, "INFO": backend.GGML_INFO,
                      "WARN": backend.GGML_WARN, "ERROR": backend.GGML_ERROR, "CONT": backend.GGML_CONT}


def test_the_log_tap_keeps_levels_and_joins_continuations():
    from app.engine import backend

    tap = backend._LogTap()
    tap(backend.GGML_WARN, b"llama_context: n_ctx_seq (10000128) > n_ctx_train (32768)\n", None)
    tap(backend.GGML_ERROR, b"alloc_tensor_range: failed to allocate CPU buffer ", None)
    tap(backend.GGML_CONT, b"of size 30720393216\n", None)
    tap(backend.GGML_INFO, b"a message with no newline", None)
    tap(backend.GGML_ERROR, b"llama_init_from_model: failed to initialize the context: "
                            b"failed to allocate buffer for kv cache\n", None)
    lines = tap.since(0)
    assert lines == [
        (backend.GGML_WARN, "llama_context: n_ctx_seq (10000128) > n_ctx_train (32768)"),
        (backend.GGML_ERROR, "alloc_tensor_range: failed to allocate CPU buffer of size 30720393216"),
        (backend.GGML_INFO, "a message with no newline"),
        (backend.GGML_ERROR, "llama_init_from_model: failed to initialize the context: "
                             "failed to allocate buffer for kv cache"),
    ]
    assert backend.load_failure_reason(lines, 10_000_000) == (
        "llama.cpp could not load it: failed to allocate 30.7 GB for the KV cache of a 10,000,000-token "
        "context; lower the context length (--ctx, or Context length in Settings)")
    assert backend.load_failure_reason(lines[:1]) == ""  # a warning alone is no reason


def test_a_real_load_logs_its_chatter_below_error(model_path):
    """What llama.cpp really sends while loading: INFO lines, and not one ERROR."""
    from app.engine import backend

    mark = backend.TAP.mark()
    m = load_model(model_path, LoadOptions(n_ctx=256, n_threads=1))
    m.close()
    lines = backend.TAP.since(mark)
    assert any(lvl == backend.GGML_INFO and "llama_model_loader" in ln for lvl, ln in lines)
    assert [ln for lvl, ln in lines if lvl == backend.GGML_ERROR] == []


def test_a_context_llama_cpp_cannot_hold_is_refused_before_loading(model_path):
    with pytest.raises(ModelLoadError) as err:
        load_model(model_path, LoadOptions(n_ctx=2**32, n_threads=1))
    assert "more than llama.cpp can hold" in str(err.value) and "--ctx" in str(err.value)
