"""What the message bar says when a model or server has loaded.

Apart from the window so the rule is in one place: a GPU load that fell back
to the CPU and the engine's setup warnings (ReplyEngine.notes, the lines
`llamadesk ask` prints: "the prompt cache is off: ...") are warnings, shown
on every load that has them and added to what the bar already warns of
(settings, history), which the user still has to read; a caveat about the
model (no chat template) is an info line, shown once per window and never
over a warning.
"""

from __future__ import annotations

from app.ui.chat.engine_thread import Loaded
from app.ui.widgets.message_bar import MessageBar


class LoadNotes:
    def __init__(self, bar: MessageBar) -> None:
        self.bar = bar
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
        elif info.notice and not self._notice_shown:
            self._notice_shown = True
            bar.show_message(f"This model has {info.notice}.", "info")
        elif bar.level == "info":
            bar.hide()
