"""Ctrl+C in `llamadesk ask` on the local model, as a user presses it: the reply stops, what was
shown is kept marked stopped, and the command exits 130 as a shell reports an interrupted one
(the remote engine's case, against slow servers, is tests/remote/test_remote_interrupt.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time


def _as_at_a_terminal() -> None:
    """A test run started in the background passes SIGINT on ignored; a terminal does not."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_mid_reply_keeps_it_stopped_and_exits_130(model_path):
    p = subprocess.Popen([sys.executable, "-m", "app", "ask", "--model", str(model_path), "--ctx", "1024",
                          "--max-tokens", "900", "--temperature", "0", "Tell me a very long story."],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ},
                         preexec_fn=_as_at_a_terminal)
    os.set_blocking(p.stdout.fileno(), False)
    shown = b""
    end = time.monotonic() + 180
    while len(shown.split()) < 3:  # a few tokens on screen
        assert p.poll() is None, p.communicate()
        assert time.monotonic() < end, "no reply"
        shown += p.stdout.read() or b""
        time.sleep(0.05)
    os.set_blocking(p.stdout.fileno(), True)
    t0 = time.monotonic()
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    took = time.monotonic() - t0
    err = err.decode()
    assert p.returncode == 130, err
    assert took < 10 and "Traceback" not in err and "stopped" in err
    listed = json.loads(subprocess.run([sys.executable, "-m", "app", "list", "--json"], capture_output=True,
                                       text=True, timeout=60).stdout)
    exported = subprocess.run([sys.executable, "-m", "app", "export", str(listed[0]["id"]), "--format",
                               "json"], capture_output=True, text=True, timeout=60)
    reply = json.loads(exported.stdout)["conversation"]["messages"][-1]
    assert reply["stats"]["stop_reason"] == "cancelled" and reply["state"] != "generating"
    assert reply["content"].strip() == (shown + out).decode().strip()
    assert reply["stats"]["decode_tokens"] < 900
