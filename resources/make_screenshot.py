"""Regenerate resources/screenshot.png (and with --dark, screenshot-dark.png): the real window,
mid-reply, gauges live.

The conversation list is filled from a throwaway history database (a temporary
XDG data dir), so the developer's own history is neither shown nor touched.
Run under a display (e.g. `Xvfb :99 -screen 0 1600x1000x24 &` then
`DISPLAY=:99 QT_QPA_PLATFORM=xcb python resources/make_screenshot.py`). Settings are
not persisted, so a developer's own settings file is never touched.
The second reply is grabbed once Markdown has rendered live in it, so the gauges show a
live reply and the timeline a finished turn. `--dark` chooses Dark in the window's own
settings (Settings > Appearance, AppConfig.theme), as a user would, and the plain run Light,
so neither depends on the desktop's theme; `--size 900x600` the window's size, `--out`
another file.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from app.bench.gui import MARKDOWN_SHOT
from app.chat.conversation import LiveConversation, LiveMessage
from app.config import AppConfig
from app.ui.window import MainWindow

HERE = Path(__file__).resolve().parent
# The conversation opens on the Markdown example of `bench --gui --markdown` (the base
# model writes Markdown once an earlier turn shows it how), so the live reply renders
# code and lists as they stream.
TURNS = [("How do I reverse a string in Python?", 200),
         ("What does len() return?", 40),
         ("And how do I count the words in a sentence in Python?", 400)]
EARLIER = [("Explain the difference between TCP and UDP", "TCP is connection-oriented…"),
           ("Write a haiku about autumn rain", "Cold rain on the roof…"),
           ("What is a good name for a grey cat?", "Ash, Smokey or Pebble.")]


def seed_history() -> None:
    os.environ["XDG_DATA_HOME"] = tempfile.mkdtemp(prefix="llamadesk-shot-")
    os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="llamadesk-shot-cache-")
    from app.history.store import Store

    with Store.open() as store:
        for question, answer in EARLIER:
            cid = store.create_conversation()
            store.add_message(cid, "user", question)
            store.add_message(cid, "assistant", answer)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("model", nargs="?")
    ap.add_argument("--dark", action="store_true")
    ap.add_argument("--size", default="1200x800")
    ap.add_argument("--out")
    args = ap.parse_args()
    out = Path(args.out) if args.out else HERE / ("screenshot-dark.png" if args.dark else "screenshot.png")
    width, height = (int(v) for v in args.size.split("x"))
    seed_history()
    app = QApplication.instance() or QApplication(sys.argv[:1])
    cfg = AppConfig(temperature=0.0, max_tokens=400, n_ctx=4096, seed=3,
                    theme="dark" if args.dark else "light")  # the settings' own switch
    state = {"turn": 0, "t0": 0.0}
    win = MainWindow(model=args.model, config=cfg, persist=False)
    win.resize(width, height)
    win.show()

    def ask_next() -> None:
        text, max_tokens = TURNS[state["turn"]]
        state["turn"] += 1
        if state["turn"] == len(TURNS):  # the grabbed reply runs on past where the model would stop
            plain = win.flow.settings_source
            win.flow.settings_source = lambda: replace(plain(), ignore_eos=True)
        win.config.max_tokens = max_tokens
        win.composer.set_text(text)
        win.flow.send()

    def on_finished(_msg) -> None:
        if state["turn"] < len(TURNS):
            win.bar.hide()
            ask_next()
            if state["turn"] == len(TURNS):
                state["t0"] = time.perf_counter()
                QTimer.singleShot(50, poll)

    def poll() -> None:
        # Once a code block or list has rendered live, with more still streaming.
        shown = win.view.live_renders >= 2 or (win.view.in_open_code and win.flow.gauges.generated >= 60)
        if shown or time.perf_counter() - state["t0"] > 60:
            win.grab().save(str(out))
            print(f"saved {out}")
            win.close()
        else:
            QTimer.singleShot(50, poll)

    def on_loaded(_info) -> None:
        if state["turn"] == 0:
            q, a = MARKDOWN_SHOT
            shown = [LiveMessage("user", q), LiveMessage("assistant", a)]
            win.flow.new_chat(LiveConversation(messages=shown))
            ask_next()

    win.model_loaded.connect(on_loaded)
    win.flow.reply_finished.connect(on_finished)
    win.closed.connect(app.quit)
    return app.exec()


if __name__ == "__main__":
    sys.exit(main())
