"""Offline, the first-launch panel's fit checks cost one wait, not one per suggested model: a Hub
that accepts connections and never answers (a hung proxy, a captive portal) is asked once, and
every other model is told the same line at once."""

from __future__ import annotations

import socket
import threading

from app.hub import api
from app.ui.models import first_launch
from app.ui.models.worker import HubWorker


def test_a_hub_that_never_answers_is_asked_once_for_all_the_suggested_models(monkeypatch):
    accepted = []
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(8)
        srv.settimeout(0.2)
        stop = threading.Event()

        def hold() -> None:  # take each connection and say nothing
            while not stop.is_set():
                try:
                    conn, _ = srv.accept()
                except OSError:
                    continue
                accepted.append(conn)

        t = threading.Thread(target=hold, name="silent-hub", daemon=True)
        t.start()
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{srv.getsockname()[1]}")
        monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")
        monkeypatch.setattr(api, "TIMEOUT_S", 1.0)
        worker = HubWorker()
        specs = [s.spec for s in first_launch.SUGGESTED]
        try:
            alone = []  # what asking for one model costs (huggingface_hub may retry it)
            worker.checked.connect(alone.append)
            worker.check(specs[:1], 2048, 0)
            worker.checked.disconnect()
            for_one = len(accepted)
            while accepted:
                accepted.pop().close()
            checked = []
            worker.checked.connect(checked.append)
            worker.check(specs, 2048, 0)
        finally:
            stop.set()
            t.join(2)
            for c in accepted:
                c.close()
    assert len(specs) >= 2 and [c.spec for c in checked] == specs
    assert for_one >= 1 and 1 <= len(accepted) <= for_one, "asked as for one model, not once per model"
    lines = {c.error for c in checked}
    assert len(lines) == 1 and "timed out waiting for the server" in lines.pop()
    assert all(c.file is None and c.fit is None for c in checked)
