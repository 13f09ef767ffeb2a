"""The window on a remote llama-server: connect, chat with the same gauges and footers,
Stop, and a server that is not there (a message, and the app stays usable). The Connect
dialog asks on its own thread, which every way of closing the dialog ends."""

from __future__ import annotations

import json
import threading

from app.config import SavedEndpoint, default_path
from tests.remote.servers import FaultServer, answer, free_port
from tests.ui.conftest import ask, decode_to_max_tokens, small_config

KEY = "sk-window-0123456789abcdef"


def test_connect_chat_and_footers_on_llama_server(qtbot, make_window, llama_server_v1):
    win = make_window(small_config())
    saved = SavedEndpoint(llama_server_v1)
    with qtbot.waitSignal(win.model_loaded, timeout=30_000) as got:
        win.connections.connect_to(saved, key=KEY)
    info = got.args[0]
    assert info.model is None and info.n_ctx == 2048
    bar = win.model_bar.status.full_text()  # the whole line, however much of it shows
    assert "remote llama-server at 127.0.0.1" in bar and "ctx 2048" in bar
    assert any(p == saved for p in win.model_bar._paths)  # listed in the picker beside local files
    msg = ask(qtbot, win, "Name a colour.")
    assert msg.content and msg.stats.source.startswith("llama-server at")
    assert "on llama-server at" in msg.stats.summary()
    assert msg.stats.decode_tok_s > 0 and msg.stats.prefill_tok_s > 0
    qtbot.waitUntil(lambda: win.gauges.decode.caption.text() == "Decode", timeout=5_000)
    assert win.gauges.decode.text() == str(msg.stats.decode())  # the server's own rate, as the footer
    assert "ms" in win.gauges.ttft.text()
    assert "on llama-server at" in win.view.toPlainText()  # the footer under the reply
    cfg = json.loads(default_path().read_text())
    assert cfg["active_endpoint"] == llama_server_v1 and cfg["endpoints"][0]["base_url"] == llama_server_v1
    assert KEY not in default_path().read_text()


def test_stop_on_a_remote_reply_keeps_the_text(qtbot, make_window, llama_server_v1):
    win = make_window(small_config(max_tokens=1500))
    win.flow.settings_source = decode_to_max_tokens(win.flow.settings_source)
    with qtbot.waitSignal(win.model_loaded, timeout=30_000):
        win.connections.connect_to(SavedEndpoint(llama_server_v1))
    win.composer.set_text("Write a very long story.")
    with qtbot.waitSignal(win.flow.reply_finished, timeout=60_000) as done:
        win.flow.send()
        qtbot.waitUntil(lambda: win.flow.gauges.generated >= 3, timeout=30_000)
        win.flow.stop()
    msg = done.args[0]
    assert msg.content and msg.stats.stop_reason == "cancelled" and msg.stats.error is None
    assert win.flow.gauges.generated < 1500


def test_an_unreachable_server_is_one_message_and_the_default_model_still_loads(qtbot, make_window):
    win = make_window(small_config())
    with qtbot.waitSignal(win.model_failed, timeout=30_000) as failed:
        win.connections.connect_to(SavedEndpoint(f"http://127.0.0.1:{free_port()}/v1"))
    assert "connection refused" in failed.args[0]
    assert "Could not connect to the server" in win.bar.text() and "\n" not in win.bar.text()
    assert json.loads(default_path().read_text())["active_endpoint"] is None  # the next launch is not stuck
    with qtbot.waitSignal(win.model_loaded, timeout=30_000):
        win._on_bar_action("default")
    assert win.remote is None and "remote" not in win.model_bar.status.full_text()


def test_a_mistyped_server_url_is_said_in_the_dialog_and_the_model_stays(qtbot, make_window):
    from app.ui.remote.dialog import ConnectDialog

    win = make_window(small_config())
    loaded = win.loaded
    dlg = ConnectDialog(win)
    qtbot.addWidget(dlg)
    dlg.show()
    dlg.url.setText(f"http://127.0.0.1:{free_port()}/v1")
    dlg.accept()
    qtbot.waitUntil(lambda: "Nothing was changed" in dlg.status.text(), timeout=10_000)
    assert "connection refused" in dlg.status.text()
    assert dlg.isVisible() and dlg.result_endpoint is None  # open, to fix the URL
    assert win.loaded is loaded and win.flow.model_ready and win.remote is None
    assert json.loads(default_path().read_text()).get("active_endpoint") is None


def test_the_batch_window_on_a_server_keeps_requests_in_flight(qtbot, make_window, llama_server_v1, tmp_path):
    win = make_window(small_config())
    with qtbot.waitSignal(win.model_loaded, timeout=30_000):
        win.connections.connect_to(SavedEndpoint(llama_server_v1))
    panel = win.open_batch()
    panel.paste.setPlainText("\n".join(f"Name animal number {n}." for n in range(1, 7)))
    panel.output_edit.setText(str(tmp_path / "out.jsonl"))
    panel.slots.setValue(3)
    panel.max_tokens.setValue(8)
    busy = []
    panel.progress_shown.connect(lambda p: busy.append(p.busy_slots))
    with qtbot.waitSignal(panel.batch_finished, timeout=120_000) as done:
        assert panel.start()
    summary = done.args[0]
    assert summary is not None and summary.ok == 6 and panel.table.rowCount() == 6
    out = [json.loads(s) for s in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert len(out) == 6 and all(o["response"]["body"]["usage"]["completion_tokens"] > 0 for o in out)
    assert max(busy) >= 2  # several requests were in flight at once
    assert all(panel.table.item(r, 2).text() == "ok" for r in range(6))


def test_the_connect_dialog_lists_the_servers_models_and_refuses_a_bad_url(qtbot, llama_server_v1,
                                                                          model_path):
    from app.ui.remote.dialog import ConnectDialog

    dlg = ConnectDialog()
    qtbot.addWidget(dlg)
    dlg.url.setText("localhost:8080")
    dlg.accept()
    assert dlg.result_endpoint is None and "not a URL" in dlg.status.text()
    dlg.url.setText(llama_server_v1)
    dlg.list_models()
    qtbot.waitUntil(lambda: dlg.model.count() == 1, timeout=10_000)
    assert dlg.model.itemText(0) == str(model_path) and "llama-server" in dlg.status.text()
    dlg.key.setText(KEY)  # typed, not remembered: it goes to the window, not the keyring or a file
    dlg.format.setCurrentIndex(1)
    dlg.accept()  # asks the server first, and closes when it answered
    qtbot.waitUntil(lambda: dlg.result_endpoint is not None, timeout=10_000)
    assert dlg.result_endpoint.base_url == llama_server_v1
    assert dlg.result_endpoint.prompt_format == "transcript" and dlg.result_key == KEY
    assert KEY not in repr(dlg.result_endpoint)


def _listing_server(stall: bool = False) -> FaultServer:
    """/v1/models names one model (after `release`, with `stall`); the rest is 404."""
    def behave(h):
        if h.path != "/v1/models":
            answer(h, 404, "{}")
            return
        if stall:
            srv.release.wait(30)
        answer(h, 200, json.dumps({"object": "list", "data": [{"id": "tiny", "object": "model"}]}))
    srv = FaultServer(behave)
    return srv


def test_the_connect_dialog_asks_on_its_own_thread_and_ends_it_when_closed(qtbot):
    from app.ui.remote.dialog import ConnectDialog

    srv = _listing_server()
    try:
        dlg = ConnectDialog()
        qtbot.addWidget(dlg)
        dlg.url.setText(srv.base + "/v1")
        dlg.list_models()
        thread = dlg._probe_thread
        assert thread is not None and thread.objectName() == "llamadesk-list-models"
        qtbot.waitUntil(lambda: dlg.model.count() == 1, timeout=10_000)
        assert dlg.model.itemText(0) == "tiny" and dlg.list_button.isEnabled()
        assert "1 model" in dlg.status.text()
        dlg.list_models()  # asked again: on the same thread
        qtbot.waitUntil(lambda: srv.requests.count(("GET", "/v1/models")) == 2
                        and dlg.list_button.isEnabled(), timeout=10_000)
        assert dlg._probe_thread is thread
        dlg.close()  # never shown, so no done(): closing alone ends the thread
        assert thread.isFinished() and dlg._probe_thread is None
    finally:
        srv.stop()


def test_cancelling_the_dialog_mid_question_waits_the_question_out_and_ends_the_thread(qtbot):
    from app.ui.remote.dialog import ConnectDialog

    srv = _listing_server(stall=True)
    answered = threading.Timer(0.5, srv.release.set)  # the server answers while the dialog closes
    try:
        dlg = ConnectDialog()
        qtbot.addWidget(dlg)
        dlg.show()
        dlg.url.setText(srv.base + "/v1")
        dlg.list_models()
        qtbot.waitUntil(lambda: bool(srv.requests), timeout=10_000)
        thread = dlg._probe_thread
        answered.start()
        dlg.reject()
        assert thread.isFinished() and not dlg.isVisible()
        assert dlg.model.count() == 0, "the answer to a closed dialog goes nowhere"
    finally:
        answered.cancel()
        srv.stop()
