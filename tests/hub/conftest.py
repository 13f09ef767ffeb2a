"""The local Hub for every test here: the bundled model, a llama-quantize copy of it and two small
GGUFs of random bytes (quick to move, so the faults land mid-file), in four repositories."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.gguf_factory import write_gguf
from tests.hub.mirror import Mirror, Repo, RepoFile
from tests.remote.servers import llama_tools

GEMMA = "llamadesk-test/gemma-3-270m-GGUF"
TINY = "llamadesk-test/tiny-GGUF"
GATED = "acme/gated-GGUF"


def tiny_gguf(path: Path, width: int, seed: int) -> Path:
    """A valid GGUF header (Gemma 3 shaped) over `width` x 256 x 4 bytes of random tensor data."""
    meta = {"general.architecture": "gemma3", "general.name": "tiny", "general.file_type": 15,
            "gemma3.block_count": 2, "gemma3.embedding_length": 256, "gemma3.context_length": 8192,
            "gemma3.feed_forward_length": 1024, "gemma3.attention.head_count": 4,
            "gemma3.attention.head_count_kv": 1, "gemma3.attention.key_length": 64,
            "gemma3.attention.value_length": 64, "gemma3.attention.sliding_window": 512,
            "tokenizer.ggml.tokens": [f"t{i}" for i in range(1000)]}
    write_gguf(path, meta, [("token_embd.weight", (256, 1000)), ("blk.0.ffn_up.weight", (256, width))])
    data = 256 * 1000 * 4 + 256 * width * 4
    rng = __import__("random").Random(seed)
    with open(path, "r+b") as f:
        f.seek(path.stat().st_size - data)
        f.write(rng.randbytes(data))
    return path


@pytest.fixture(scope="session")
def quantized_q8(model_path, tmp_path_factory) -> Path:
    tools = llama_tools()
    dst = tmp_path_factory.mktemp("hubq") / "gemma-3-270m-Q8_0.gguf"
    subprocess.run([str(tools / "llama-quantize"), "--allow-requantize", str(model_path), str(dst), "Q8_0"],
                   check=True, capture_output=True, env={**os.environ, "LD_LIBRARY_PATH": str(tools)})
    return dst


@pytest.fixture(scope="session")
def mirror(model_path, quantized_q8, tmp_path_factory):
    d = tmp_path_factory.mktemp("hubfiles")
    m = Mirror()
    m.add(Repo(GEMMA, [RepoFile("gemma-3-270m-Q4_K_M.gguf", path=model_path),
                       RepoFile("gemma-3-270m-Q8_0.gguf", path=quantized_q8),
                       RepoFile("README.md", text=b"# Gemma 3 270M, GGUF\n")], downloads=900))
    m.add(Repo(TINY, [RepoFile("tiny-Q4_K_M.gguf", path=tiny_gguf(d / "tiny-Q4_K_M.gguf", 24_000, 1)),
                      RepoFile("tiny-Q2_K.gguf", path=tiny_gguf(d / "tiny-Q2_K.gguf", 6_000, 2)),
                      RepoFile("mmproj-tiny-F16.gguf", path=tiny_gguf(d / "mmproj.gguf", 100, 3))],
               downloads=50))
    m.add(Repo(GATED, [RepoFile("gated-Q4_K_M.gguf", path=tiny_gguf(d / "gated.gguf", 500, 4))], gated=True))
    m.start()
    yield m
    m.stop()


def pointed_at(m, monkeypatch):
    """`m`, reset, with HF_ENDPOINT pointing at it and no token of the user's."""
    m.reset()
    monkeypatch.setenv("HF_ENDPOINT", m.url)
    for var in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")
    return m


@pytest.fixture
def hub(mirror, monkeypatch):
    return pointed_at(mirror, monkeypatch)


def cli(*args, timeout=120, env=None, **kw):
    return subprocess.run([sys.executable, "-m", "app", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, **kw)


def spawn(*args, env=None):
    return subprocess.Popen([sys.executable, "-m", "app", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
