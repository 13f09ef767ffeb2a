"""The window's Serve switch: other programs use the loaded model while the chat keeps working
(its turns take a server slot), the panel shows the load, and a busy port is one message."""

from __future__ import annotations

import socket

import httpx
import pytest

from tests.remote.servers import free_port
from tests.ui.conftest import ask, small_config


def test_serving_from_the_window_while_chatting(qtbot, make_window):
    from openai import OpenAI

    win = make_window(small_config(serve_port=free_port()))
    panel = win.open_server()
    assert panel.switch.text() == f"Serve on http://127.0.0.1:{win.config.serve_port}"
    panel.switch.setChecked(True)  # as the user clicks it
    assert win.server_runner.serving, panel.bar.text()
    url = win.server_runner.url
    assert panel.url.text() == url and url.endswith("/v1")
    assert panel.model.text().startswith(win.loaded.identity["file"]) and "loaded in" in panel.model.text()
    client = OpenAI(base_url=url, api_key="x", max_retries=0)
    model = client.models.list().data[0].id
    assert model == win.loaded.identity["file"]
    hi = [{"role": "user", "content": "Hi"}]
    r = client.chat.completions.create(model=model, messages=hi, max_tokens=6)
    assert r.usage.completion_tokens > 0
    shown = []
    for _chunk in client.chat.completions.create(model=model, messages=hi, max_tokens=48, stream=True,
                                                 extra_body={"ignore_eos": True}):
        panel.refresh()
        shown.append((panel.rate.text(), panel.plot.ceiling_line.isVisible()))
    # The aggregate against the ceiling of what the server decodes, on the panel and its chart.
    assert any("% of the" in t and "tok/s ceiling for 1 sequence " in t and line for t, line in shown), shown
    msg = ask(qtbot, win, "Name a colour.")  # routed to the server's engine
    assert msg.content and msg.stats.decode_tokens > 0
    host = win.server_runner.host
    online = lambda: [rid for _, rid, _, _, _ in host.stats.recent if rid.startswith("o")]
    # The API client's request and the chat's turn, both online requests of the server (the
    # turn's record lands just after its reply, on the server's engine thread).
    qtbot.waitUntil(lambda: len(online()) >= 2, timeout=5_000)
    qtbot.waitUntil(lambda: panel.table.rowCount() >= 2, timeout=5_000)
    panel.switch.setChecked(False)
    assert not win.server_runner.serving and panel.url.text() == ""
    with pytest.raises(httpx.ConnectError):
        httpx.get(url + "/models", timeout=2)
    ask(qtbot, win, "And another?")  # the chat's own engine again


def test_a_port_in_use_is_one_message_and_nothing_serves(qtbot, make_window):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        win = make_window(small_config(serve_port=port))
        why = win.set_serving(True)
    assert why and f"127.0.0.1:{port}" in why and not win.server_runner.serving
    assert why in win.server_panel.bar.text() and not win.server_panel.switch.isChecked()


def test_a_window_on_a_remote_server_cannot_serve(qtbot, make_window, llama_server_v1):
    from app.config import SavedEndpoint

    win = make_window(small_config())
    with qtbot.waitSignal(win.model_loaded, timeout=30_000):
        win.connections.connect_to(SavedEndpoint(llama_server_v1))
    why = win.set_serving(True)
    assert "needs a local model" in why and not win.server_runner.serving


def test_the_throughput_is_live_while_clients_stream_and_idle_after(qtbot, make_window):
    import threading

    from openai import OpenAI

    win = make_window(small_config(serve_port=free_port()))
    panel = win.open_server()
    panel.switch.setChecked(True)
    client = OpenAI(base_url=win.server_runner.url, api_key="x", max_retries=0)
    model = client.models.list().data[0].id
    done = []

    def stream(n: int) -> None:
        for _chunk in client.chat.completions.create(
                model=model, messages=[{"role": "user", "content": f"Count to {n}."}], max_tokens=64,
                stream=True, extra_body={"ignore_eos": True}):
            pass
        done.append(n)

    threads = [threading.Thread(target=stream, args=(n,)) for n in (10, 20, 30)]
    for t in threads:
        t.start()
    seen = []
    qtbot.waitUntil(lambda: seen.append(panel.rate.text()) or len(done) == 3, timeout=120_000)
    for t in threads:
        t.join()
    live = [float(t.split()[0]) for t in seen if t.endswith(tuple("0123456789)")) and "tok/s" in t]
    assert live and max(live) > 0, seen  # the line is live mid-stream, never stuck at 0
    rates = [r for _, rid, _, r, _ in win.server_runner.host.stats.recent if r]
    assert max(live) >= 0.8 * max(rates)  # all clients together, at least one client's own rate
    qtbot.waitUntil(lambda: panel.rate.text() == "idle", timeout=5_000)  # and it falls when they stop
    assert panel.plot.curve.yData[-1] == 0.0
