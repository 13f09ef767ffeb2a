"""Every kind of bad model file gets one precise line from the engine (the CLI's
line for each is in tests/commands/test_bad_models_cli.py)."""

from __future__ import annotations

import pytest

from app.engine.errors import EngineError, ModelFileError, ModelLoadError
from app.engine.loader import load_model
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
