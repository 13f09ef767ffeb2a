"""Server child processes for benchmarks (and the tests that start the same servers): a free
localhost port, llama.cpp's cached tools, and a process that is healthy before it is used.

The child's output goes to a log file, never to an undrained pipe: llama-server logs every
request, and a full pipe would stall the very server being measured. On Linux the child is
also told to end when the process that started it ends, however that ends: a benchmark
killed by a test's timeout left its servers running, and they slowed every later run.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from functools import cached_property
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]


def _end_with_parent() -> None:
    """In the child, before exec: SIGTERM when the parent dies (prctl PR_SET_PDEATHSIG)."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def llama_tools(env: dict | None = None) -> Path | None:
    """llama.cpp's tools built by packaging/build-llama-tools.sh, or None if they are not.
    `env`: the environment to look in (the tests pass the one they started with)."""
    env = dict(os.environ if env is None else env)
    if env.get("LLAMADESK_LLAMA_TOOLS"):
        return Path(env["LLAMADESK_LLAMA_TOOLS"])
    script = ROOT / "packaging" / "build-llama-tools.sh"
    if not script.exists():
        return None
    r = subprocess.run(["bash", str(script), "--print"], capture_output=True, text=True, env=env)
    return Path(r.stdout.strip()) if r.returncode == 0 else None


class ServerProcess:
    """A server child process, returned once `health` answers 200 on 127.0.0.1:`port`."""

    def __init__(self, args: list[str], port: int, health: str = "/health", env: dict | None = None,
                 timeout_s: float = 120):
        self.port = port
        self.base = f"http://127.0.0.1:{port}"
        fd, log = tempfile.mkstemp(prefix=f"llamadesk-server-{port}-", suffix=".log")
        self.log = Path(log)
        self._logf = os.fdopen(fd, "wb")
        self.proc = subprocess.Popen(args, stdout=self._logf, stderr=subprocess.STDOUT, env=env,
                                     preexec_fn=_end_with_parent if sys.platform == "linux" else None)
        deadline = time.monotonic() + timeout_s
        while True:
            if self.proc.poll() is not None:
                self._logf.close()
                raise RuntimeError(f"{Path(args[0]).name} exited with {self.proc.returncode}: {self.tail()}")
            try:
                if httpx.get(self.base + health, timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{Path(args[0]).name} not healthy after {timeout_s:g} s: {self.tail()}")
            time.sleep(0.2)

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-2000:]

    @cached_property
    def model(self) -> str:
        """The first model the server lists (asked once)."""
        return httpx.get(self.base + "/v1/models", timeout=5).json()["data"][0]["id"]

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
        self._logf.close()
