"""Real servers for the remote-engine tests: llama.cpp's llama-server, llama-cpp-python's
own server, and a small HTTP proxy that injects faults into a real stream.

Everything listens on 127.0.0.1 only, on a free port, and is stopped by the
fixture that started it.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx

from app.bench.servers import ServerProcess as Process
from app.bench.servers import free_port
from app.bench.servers import llama_tools as bench_llama_tools
from app.engine.backend import tool_env

# The tools cache lives in the real home; tests run with a private one, so the
# lookup uses the environment as it was when the tests were collected.
_REAL_ENV = dict(os.environ)


def llama_tools() -> Path:
    """The cached llama.cpp tools (packaging/build-llama-tools.sh), or a clear failure.

    A failure and not a skip: without llama-server the remote engine is untested."""
    tools = bench_llama_tools(_REAL_ENV)
    if tools is None:
        raise RuntimeError("llama-server is not built: run packaging/build-llama-tools.sh "
                           "(the README's test command does)")
    return tools


def start_llama_server(model: Path, slots: int = 4, ctx: int = 8192, threads: int = 2,
                       extra: tuple[str, ...] = ()) -> Process:
    bin_dir = llama_tools()
    port = free_port()
    env = tool_env({**os.environ, "LD_LIBRARY_PATH": str(bin_dir)})
    return Process([str(bin_dir / "llama-server"), "-m", str(model), "--host", "127.0.0.1",
                    "--port", str(port), "-c", str(ctx), "-np", str(slots), "-t", str(threads),
                    "--metrics", "--no-webui", *extra], port, "/health", env)


def start_llama_cpp_python_server(model: Path) -> Process:
    port = free_port()
    # Started through LlamaDesk's own load quirks (backend.avoid_amx_repack), or its first prompt
    # crashes on a CPU where llama.cpp's AMX kernel does.
    main = ("from app.engine.backend import avoid_amx_repack; avoid_amx_repack(); import runpy; "
            "runpy.run_module('llama_cpp.server', run_name='__main__')")
    return Process([sys.executable, "-c", main, "--model", str(model), "--host", "127.0.0.1",
                    "--port", str(port), "--n_ctx", "2048", "--verbose", "False"], port, "/v1/models")


class FaultServer:
    """An HTTP server in this process whose `behave(handler)` answers every request.

    With `upstream`, `relay(handler, ...)` forwards to a real server and can
    stall or cut the stream after some events: the faults a client must
    survive, on a real socket with real bytes from llama-server.
    """

    def __init__(self, behave, upstream: str | None = None):
        self.upstream = upstream
        self.behave = behave
        self.requests: list[tuple[str, str]] = []
        self.release = threading.Event()  # ends a stall
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"  # the connection closes after each response

            def log_message(self, *a):
                pass

            def _any(self):
                length = int(self.headers.get("content-length") or 0)
                self.body = self.rfile.read(length) if length else b""
                server.requests.append((self.command, self.path))
                server.behave(self)

            do_GET = do_POST = _any

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.base = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def answer(h, status: int, body: bytes | str, ctype: str = "application/json", headers: dict | None = None):
    data = body.encode() if isinstance(body, str) else body
    h.send_response(status)
    h.send_header("Content-Type", ctype)
    h.send_header("Content-Length", str(len(data)))
    for k, v in (headers or {}).items():
        h.send_header(k, v)
    h.end_headers()
    h.wfile.write(data)


def relay(h, server: FaultServer, stall_after: int | None = None, cut_after: int | None = None):
    """Forward the request to the upstream server; misbehave after N stream events."""
    url = server.upstream + h.path
    with httpx.Client(timeout=120) as c:
        req = c.build_request(h.command, url, content=h.body,
                              headers={"content-type": h.headers.get("content-type", "application/json")})
        resp = c.send(req, stream=True)
        try:
            h.send_response(resp.status_code)
            h.send_header("Content-Type", resp.headers.get("content-type", "application/json"))
            h.end_headers()
            events = 0
            for line in resp.iter_lines():
                h.wfile.write(line.encode() + b"\n")
                h.wfile.flush()
                if line.startswith("data:"):
                    events += 1
                    if stall_after is not None and events >= stall_after:
                        server.release.wait(60)
                        return
                    if cut_after is not None and events >= cut_after:
                        h.connection.shutdown(socket.SHUT_RDWR)
                        return
        finally:
            resp.close()


MODELS_ONE = '{"object": "list", "data": [{"id": "m", "object": "model"}]}'


def drip(h, words: list[str], every_s: float = 1.0, server: FaultServer | None = None) -> None:
    """A slow server's stream: one chat delta per `every_s`, then the finish and [DONE], as a
    loaded server or a big model on a small machine sends it. `server`'s release ends it early
    (so a test's stop is not held up by a drip still going)."""
    h.send_response(200)
    h.send_header("Content-Type", "text/event-stream")
    h.end_headers()
    try:
        for i, w in enumerate(words):
            if i and (server.release.wait(every_s) if server is not None else time.sleep(every_s)):
                return
            h.wfile.write(f'data: {json.dumps({"choices": [{"index": 0, "delta": {"content": w}}]})}\n\n'
                          .encode())
            h.wfile.flush()
        h.wfile.write(b'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], '
                      b'"usage": {"prompt_tokens": 3, "completion_tokens": %d}}\n\ndata: [DONE]\n\n'
                      % len(words))
        h.wfile.flush()
    except OSError:  # the client left (a Stop): what a real server sees too
        return


def drip_server(words: list[str], every_s: float = 1.0) -> FaultServer:
    """A server of one model `m` that answers every completion with `drip`."""
    def behave(h):
        if h.path.endswith("/models"):
            return answer(h, 200, MODELS_ONE)
        if h.command != "POST":  # the probe's other questions (/props, /version): not llama-server
            return answer(h, 404, '{"error": {"message": "not found"}}')
        drip(h, words, every_s, srv)
    srv = FaultServer(behave)
    return srv
