"""llama-cpp-python's own server, for the remote-engine tests (llama-server is in tests/conftest.py)."""

from __future__ import annotations

import pytest

from tests.remote.servers import start_llama_cpp_python_server


@pytest.fixture(scope="session")
def py_server(model_path):
    """llama-cpp-python's own OpenAI server: it reports no timings (and no usage when streaming)."""
    srv = start_llama_cpp_python_server(model_path)
    yield srv
    srv.stop()
