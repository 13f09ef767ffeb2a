"""Sending, streaming, stopping: the GUI-thread side of one reply at a time.

The reply belongs to the conversation it was asked in, not to the one on
screen: the user may open another conversation, or start a new one, while it
is written, and it goes on to its end and is sealed with its stats as if it
had been watched; coming back to it shows it streaming again from what it has
so far. The engine decodes one reply at a time, so a question sent elsewhere
meanwhile is refused in one line, its text left in the box: queued, it would
start at some later moment the user does not see, on whatever model and
settings are current then. Stop ends only the reply of the conversation shown.

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

So are its tools (app.chat.tool_set): a reply may be tool calls, and what
follows them (running a built-in tool, waiting for a declared one's result,
asking the model again) is app.ui.chat.tool_turns, mixed into ChatFlow.

And its documents (app.ui.docs.turns, mixed in too): the chips above the box go
with the question (named on it, their texts kept), the turn is planned by
app.chat.documents (whole or retrieved), the engine is given the plan's text
while the store keeps the user's words, and the reply keeps its sources.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

from PySide6.QtCore import QObject, QTimer, Signal

from app.chat.conversation import LiveConversation, LiveMessage, made_with
from app.chat.live_gauges import LiveGauges
from app.chat.recorder import SAVE_EVERY_S, Turn, TurnRecorder
from app.chat.reply import Reply
from app.chat.reply_format import ReplyFormat, reply_kind
from app.chat.tool_set import ToolSet
from app.engine.message import DocsUse
from app.engine.sampling import GenerationSettings
from app.engine.utilization import Limits
from app.errors import LlamaDeskError
from app.history.messages import AT_LEAF
from app.ui.chat.attachment_chips import Pending
from app.ui.chat.composer import Composer
from app.ui.chat.engine_thread import EngineBridge, Job
from app.ui.chat.gauges import GaugesPanel
from app.ui.chat.live_frames import LiveFrames
from app.ui.chat.running import Running
from app.ui.chat.tool_turns import ToolTurns
from app.ui.chat.turn_failures import TurnFailures
from app.ui.chat.view import ChatView
from app.ui.docs.turns import DocTurns, new_documents
from app.ui.widgets.message_bar import MessageBar

FRAME_MS = 16
GAUGE_MS = 100
JSON_FENCE = "```json\n"  # a JSON reply's live text opens its code box (JSON has no line of ```)
OPEN_GENERATING = "open-generating"  # the message bar's key: open the conversation whose reply runs


class ChatFlow(ToolTurns, DocTurns, TurnFailures, LiveFrames, QObject):
    reply_started = Signal()
    reply_finished = Signal(object)  # the assistant LiveMessage
    reply_failed = Signal(str)
    busy_changed = Signal(bool)  # whether the conversation shown has its reply being generated
    conversation_changed = Signal(object)  # the LiveConversation now shown (new or opened)
    tool_waiting = Signal(object)  # the calls of declared tools the user is to answer ([] : none now)
    generating_changed = Signal(object)  # the id of the conversation whose reply is generated, or None

    def __init__(self, bridge: EngineBridge, view: ChatView, composer: Composer, panel: GaugesPanel,
                 bar: MessageBar, settings: Callable[[], GenerationSettings],
                 streaming: Callable[[], bool], recorder: TurnRecorder | None = None, parent=None):
        super().__init__(parent)
        self.bridge, self.view, self.composer, self.panel, self.bar = bridge, view, composer, panel, bar
        self.settings_source, self._streaming = settings, streaming
        self.conversation = LiveConversation()
        self.recorder = recorder  # None: no history store, the chat is not saved
        self.gauges = LiveGauges()  # the conversation shown: its timeline, and its reply while one runs
        self.model_ready = False
        self.n_ctx = 0
        self.count_tokens = None  # the loaded model's token count (None: estimated), for documents
        self.measure = None  # the local model's prompt, measured as its engine renders it (documents)
        self.index_path = None  # the documents' index (None: the default docs.db)
        self._prepared = False  # the loaded model's vocabulary was indexed for constrained replies
        self._run: Running | None = None
        # The question an edit took out of the path shown: the edited one is sent beside it (the
        # store keeps it and what followed it as a branch; nothing is removed).
        self._replacing: LiveMessage | None = None
        self._frame = QTimer(self)
        self._frame.setInterval(FRAME_MS)
        self._frame.timeout.connect(self._paint_frame)
        self._gauge = QTimer(self)
        self._gauge.setInterval(GAUGE_MS)
        self._gauge.timeout.connect(self._refresh_gauges)
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
        self._tool_line = ""  # the bar's request for a declared tool's result, while that call waits
        self.tool_waiting.connect(self._ask_for_results)

    @property
    def job(self) -> Job | None:
        """The reply being generated, in whichever conversation."""
        return self._run.job if self._run is not None else None

    @property
    def generating(self) -> bool:
        """A reply is being generated, in the conversation shown or another."""
        return self._run is not None

    @property
    def busy(self) -> bool:
        """The conversation shown has its reply being generated."""
        return self._run is not None and self._run.conversation is self.conversation

    @property
    def generating_conversation(self) -> LiveConversation | None:
        return self._run.conversation if self._run is not None else None

    def _engine_taken(self, kept: str = " (your message is kept)") -> bool:
        """The engine writes another conversation's reply: say where in one line, and refuse."""
        run = self._run
        if run is None or run.conversation is self.conversation:
            return False
        opened = run.conversation.id is not None
        self.bar.show_message(f"A reply is still being written in «{run.title}»: wait for it or stop it "
                              f"there{kept}.", "info",
                              action="Open it" if opened else "", key=OPEN_GENERATING if opened else "")
        return True

    # -- user actions -------------------------------------------------------
    def send(self) -> bool:
        text = self.composer.text()
        if self.busy or not text.strip():
            if not self.busy and self.composer.chips.chips:  # documents alone ask nothing
                self.bar.show_message("Type a question about the attached documents: they go with it.",
                                      "info")
            return False
        if not self.model_ready:
            self.bar.show_message("No model is loaded yet: pick one in the Model list "
                                  "(your message is kept).", "warning")
            return False
        if self._engine_taken():
            return False
        if self.composer.reading:
            self.bar.show_message("The attached files are still being read: send once their chips show "
                                  "(your message is kept).", "info")
            return False
        try:
            settings = self.turn_settings()
            settings.validate()
        except ValueError as e:
            self.bar.show_message(f"Settings: {e}", "error")
            return False
        if self._tools_starting():  # its MCP servers start first, off this thread; then it is sent
            return True
        pending, conv = self.composer.chips.pending, self.conversation
        try:
            plan = self._plan_docs(conv, text, pending, len(conv.messages), settings)
        except (LlamaDeskError, OSError) as e:
            self.bar.show_message(f"Documents: {e} (your message and attachments are kept)", "error")
            return False
        self.composer.chips.take()
        self.composer.set_text("")
        self._ask(text, settings, pending, plan.user_text if plan else None, plan.use if plan else None)
        return True

    def stop(self) -> None:
        """Stop the reply of the conversation shown; one written elsewhere goes on."""
        if self.busy:
            self._run.job.cancel.cancel()

    def leave_reply(self, conv_id: int | None) -> None:
        """The conversation is going (deleted): its reply stops now, its text so far sealed as
        interrupted, so an Undo brings back what was shown."""
        run = self._run
        if run is None or conv_id is None or run.conversation.id != conv_id:
            return
        run.job.cancel.cancel()
        self._cut_reply()
        self._end_job()  # its late events and reply are ignored by job id

    def turn_settings(self) -> GenerationSettings:
        """The window's settings for the next turn, held to the conversation's reply format."""
        conv = self.conversation
        settings = replace(self.settings_source(), think=conv.think, think_budget=conv.think_budget)
        constraint = conv.reply_format.constraint()
        return settings if constraint is None else replace(settings, constraint=constraint)

    def set_reply_format(self, fmt: ReplyFormat) -> None:
        """The format chosen for this conversation's next replies, saved with it now (a saved
        conversation reopened before its next turn keeps it; a new one saves it with its first)."""
        conv = self.conversation
        conv.reply_format = fmt
        if self.recorder is not None and conv.id is not None:
            self.recorder.save_reply_format(conv.id, fmt.to_json())
        self._prepare_constraints()

    def set_tools(self, tools: ToolSet) -> None:
        """The tools chosen for this conversation's next replies, saved with it now."""
        conv = self.conversation
        conv.tools = tools
        if self.recorder is not None and conv.id is not None:
            self.recorder.save_tools(conv.id, tools.to_json())
        self._prepare_constraints()

    def _prepare_constraints(self) -> None:
        """A conversation kept to a format or to tools is shown: the engine indexes the model's
        vocabulary now, while the user writes, so the first such reply does not wait seconds."""
        conv = self.conversation
        if self.model_ready and not self._prepared and (conv.tools.active or conv.reply_format.is_json):
            self._prepared = True
            self.bridge.prepare()

    def regenerate(self) -> bool:
        """Answer the last question again; the earlier replies stay beside the new one (the
        switcher on the reply flips between them)."""
        conv = self.conversation
        if self.busy or not self.model_ready or not conv.can_regenerate():
            return False
        if self._engine_taken(""):
            return False
        i = conv.last_user_index()
        question = conv.messages[i]
        replaced = conv.take_from(i + 1)
        self.view.truncate(i + 1)
        self._replacing = None
        settings, tools = self._turn_tools(conv, self.turn_settings())
        try:  # its documents planned again: the same question, the context as it is now
            plan = self._plan_docs(conv, question.content, [], i, settings)
        except (LlamaDeskError, OSError) as e:
            self.bar.show_message(f"Documents: {e} (the question is asked without them)", "warning")
            plan = None
        turn = None
        if self.recorder is not None and conv.id is not None and question.id is not None:
            turn = self.recorder.begin_regeneration(conv.id, question.id, [m.id for m in conv.messages[:i]])
        asked = plan.user_text if plan is not None else question.content
        self._start(conv, Job(conv.history(i), asked, settings, conv.system(), tools=tools), turn)
        self._run.replaces = replaced[0] if replaced else None
        self._run.docs = plan.use if plan is not None else None
        return True

    def edit_last(self) -> bool:
        """Take the last question back into the composer (edit())."""
        i = self.conversation.last_user_index()
        return i is not None and self.edit(i)

    def edit(self, index: int) -> bool:
        """Take question `index` back into the composer; it and what follows leave the view, and
        the edited question, once sent, starts a branch beside it. Nothing leaves the store: a
        switch or New chat before sending leaves the conversation as it was."""
        conv = self.conversation
        if self.busy or not 0 <= index < len(conv.messages) or conv.messages[index].role != "user":
            return False
        self._replacing = conv.take_from(index)[0]
        self.view.truncate(index)
        self.composer.set_text(self._replacing.content)
        for att in self._replacing.attachments:  # its documents are chips again, to keep or take off
            got = self._document(conv, att.sha256)
            if got is not None:
                self.composer.chips.add(Pending(att, *got))
        self.composer.edit.setFocus()
        return True

    def _commit_taken_back(self) -> None:
        """A tool's result is given: an edit left unsent is no longer what follows."""
        self._replacing = None

    def new_chat(self, conversation: LiveConversation | None = None) -> None:
        """Show `conversation` (None: a new one). A reply being written goes on wherever it
        belongs; opening its conversation shows it streaming."""
        run = self._run
        if (conversation is not None and run is not None and conversation.id is not None
                and conversation.id == run.conversation.id):
            conversation = run.conversation  # the store's copy holds the growing reply as a message
        was_busy = self.busy
        self._replacing = None
        self._restyle = False
        self.conversation = conversation or LiveConversation()
        self.view.show_conversation(self.conversation.messages)
        self.tool_waiting.emit(self.conversation.waiting_calls())
        if run is not None and self.busy:
            self.gauges = run.gauges
            run.painted = run.thinking.painted = 0
            run.thinking.folded, run.thinking.line = False, ""
            self.view.begin_live(self._waiting_line(0.0))
            self._paint_frame()
        else:
            if run is not None and self.gauges is run.gauges:
                self.gauges = self._fresh_gauges()
            # The timeline is this conversation's: its replies from their stored stats, or none.
            self.gauges.new_conversation(self._stored_stats(self.conversation))
        self.composer.set_busy(self.busy)
        if was_busy != self.busy:
            self.busy_changed.emit(self.busy)
        self._refresh_gauges()
        self.conversation_changed.emit(self.conversation)
        self._prepare_constraints()

    @staticmethod
    def _stored_stats(conv: LiveConversation):
        return [m.stats for m in conv.messages if m.role == "assistant" and m.stats is not None]

    def _fresh_gauges(self, conv: LiveConversation | None = None) -> LiveGauges:
        """Gauges of their own for a conversation, on the loaded model's figures."""
        g = LiveGauges(n_ctx=self.gauges.n_ctx, limits=self.gauges.limits, gflop_s=self.gauges.gflop_s)
        if conv is not None:
            g.new_conversation(self._stored_stats(conv))
        return g

    def use_model(self, n_ctx: int, limits: Limits | None) -> None:
        """A model (or server) finished loading: its context is empty and `n_ctx` long, so the
        gauges drop the old context's figures (a stale "/ 4096" after a reload to 8192)."""
        self.model_ready, self.n_ctx, self._prepared = True, n_ctx, False
        self.gauges.limits = limits
        self.gauges.new_model(n_ctx)
        self._refresh_gauges()
        self._prepare_constraints()

    def rerender(self) -> None:
        """Draw the conversation again in the palette's new colours (a theme chosen in the
        settings, or the desktop's); a reply in progress finishes first."""
        self._restyle = self.busy
        if not self.busy:
            self.view.show_conversation(self.conversation.messages)

    # -- one reply ----------------------------------------------------------
    def _turn_tools(self, conv: LiveConversation, settings: GenerationSettings):
        """A new turn's settings and what its first reply may call (the tool format holds the
        reply; a reply format cannot too)."""
        conv.tool_rounds = 0
        self.tool_waiting.emit([])  # a new question: calls left unanswered stay so
        tools = self._calls(conv, 0)
        return (settings if tools is None else replace(settings, constraint=None)), tools

    def _ask(self, text: str, settings: GenerationSettings, pending: list[Pending] | None = None,
             prompt_text: str | None = None, docs: DocsUse | None = None) -> None:
        """Ask `text`; `prompt_text` is what the engine is given instead (the documents planned
        around the question), `pending` the attachments the question is saved with."""
        conv = self.conversation
        pending = pending or []
        replacing, self._replacing = self._replacing, None
        settings, tools = self._turn_tools(conv, settings)
        idx = conv.add("user", text)
        conv.messages[idx].attachments = tuple(p.attachment for p in pending)
        before = conv.messages[idx - 1] if idx else None  # what it follows: the path shown's end
        turn = None
        if self.recorder is not None:
            turn = self.recorder.begin(conv.id, text, conv.system(), settings,
                                       [m.id for m in conv.messages[:idx]],
                                       reply_format=conv.reply_format.to_json(),
                                       tools=conv.tools.to_json(),
                                       attachments=new_documents(pending), collections=conv.collections,
                                       parent_id=AT_LEAF if before is not None and before.id is None
                                       else (before.id if before is not None else None))
            if turn is not None:
                conv.id = turn.conversation_id
                conv.messages[idx].id = turn.user_message_id
                if replacing is not None:
                    conv.messages[idx].alternatives = replacing.branched(turn.user_message_id)
        self.view.add_message(conv.messages[idx])
        self._start(conv, Job(conv.history(idx), prompt_text or text, settings, conv.system(), tools=tools),
                    turn)
        self._run.docs, self._run.pending = docs, pending

    def _start(self, conv: LiveConversation, job: Job, turn: Turn | None) -> None:
        settings = job.settings
        shown = conv is self.conversation
        gauges = self.gauges if shown else self._fresh_gauges(conv)
        opening = JSON_FENCE if reply_kind(settings.constraint) or job.tools is not None else ""
        self._run = Running(job, conv, turn, gauges, opening)
        gauges.start(time.perf_counter(), settings.max_tokens, self.n_ctx, streaming=self._streaming(),
                     constrained=settings.constraint is not None, think_budget=settings.think_budget)
        if shown:
            self.view.begin_live(self._waiting_line(0.0))
            self.composer.set_busy(True)
            self.busy_changed.emit(True)
        self.bridge.submit(job)
        self._frame.start()
        self._gauge.start()
        self._save.start()
        self._refresh_gauges()
        self.generating_changed.emit(conv.id)
        self.reply_started.emit()

    def _current(self, job: Job) -> bool:
        self.bridge.job_done(job)
        return self._run is not None and job.id == self._run.job.id

    def _on_replied(self, job: Job, reply: Reply) -> None:
        if not self._current(job):
            return
        if reply.stats.error is not None:
            self._fail(reply.stats.error, False, reply)
            return
        if reply.stats.stop_reason == "cancelled" and not reply.text and not reply.reasoning:
            self._fail("Stopped before the first token", False, reply, level="info")
            return
        run = self._run
        conv, shown = run.conversation, self.busy
        msg = LiveMessage("assistant", reply.text, stats=reply.stats,
                          format=reply.format or reply_kind(job.settings.constraint),
                          tool_calls=reply.tool_calls, reasoning=reply.reasoning, docs=run.docs)
        for i in conv.mark_dropped(reply.dropped):
            if shown:
                self.view.update_message(i, conv.messages[i])
        conv.messages.append(msg)
        reply.stats.made_with = made_with(self.recorder.model if self.recorder else None, job.settings)
        if self.recorder is not None and self.recorder.finish(run.turn, reply, run.docs):
            msg.id = run.turn.reply_message_id
            if run.replaces is not None:
                msg.alternatives = run.replaces.branched(msg.id)
        if shown:
            self.view.end_live(msg)  # the whole reply, once, as Markdown (both modes)
        self._finish_gauges(run, reply.stats)
        self._end_job()
        self.reply_finished.emit(msg)
        if reply.tool_calls:
            self._after_calls(conv, reply.tool_calls)

    def _finish_gauges(self, run: Running, stats) -> None:
        now = time.perf_counter()
        if stats is not None:
            run.gauges.finish(stats, now)
        else:
            run.gauges.fail(now)
        if run.gauges is not self.gauges:  # the panel keeps the model's last prefill rate
            self.gauges.gflop_s = run.gauges.gflop_s

    def _save_progress(self) -> None:
        run = self._run
        if self.recorder is not None and run is not None:
            self.recorder.progress(run.turn, "".join(run.parts), run.thinking.text() or None)

    def _cut_reply(self) -> None:
        """The user left the reply (its conversation deleted, the window closed): the question
        stays, and so does any text shown, sealed as interrupted."""
        run = self._run
        if self.recorder is not None and run is not None:
            self.recorder.abandon(run.turn, "".join(run.parts), keep_question=True,
                                  reasoning=run.thinking.text() or None)

    def _end_job(self) -> None:
        shown = self.busy
        self._frame.stop()
        self._gauge.stop()
        self._save.stop()
        self._run = None
        if shown:
            self.view.discard_live()
            self.composer.set_busy(False)
        self._refresh_gauges()
        self.generating_changed.emit(None)
        if shown:
            self.busy_changed.emit(False)
        if self._restyle:
            self.rerender()

    def shutdown(self) -> None:
        """Closing mid-reply keeps the text so far, sealed as interrupted."""
        self._cut_reply()
        self._frame.stop()
        self._gauge.stop()
        self._save.stop()
