"""What the message bar says when a model or server has loaded.

Apart from the window so the rule is in one place: a GPU load that fell back
to the CPU and the engine's setup warnings (ReplyEngine.notes, the lines
`llamadesk ask` prints: "the prompt cache is off: ...") are warnings, shown
on every load that has them and added to what the bar already warns of
(settings, history), which the user still has to read; a caveat about the
model (no chat template) is an info line, never over a warning, that says
what the caveat means for the user and is shown once, not on every launch:
`seen` and `remember` keep it in the settings (AppConfig.notices_seen). Later
loads of such a model say nothing; the Models window is one click away.
"""

from __future__ import annotations

from collections.abc import Callable

from app.engine.prompt import TRANSCRIPT_NOTICE
from app.ui.chat.engine_thread import Loaded
from app.ui.widgets.message_bar import MessageBar

# What "no chat template" means for the one reading it, not only what LlamaDesk does about it.
EXPLAINED = {TRANSCRIPT_NOTICE: (
    "This model has no chat template, so LlamaDesk writes the chat as a plain transcript for it to "
    "continue. Models without one are usually base models: they continue text rather than follow "
    "instructions, so expect answers that wander, repeat or are wrong. For real chats, get an "
    "instruction-tuned model.")}


class LoadNotes:
    def __init__(self, bar: MessageBar, seen: Callable[[str], bool] = lambda notice: False,
                 remember: Callable[[str], None] = lambda notice: None) -> None:
        self.bar = bar
        self.seen, self.remember = seen, remember
        self._notice_shown = False

    def loaded(self, info: Loaded) -> None:
        bar = self.bar
        warned = bar.isVisible() and bar.level in ("warning", "error")
        warnings = [w for w in (info.report.fallback, *info.notes) if w]
        if warnings:
            line = "  ·  ".join(w[:1].upper() + w[1:] for w in warnings)
            shown = bar.text() if warned and line not in bar.text() else ""
            bar.show_message(f"{shown}  ·  {line}" if shown else line, "warning")
        elif warned:
            pass  # a notice must not cover what the user still has to read (settings, history)
        elif info.notice and not self._notice_shown and not self.seen(info.notice):
            self._notice_shown = True
            self.remember(info.notice)
            if info.notice in EXPLAINED:
                bar.show_message(EXPLAINED[info.notice], "info", action="Get models…", key="models")
            else:
                bar.show_message(f"This model has {info.notice}.", "info")
        elif bar.level == "info":
            bar.hide()
