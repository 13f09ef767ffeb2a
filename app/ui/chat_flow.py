"""Sending, streaming, stopping: the GUI-thread side of one reply at a time.

Engine events arrive as queued signals and are only recorded here; two timers
do the painting. The frame timer (16 ms) appends the text received since the
last frame, so a burst of tokens costs one paint, never one per token. The
gauge timer (100 ms) refreshes the gauges and the waiting line, so they move
even while no event arrives (TTFT counts up during a long prefill). A third
(500 ms) saves the reply so far, so a crash loses at most half a second of it;
a reply the user leaves (new chat, switching, closing) is sealed as
"interrupted" with its text, never dropped.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer, Signal

from app.engine.events import TextDelta
from app.engine.sampling import GenerationSettings
from app.ui.chat_view import ChatView
from app.ui.composer import Composer
from app.chat.conversation import ChatMessage, Conversation
from app.ui.engine_thread import EngineBridge, Job
from app.chat.live_gauges import LiveGauges
from app.ui.gauges import GaugesPanel
from app.ui.message_bar import MessageBar

FRAME_MS = 16
GAUGE_MS = 100
SAVE_MS = 500  # the growing reply reaches the store this often (the issue allows 1 s)


class ChatFlow(QObject):
    reply_started = Signal()
    reply_finished = Signal(object)  # the assistant ChatMessage
    reply_failed = Signal(str)
    busy_changed = Signal(bool)

    def __init__(self, bridge: EngineBridge, view: ChatView, composer: Composer, panel: GaugesPanel,
                 bar: MessageBar, settings: Callable[[], GenerationSettings],
                 streaming: Callable[[], bool], parent=None):
        super().__init__(parent)
        self.bridge, self.view, self.composer, self.panel, self.bar = bridge, view, composer, panel, bar
        self.settings_source, self._streaming = settings, streaming
        self.conversation = Conversation()
        self.saver = None  # a ConversationSaver when the history store is open
        self.gauges = LiveGauges()
        self.model_ready = False
        self.n_ctx = 0
        self.job: Job | None = None
        self._parts: list[str] = []
        self._painted = 0  # how many of _parts the view already shows
        self._frame = QTimer(self)
        self._frame.setInterval(FRAME_MS)
        self._frame.timeout.connect(self._paint_frame)
        self._gauge = QTimer(self)
        self._gauge.setInterval(GAUGE_MS)
        self._gauge.timeout.connect(self._refresh_gauges)
        self._reply_id: int | None = None  # the store row of the reply being generated
        self._save = QTimer(self)
        self._save.setInterval(SAVE_MS)
        self._save.timeout.connect(self._save_progress)
        w = bridge.worker
        w.event.connect(self._on_event)
        w.replied.connect(self._on_replied)
        w.failed.connect(self._on_failed)
        composer.send_clicked.connect(self.send)
        composer.stop_clicked.connect(self.stop)

    @property
    def busy(self) -> bool:
        return self.job is not None

    # -- user actions -------------------------------------------------------
    def send(self) -> bool:
        text = self.composer.text()
        if self.busy or not text.strip():
            return False
        if not self.model_ready:
            self.bar.show_message("No model is loaded yet: pick one in the Model list "
                                  "(your message is kept).", "warning")
            return False
        try:
            settings = self.settings_source()
            settings.validate()
        except ValueError as e:
            self.bar.show_message(f"Settings: {e}", "error")
            return False
        self.composer.set_text("")
        self._ask(text, settings)
        return True

    def stop(self) -> None:
        self.bridge.stop()

    def regenerate(self) -> bool:
        if self.busy or not self.model_ready or not self.conversation.can_regenerate():
            return False
        text = self._take_back()
        self.view.truncate(len(self.conversation.messages))
        self._ask(text, self.settings_source())
        return True

    def edit_last(self) -> bool:
        """Take the last question back into the composer; its reply goes away."""
        if self.busy or self.conversation.last_user_index() is None:
            return False
        text = self._take_back()
        self.view.truncate(len(self.conversation.messages))
        self.composer.set_text(text)
        self.composer.edit.setFocus()
        return True

    def _take_back(self) -> str | None:
        got = self.conversation.take_last_exchange()
        if got is None:
            return None
        text, removed = got
        if self.saver is not None:
            self.saver.removed(removed)
        return text

    def new_chat(self, conversation: Conversation | None = None) -> None:
        if self.busy:
            self.bridge.stop()
            self._cut_reply()
            self._end_job()  # its late events and reply are ignored by job id
        self.conversation = conversation or Conversation()
        self.view.show_conversation(self.conversation.messages)

    # -- one reply ----------------------------------------------------------
    def _ask(self, text: str, settings: GenerationSettings) -> None:
        idx = self.conversation.add("user", text)
        self.view.add_message(self.conversation.messages[idx])
        if self.saver is not None:
            self.saver.question_sent(self.conversation, self.conversation.messages[idx])
            self._reply_id = self.saver.reply_started(self.conversation)
        job = Job(self.conversation.history(idx), text, settings, self.conversation.system())
        self.job = job
        self._parts, self._painted = [], 0
        self.gauges.start(time.perf_counter(), settings.max_tokens, self.n_ctx)
        self.view.begin_live(self._waiting_line(0.0))
        self.composer.set_busy(True)
        self.busy_changed.emit(True)
        self.bridge.submit(job)
        self._frame.start()
        self._gauge.start()
        self._save.start()
        self._refresh_gauges()
        self.reply_started.emit()

    def _on_event(self, job_id: int, ev) -> None:
        if self.job is None or job_id != self.job.id:
            return
        self.gauges.feed(ev, time.perf_counter())
        if isinstance(ev, TextDelta):
            self._parts.append(ev.text)

    def _paint_frame(self) -> None:
        if self._streaming() and self._painted < len(self._parts):
            self.view.live_append("".join(self._parts[self._painted:]))
            self._painted = len(self._parts)

    def _waiting_line(self, elapsed: float) -> str:
        if self._streaming():
            return f"waiting for the first token… {elapsed:.1f} s"
        return f"generating the full reply… {elapsed:.1f} s · {self.gauges.generated} tokens"

    def _refresh_gauges(self) -> None:
        snap = self.gauges.snapshot(time.perf_counter())
        self.panel.show_snapshot(snap)
        if self.busy and not (self._streaming() and self._parts):
            self.view.live_status(self._waiting_line(snap.elapsed_s))

    def _on_replied(self, job: Job, reply) -> None:
        self.bridge.job_done(job)
        if self.job is None or job.id != self.job.id:
            return
        msg = ChatMessage("assistant", reply.text, reply.stats)
        for i in self.conversation.mark_dropped(reply.dropped):
            self.view.update_message(i, self.conversation.messages[i])
        self.conversation.messages.append(msg)
        if self.saver is not None:
            self.saver.reply_finished(self.conversation, msg, self._reply_id)
        self.view.end_live(msg)  # the whole reply, once, as Markdown (both modes)
        self.gauges.finish(reply.stats, time.perf_counter())
        self._end_job()
        self.reply_finished.emit(msg)

    def _on_failed(self, job: Job, message: str, overflow: bool) -> None:
        self.bridge.job_done(job)
        if self.job is None or job.id != self.job.id:
            return
        # Give the question back: it was never answered, and typing must not be lost.
        if self.saver is not None:
            self.saver.reply_failed(self._reply_id)
        text = self._take_back() or ""
        self.view.truncate(len(self.conversation.messages))
        typed = self.composer.text()
        self.composer.set_text(text + ("\n" + typed if typed.strip() else ""))
        self.gauges.fail(time.perf_counter())
        self._end_job()
        hint = " (your message is back in the box)" if text else ""
        self.bar.show_message(("Context overflow: " if overflow else "Error: ") + message + hint, "error")
        self.reply_failed.emit(message)

    def _save_progress(self) -> None:
        if self.saver is not None and self.busy:
            self.saver.reply_progress(self._reply_id, "".join(self._parts))

    def _cut_reply(self) -> None:
        if self.saver is not None and self.busy:
            self.saver.reply_cut(self._reply_id, "".join(self._parts))

    def _end_job(self) -> None:
        self._frame.stop()
        self._gauge.stop()
        self._save.stop()
        self._reply_id = None
        self.job = None
        self.view.discard_live()
        self.composer.set_busy(False)
        self._refresh_gauges()
        self.busy_changed.emit(False)

    def shutdown(self) -> None:
        """Closing mid-reply keeps the text so far, sealed as interrupted."""
        self._cut_reply()
        self._frame.stop()
        self._gauge.stop()
        self._save.stop()
