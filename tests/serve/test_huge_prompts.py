"""A huge prompt does not stall anyone else: measured on a real stream while it is refused.

Client A streams a long reply; client B, another process (so its own 8 MB of JSON cannot hold
this process's GIL), sends a huge prompt. B is refused with a 400 and A's tokens keep arriving,
and /health keeps answering, meanwhile. Before: an 8 MB chat prompt was tokenized for ~10 s and
A's stream stalled 3.6 s; an 8 MB completion prompt held the event loop ~8 s (/health waited as
long); a quarter-megabyte of random words, under the size bound but over the context, was
tokenized on the engine thread and held every stream for over a second.
"""

from __future__ import annotations

import itertools
import json
import statistics
import subprocess
import sys
import threading
import time

import httpx
import pytest

from app.serve.online import MAX_TOKEN_BYTES
from tests.serve.conftest import MODEL_ID
from tests.serve.harness import start

SENDER = """
import json, random, sys, time, httpx
kind, url, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
random.seed(1)  # random words: the tokenizer's slow case (a megabyte of them takes it seconds)
letters = random.choices("abcdefghijklmnopqrstuvwxyz ", k=size)
text = "".join(letters).replace("  ", " a")
body = ({"model": sys.argv[4], "messages": [{"role": "user", "content": text}]} if kind == "chat"
        else {"model": sys.argv[4], "prompt": text})
data = json.dumps(body).encode()
print("ready", flush=True)
sys.stdin.readline()
t = time.monotonic()
r = httpx.post(url + ("/v1/chat/completions" if kind == "chat" else "/v1/completions"), content=data,
               headers={"content-type": "application/json"}, timeout=120)
done = time.monotonic()
print(json.dumps({"status": r.status_code, "sent": t, "answered": done, "error": r.json().get("error")}))
"""


class Stream:
    """Client A: a long streamed reply, each chunk's arrival time kept."""

    def __init__(self, base: str):
        self.times: list[float] = []
        self.stop = threading.Event()
        self.base = base
        self.thread = threading.Thread(target=self._read, name="client-a", daemon=True)
        self.thread.start()

    def _read(self) -> None:
        body = {"model": MODEL_ID, "messages": [{"role": "user", "content": "Write a very long story."}],
                "max_tokens": 1500, "ignore_eos": True, "stream": True}
        with httpx.stream("POST", self.base + "/v1/chat/completions", json=body, timeout=120) as r:
            for line in r.iter_lines():
                if line.startswith("data: {"):
                    self.times.append(time.monotonic())
                if self.stop.is_set():
                    return  # closing the stream cancels the request: its slot is free again

    def close(self) -> None:
        self.stop.set()
        self.thread.join(30)

    def worst_gap(self, start: float, end: float) -> float:
        """The longest wait for a chunk that overlaps `start`..`end` (a system-wide monotonic clock:
        the sender's own stamps). A wait that began after `end` is the machine's, not the prompt's."""
        inside = [t for t in self.times if start <= t <= end]
        before = [t for t in self.times if t < start][-1:]
        after = [t for t in self.times if t > end][:1]
        seen = before + inside + after
        return max((b - a for a, b in itertools.pairwise(seen)), default=float("inf"))


def _probe(base: str, stop: threading.Event, waits: list[float]) -> None:
    with httpx.Client(timeout=60) as c:
        while not stop.is_set():
            t = time.monotonic()
            c.get(base + "/health")
            waits.append(time.monotonic() - t)
            time.sleep(0.02)


CTX = 16384  # a slot's tokens; a prompt past CTX x MAX_TOKEN_BYTES is refused by its size alone


@pytest.fixture(scope="module")
def big_slots(model_path, tmp_path_factory):
    srv = start(model_path, tmp_path_factory.mktemp("huge"), "--parallel", "1", "--ctx", str(CTX))
    yield srv
    srv.stop()


@pytest.mark.parametrize("kind, size", [
    ("chat", 8 * 1024 * 1024 - 4096),  # refused by its size, never tokenized
    ("completion", 8 * 1024 * 1024 - 4096),
    ("chat", CTX * 120),  # under the size bound: tokenized (seconds) beside the engine, then refused
])
def test_a_huge_prompt_is_refused_while_another_clients_stream_keeps_arriving(big_slots, kind, size):
    base = big_slots.base
    sender = subprocess.Popen([sys.executable, "-c", SENDER, kind, base, str(size), MODEL_ID],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert sender.stdout.readline().strip() == "ready"  # its body built before anything is timed
    a = Stream(base)
    waits: list[float] = []
    stop = threading.Event()
    try:
        deadline = time.monotonic() + 60
        while len(a.times) < 12:
            assert time.monotonic() < deadline and a.thread.is_alive(), "client A's stream did not start"
            time.sleep(0.02)
        pace = statistics.median(b - a for a, b in zip(a.times[-11:], a.times[-10:]))
        probe = threading.Thread(target=_probe, args=(base, stop, waits), daemon=True)
        probe.start()
        out, _ = sender.communicate("go\n", timeout=120)
        stop.set()
        probe.join(10)
        time.sleep(0.5 + 3 * pace)  # A's next chunk, for the wait that spans the end
    finally:
        a.close()
        stop.set()
        sender.kill()
    got = json.loads(out.strip().splitlines()[-1])
    took = got["answered"] - got["sent"]
    assert got["status"] == 400 and "tokens" in got["error"]["message"], got
    if size > CTX * MAX_TOKEN_BYTES:
        assert got["error"]["code"] == "context_length_exceeded" and took < 5, got  # was 8-11 s
    # A's tokens kept their own pace (a busy machine's included); held up, A waited for most of B.
    worst = a.worst_gap(got["sent"], got["answered"])
    assert worst < max(2.0 + 4 * pace, took / 2), (f"client A waited {worst:.2f} s for a token while B "
                                                  f"waited {took:.2f} s (A's pace: {pace:.3f} s)")
    assert max(waits) < 2.0, f"/health waited {max(waits):.2f} s"
