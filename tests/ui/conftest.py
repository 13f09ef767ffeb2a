"""Window fixtures: a real MainWindow on the real default model, small and greedy.

One llama thread keeps the tests steady on a shared 2-core machine; every
window is closed at teardown and its engine thread must have ended.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.config import AppConfig, default_path
from app.engine.stats import ReplyStats


def reply_stats(**kw) -> ReplyStats:
    """A finished local reply's stats, for the parts that only show or keep them."""
    base = dict(ttft_s=0.1, prefill_tokens=10, cached_tokens=5, prefill_s=0.01, prefill_tok_s=1000.0,
                decode_tokens=20, decode_s=0.2, decode_tok_s=100.0, total_s=0.4, kv_used=35, n_ctx=512,
                stop_reason="stop")
    return ReplyStats(**{**base, **kw})


def small_config(**kw) -> AppConfig:
    base = dict(n_ctx=1024, n_threads=1, max_tokens=24, temperature=0.0, seed=1)
    base.update(kw)
    return AppConfig(**base)


@pytest.fixture
def make_window(qtbot, model_path):
    """Build a window (settings read from / saved to the test's XDG config dir)."""
    from app.ui.window import MainWindow

    made = []

    def make(config: AppConfig | None = None, model: str | None = None, wait: bool = True,
             expect_fail: bool = False):
        if config is not None and not default_path().exists():
            from app.config import save_config
            save_config(config)
        win = MainWindow(model=str(model_path) if model is None else model)
        qtbot.addWidget(win)
        made.append(win)
        win.show()
        if wait:
            sig = win.model_failed if expect_fail else win.model_loaded
            with qtbot.waitSignal(sig, timeout=30_000):
                pass
        return win

    yield make
    for win in made:
        win.close()
        assert win.bridge.engine_thread.isFinished(), "engine thread still running after close"


def decode_to_max_tokens(source):
    """Wrap a settings source so every reply runs to max_tokens: a framed base model
    answers in a sentence, and a test that acts mid-reply needs one still running."""
    return lambda: replace(source(), ignore_eos=True)


def ask(qtbot, win, text: str, timeout: int = 60_000):
    """Type `text`, press Enter, wait for the reply; return the assistant message."""
    win.composer.set_text(text)
    with qtbot.waitSignal(win.flow.reply_finished, timeout=timeout) as blocker:
        win.flow.send()
    return blocker.args[0]


def seed(question: str, answer: str) -> int:
    """A stored conversation of one exchange, for a test to switch to."""
    from app.history.store import Store

    with Store.open() as s:
        cid = s.create_conversation()
        s.add_message(cid, "user", question)
        s.add_message(cid, "assistant", answer)
        return cid


def headers(text: str, role_label: str) -> int:
    """How many messages of a role the view's plain text shows (a header line starts with it,
    whatever links follow on that line)."""
    import re

    return len(re.findall(rf"^{re.escape(role_label)}\b", text, re.M))
