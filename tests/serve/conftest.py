"""`llamadesk serve` as a real child process on a free localhost port, the bundled model."""

from __future__ import annotations

import os
import sys
import tempfile

import pytest

from tests.remote.servers import Process, free_port

MODEL_ID = "gemma-3-270m-q4_k_m.gguf"


def start_serve(model_path, data_home: str, *extra: str, port: int | None = None) -> Process:
    port = port or free_port()
    env = {**os.environ, "XDG_DATA_HOME": data_home}
    return Process([sys.executable, "-m", "app", "serve", "--model", str(model_path), "--port", str(port),
                    "--ctx", "2048", "--threads", "2", *extra], port, "/health", env)


@pytest.fixture(scope="session")
def serve(model_path):
    srv = start_serve(model_path, tempfile.mkdtemp(prefix="llamadesk-serve-"), "--parallel", "4")
    yield srv
    srv.stop()


def openai_client(srv: Process):
    """The official openai client on a started server, no retries (a test sees every refusal)."""
    from openai import OpenAI

    return OpenAI(base_url=srv.base + "/v1", api_key="unused", max_retries=0)


@pytest.fixture
def client(serve):
    with openai_client(serve) as c:
        yield c
