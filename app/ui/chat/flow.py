"""Sending, streaming, stopping: the GUI-thread side of one reply at a time.

Engine events arrive as queued signals and are only recorded here; two timers
do the painting. The frame timer (16 ms) appends the text received since the
last frame, so a burst of tokens costs one paint, never one per token. The
gauge timer (100 ms) refreshes the gauges and the waiting line, so they move
even while no event arrives (TTFT counts up during a long prefill). A third
saves the reply so far every SAVE_EVERY_S through the same TurnRecorder that
`llamadesk ask` uses, so both follow one policy: whatever the user was shown
is kept, and a reply that failed or was left after some text is sealed
"interrupted" with that text.

The conversation's reply format (app.chat.reply_format) is applied here, to
the settings of each turn, so every engine that answers (the chat's own, a
slot of the Batch window or the server, a remote server) gets the same
constraint; a reply held to JSON streams into a JSON code box from its first
character and is marked JSON in the store.

So are its tools (app.chat.tool_set): a reply may be tool calls, drawn as
cards; a built-in tool's call runs here at once (the calculator and the clock
take microseconds) and its result goes into the conversation, the view and
the store, and the model is asked again; a call of a tool the user declared
waits (`tool_waiting`) until the user gives its result (`give_result`). The
loop is app.chat.tool_loop's policy, taken one reply at a time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

from PySide6.QtCore import QObject, QTimer, Signal

from app.chat.conversation import LiveConversation, LiveMessage
from app.chat.live_gauges import LiveGauges
from app.chat.recorder import SAVE_EVERY_S, Turn, TurnRecorder
from app.chat.reply import Reply
from app.chat.reply_format import ReplyFormat, reply_kind
from app.chat.tool_loop import run_builtin
from app.chat.tool_set import ToolSet, ToolSetError
from app.engine.events import TextDelta
from app.engine.message import ToolCall
from app.engine.sampling import GenerationSettings
from app.engine.utilization import Limits
from app.history.records import INTERRUPTED
from app.ui.chat.composer import Composer
from app.ui.chat.engine_thread import EngineBridge, Job
from app.ui.chat.gauges import GaugesPanel
from app.ui.chat.view import ChatView
from app.ui.widgets.message_bar import MessageBar

FRAME_MS = 16
GAUGE_MS = 100
JSON_FENCE = "```json\n"  # a JSON reply's live text opens its code box (JSON has no line of ```)


class ChatFlow(QObject):
    reply_started = Signal()
    reply_finished = Signal(object)  # the assistant LiveMessage
    reply_failed = Signal(str)
    busy_changed = Signal(bool)
    conversation_changed = Signal(object)  # the LiveConversation now shown (new or opened)
    tool_waiting = Signal(object)  # the calls of declared tools the user is to answer ([] : none now)

    def __init__(self, bridge: EngineBridge, view: ChatView, composer: Composer, panel: GaugesPanel,
                 bar: MessageBar, settings: Callable[[], GenerationSettings],
                 streaming: Callable[[], bool], recorder: TurnRecorder | None = None, parent=None):
        super().__init__(parent)
        self.bridge, self.view, self.composer, self.panel, self.bar = bridge, view, composer, panel, bar
        self.settings_source, self._streaming = settings, streaming
        self.conversation = LiveConversation()
        self.recorder = recorder  # None: no history store, the chat is not saved
        self.gauges = LiveGauges()
        self.model_ready = False
        self.n_ctx = 0
        self.job: Job | None = None
        self._parts: list[str] = []
        self._painted = 0  # how many of _parts the view already shows
        self._opening = ""  # what the live reply's text starts with (JSON_FENCE for a JSON reply)
        self._round = 0  # the turn's replies so far that called tools (the loop's bound)
        self._frame = QTimer(self)
        self._frame.setInterval(FRAME_MS)
        self._frame.timeout.connect(self._paint_frame)
        self._gauge = QTimer(self)
        self._gauge.setInterval(GAUGE_MS)
        self._gauge.timeout.connect(self._refresh_gauges)
        self._turn: Turn | None = None  # the store rows of the reply being generated
        self._save = QTimer(self)
        self._save.setInterval(int(SAVE_EVERY_S * 1000))
        self._save.timeout.connect(self._save_progress)
        bridge.reply_event.connect(self._on_event)
        bridge.replied.connect(self._on_replied)
        bridge.failed.connect(self._on_failed)
        self._restyle = False  # the colours changed while a reply ran: redraw once it ends
        view.restyled.connect(self.rerender)
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
            settings = self.turn_settings()
            settings.validate()
        except ValueError as e:
            self.bar.show_message(f"Settings: {e}", "error")
            return False
        self.composer.set_text("")
        self._ask(text, settings)
        return True

    def stop(self) -> None:
        self.bridge.stop()

    def turn_settings(self) -> GenerationSettings:
        """The window's settings for the next turn, held to the conversation's reply format."""
        settings = self.settings_source()
        constraint = self.conversation.reply_format.constraint()
        return settings if constraint is None else replace(settings, constraint=constraint)

    def set_reply_format(self, fmt: ReplyFormat) -> None:
        """The format chosen for this conversation's next replies, saved with it now (a saved
        conversation reopened before its next turn keeps it; a new one saves it with its first)."""
        conv = self.conversation
        conv.reply_format = fmt
        if self.recorder is not None and conv.id is not None:
            self.recorder.save_reply_format(conv.id, fmt.to_json())

    def set_tools(self, tools: ToolSet) -> None:
        """The tools chosen for this conversation's next replies, saved with it now."""
        conv = self.conversation
        conv.tools = tools
        if self.recorder is not None and conv.id is not None:
            self.recorder.save_tools(conv.id, tools.to_json())

    def _calls(self, round_no: int):
        try:
            return self.conversation.tools.calls(round_no)
        except ToolSetError as e:
            self.bar.show_message(f"{e}: this reply is text", "warning")
            return None

    def give_result(self, text: str) -> bool:
        """The user's result for the first waiting call of a declared tool; once every call has
        its result, the model is asked again."""
        waiting = self.conversation.waiting_calls()
        if self.busy or not waiting or not self.model_ready:
            return False
        self._add_result(waiting[0], text)
        self._after_results()
        return True

    def _add_result(self, call: ToolCall, result: str) -> None:
        conv = self.conversation
        msg = LiveMessage("tool", result, tool_call_id=call.id, tool_name=call.name)
        conv.messages.append(msg)
        if self.recorder is not None:
            msg.id = self.recorder.tool_result(conv.id, call, result)
        self.view.add_message(msg)

    def _after_calls(self, calls: tuple[ToolCall, ...]) -> None:
        """A reply made calls: run the built-in ones, then ask again or wait for the user."""
        ran = run_builtin(calls, self.conversation.tools)
        for call, result in ran.done:
            self._add_result(call, result)
        self._after_results()

    def _after_results(self) -> None:
        waiting = self.conversation.waiting_calls()
        self.tool_waiting.emit(waiting)
        if waiting:
            names = ", ".join(dict.fromkeys(c.name for c in waiting))
            self.bar.show_message(f"The model called {names}: give the result below and send it", "info")
            return
        self._round += 1
        self._continue(self._round)

    def _continue(self, round_no: int) -> None:
        """The model's next reply after the tool results (no question of its own)."""
        conv = self.conversation
        settings = self.turn_settings()
        if self.recorder is not None and conv.id is not None:
            self._turn = self.recorder.begin_continuation(conv.id, [m.id for m in conv.messages])
        job = Job(conv.history(), None, replace(settings, constraint=None), conv.system(),
                  tools=self._calls(round_no), round=round_no)
        self._start(job)

    def regenerate(self) -> bool:
        if self.busy or not self.model_ready or not self.conversation.can_regenerate():
            return False
        text = self._take_back()
        self.view.truncate(len(self.conversation.messages))
        self._ask(text, self.turn_settings())
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
        if self.recorder is not None:
            self.recorder.remove([m.id for m in removed])
        return text

    def new_chat(self, conversation: LiveConversation | None = None) -> None:
        if self.busy:
            self.bridge.stop()
            self._cut_reply()
            self._end_job()  # its late events and reply are ignored by job id
        self.conversation = conversation or LiveConversation()
        self._round = 0
        self.view.show_conversation(self.conversation.messages)
        self.tool_waiting.emit(self.conversation.waiting_calls())
        # The timeline is this conversation's: its replies from their stored stats, or none.
        self.gauges.new_conversation([m.stats for m in self.conversation.messages
                                      if m.role == "assistant" and m.stats is not None])
        self._refresh_gauges()
        self.conversation_changed.emit(self.conversation)

    def use_model(self, n_ctx: int, limits: Limits | None) -> None:
        """A model (or server) finished loading: its context is empty and `n_ctx` long, so the
        gauges drop the old context's figures (a stale "/ 4096" after a reload to 8192)."""
        self.model_ready, self.n_ctx = True, n_ctx
        self.gauges.limits = limits
        self.gauges.new_model(n_ctx)
        self._refresh_gauges()

    def rerender(self) -> None:
        """Draw the conversation again in the palette's new colours (a theme chosen in the
        settings, or the desktop's); a reply in progress finishes first."""
        self._restyle = self.busy
        if not self.busy:
            self.view.show_conversation(self.conversation.messages)

    # -- one reply ----------------------------------------------------------
    def _ask(self, text: str, settings: GenerationSettings) -> None:
        conv = self.conversation
        self._round = 0
        self.tool_waiting.emit([])  # a new question: calls left unanswered stay so
        idx = conv.add("user", text)
        self.view.add_message(conv.messages[idx])
        tools = self._calls(0)
        if tools is not None:  # the tool format holds the reply; a reply format cannot too
            settings = replace(settings, constraint=None)
        if self.recorder is not None:
            self._turn = self.recorder.begin(conv.id, text, conv.system(), settings,
                                             [m.id for m in conv.messages[:idx]],
                                             reply_format=conv.reply_format.to_json(),
                                             tools=conv.tools.to_json())
            if self._turn is not None:
                conv.id = self._turn.conversation_id
                conv.messages[idx].id = self._turn.user_message_id
        self._start(Job(conv.history(idx), text, settings, conv.system(), tools=tools))

    def _start(self, job: Job) -> None:
        settings = job.settings
        self.job = job
        self._parts, self._painted = [], 0
        self._opening = JSON_FENCE if reply_kind(settings.constraint) or job.tools is not None else ""
        self.gauges.start(time.perf_counter(), settings.max_tokens, self.n_ctx, streaming=self._streaming(),
                          constrained=settings.constraint is not None)
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
            opening = self._opening if self._painted == 0 else ""
            self.view.live_append(opening + "".join(self._parts[self._painted:]))
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

    def _current(self, job: Job) -> bool:
        self.bridge.job_done(job)
        return self.job is not None and job.id == self.job.id

    def _on_replied(self, job: Job, reply: Reply) -> None:
        if not self._current(job):
            return
        if reply.stats.error is not None:
            self._fail(reply.stats.error, False, reply)
            return
        if reply.stats.stop_reason == "cancelled" and not reply.text:
            self._fail("Stopped before the first token", False, reply, level="info")
            return
        msg = LiveMessage("assistant", reply.text, stats=reply.stats,
                          format=reply.format or reply_kind(job.settings.constraint),
                          tool_calls=reply.tool_calls)
        for i in self.conversation.mark_dropped(reply.dropped):
            self.view.update_message(i, self.conversation.messages[i])
        self.conversation.messages.append(msg)
        if self.recorder is not None and self.recorder.finish(self._turn, reply):
            msg.id = self._turn.reply_message_id
        self.view.end_live(msg)  # the whole reply, once, as Markdown (both modes)
        self.gauges.finish(reply.stats, time.perf_counter())
        self._end_job()
        self.reply_finished.emit(msg)
        if reply.tool_calls:
            self._after_calls(reply.tool_calls)

    def _on_failed(self, job: Job, message: str, overflow: bool) -> None:
        if self._current(job):
            self._fail(message, overflow, None)

    def _fail(self, message: str, overflow: bool, reply: Reply | None, level: str = "error") -> None:
        """The one failure policy: text the user saw stays (interrupted); with none, the
        question goes back in the box, since nothing of the turn was answered."""
        text = reply.text if reply is not None else "".join(self._parts)
        stats = reply.stats if reply is not None else None
        kind = "Context overflow: " if overflow else ("Error: " if level == "error" else "")
        if text:
            fmt = reply_kind(self.job.settings.constraint) if self.job is not None else None
            msg = LiveMessage("assistant", text, stats=stats, state=INTERRUPTED, format=fmt)
            self.conversation.messages.append(msg)
            if self.recorder is not None and self.recorder.abandon(self._turn, text, stats=stats):
                msg.id = self._turn.reply_message_id
            self.view.end_live(msg)
            if stats is not None:
                self.gauges.finish(stats, time.perf_counter())
            else:
                self.gauges.fail(time.perf_counter())
            self._end_job()
            self.bar.show_message(kind + message + " (the reply so far is kept)", level)
            self.reply_failed.emit(message)
            return
        if self.recorder is not None:
            turn = self._turn
            self.recorder.abandon(turn, "")
            if turn is not None and turn.created:  # the store dropped the conversation it began
                self.conversation.id = None
        if self.job is not None and self.job.user_text is None:  # after tool results: they stay
            self.gauges.fail(time.perf_counter())
            self._end_job()
            self.bar.show_message(kind + message, level)
            self.reply_failed.emit(message)
            return
        got = self.conversation.take_last_exchange()
        question = got[0] if got else ""
        self.view.truncate(len(self.conversation.messages))
        typed = self.composer.text()
        self.composer.set_text(question + ("\n" + typed if typed.strip() else ""))
        self.gauges.fail(time.perf_counter())
        self._end_job()
        hint = " (your message is back in the box)" if question else ""
        self.bar.show_message(kind + message + hint, level)
        self.reply_failed.emit(message)

    def _save_progress(self) -> None:
        if self.recorder is not None and self.busy:
            self.recorder.progress(self._turn, "".join(self._parts))

    def _cut_reply(self) -> None:
        """The user left the reply (new chat, switch, close): the question stays, and so
        does any text shown, sealed as interrupted."""
        if self.recorder is not None and self.busy:
            self.recorder.abandon(self._turn, "".join(self._parts), keep_question=True)

    def _end_job(self) -> None:
        self._frame.stop()
        self._gauge.stop()
        self._save.stop()
        self._turn = None
        self.job = None
        self.view.discard_live()
        self.composer.set_busy(False)
        self._refresh_gauges()
        self.busy_changed.emit(False)
        if self._restyle:
            self.rerender()

    def shutdown(self) -> None:
        """Closing mid-reply keeps the text so far, sealed as interrupted."""
        self._cut_reply()
        self._frame.stop()
        self._gauge.stop()
        self._save.stop()
