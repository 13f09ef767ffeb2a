"""Regenerate resources/screenshot.png: the real window, mid-reply, gauges live.

The conversation list is filled from a throwaway history database (a temporary
XDG data dir), so the developer's own history is neither shown nor touched.
Run under a display (e.g. `Xvfb :99 -screen 0 1600x1000x24 &` then
`DISPLAY=:99 QT_QPA_PLATFORM=xcb python resources/make_screenshot.py`). Settings are
not persisted, so a developer's own settings file is never touched.
The second reply is grabbed a dozen tokens in, so the gauges show a live reply.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from app.config import AppConfig
from app.ui.window import MainWindow

OUT = Path(__file__).resolve().parent / "screenshot.png"
FIRST = "How do I make bread at home? Give the steps as a numbered list."
SECOND = "And how do I make pizza dough? Give the steps as a numbered list."


EARLIER = [("Explain the difference between TCP and UDP", "TCP is connection-oriented…"),
           ("Write a haiku about autumn rain", "Cold rain on the roof…"),
           ("What is a good name for a grey cat?", "Ash, Smokey or Pebble.")]


def seed_history() -> None:
    os.environ["XDG_DATA_HOME"] = tempfile.mkdtemp(prefix="llamadesk-shot-")
    os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="llamadesk-shot-cache-")
    from app.chat.store import Store

    with Store.open() as store:
        for question, answer in EARLIER:
            cid = store.create_conversation()
            store.add_message(cid, "user", question)
            store.add_message(cid, "assistant", answer)


def main() -> int:
    seed_history()
    app = QApplication.instance() or QApplication(sys.argv[:1])
    # One llama thread: on a small shared machine, oversubscribed cores make decode crawl.
    cfg = AppConfig(temperature=0.0, max_tokens=400, n_ctx=4096, seed=3, n_threads=1)
    model = sys.argv[1] if len(sys.argv) > 1 else None
    state = {"turn": 0}
    win = MainWindow(model=model, config=cfg, persist=False)
    win.resize(1200, 800)
    win.show()

    def ask(text: str, max_tokens: int) -> None:
        win.config.max_tokens = max_tokens
        win.composer.set_text(text)
        win.flow.send()

    def on_loaded(_info) -> None:
        if state["turn"] == 0:
            state["turn"] = 1
            ask(FIRST, 160)

    def on_finished(_msg) -> None:
        if state["turn"] == 1:
            state["turn"] = 2
            win.bar.hide()
            state["t0"] = time.perf_counter()
            win.composer.set_text("")
            ask(SECOND, 400)
            QTimer.singleShot(100, poll)

    def poll() -> None:
        # A dozen tokens in: mid-reply even for the short answers the framed base model gives.
        if win.flow.gauges.generated >= 12 or time.perf_counter() - state["t0"] > 60:
            win.grab().save(str(OUT))
            print(f"saved {OUT}")
            win.close()
        else:
            QTimer.singleShot(100, poll)

    win.model_loaded.connect(on_loaded)
    win.flow.reply_finished.connect(on_finished)
    win.closed.connect(app.quit)
    return app.exec()


if __name__ == "__main__":
    sys.exit(main())
