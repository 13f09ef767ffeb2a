"""What the chat flow does when a reply fails or is stopped: one policy for every way it ends.

Text the user saw stays (sealed interrupted); with none, the question goes
back in the box, since nothing of the turn was answered. ChatFlow
(app.ui.chat.flow) is the one class that mixes this in: it holds the reply,
the view, the composer and the store these methods work through.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from app.chat.conversation import LiveMessage
from app.chat.reply import Reply
from app.chat.reply_format import reply_kind
from app.history.records import INTERRUPTED
from app.ui.chat.engine_thread import Job

if TYPE_CHECKING:
    from app.chat.recorder import TurnRecorder
    from app.ui.chat.composer import Composer
    from app.ui.chat.running import Running
    from app.ui.chat.view import ChatView
    from app.ui.widgets.message_bar import MessageBar


class TurnFailures:
    """ChatFlow's failure policy; the attributes below are ChatFlow's."""

    _run: Running | None
    recorder: TurnRecorder | None
    view: ChatView
    composer: Composer
    bar: MessageBar
    reply_failed: Any  # ChatFlow's Signal(str)

    @property
    def busy(self) -> bool:
        raise NotImplementedError

    def _current(self, job: Job) -> bool:
        raise NotImplementedError

    def _finish_gauges(self, run: Running, stats) -> None:
        raise NotImplementedError

    def _end_job(self) -> None:
        raise NotImplementedError

    def _on_failed(self, job: Job, message: str, overflow: bool) -> None:
        if self._current(job):
            self._fail(message, overflow, None)

    def _fail(self, message: str, overflow: bool, reply: Reply | None, level: str = "error") -> None:
        """The one failure policy: text the user saw stays (interrupted); with none, the
        question goes back in the box, since nothing of the turn was answered. A question asked
        in a conversation not shown now stays in it instead: the box holds another's text."""
        run = self._run
        conv, shown = run.conversation, self.busy
        where = "" if shown else f"In «{run.title}»: "
        text = reply.text if reply is not None else "".join(run.parts)
        thought = reply.reasoning if reply is not None else run.thinking.text()
        stats = reply.stats if reply is not None else None
        kind = "Context overflow: " if overflow else ("Error: " if level == "error" else "")
        if text or thought:  # stopped while thinking: the reasoning is kept as the reply so far
            msg = LiveMessage("assistant", text, stats=stats, state=INTERRUPTED,
                              format=reply_kind(run.job.settings.constraint), reasoning=thought,
                              docs=run.docs)
            conv.messages.append(msg)
            if self.recorder is not None and self.recorder.abandon(run.turn, text, stats=stats,
                                                                   reasoning=msg.reasoning or None,
                                                                   docs=run.docs):
                msg.id = run.turn.reply_message_id
                if run.replaces is not None:
                    msg.alternatives = run.replaces.branched(msg.id)
            if shown:
                self.view.end_live(msg)
            self._finish_gauges(run, stats)
            self._end_job()
            self.bar.show_message(where + kind + message + " (the reply so far is kept)", level)
            self.reply_failed.emit(message)
            return
        asked = run.job.user_text is not None and run.replaces is None  # a regeneration asks nothing new
        if run.replaces is not None:  # the earlier reply is shown again: it is what stands
            conv.messages.append(run.replaces)
            if shown:
                self.view.add_message(run.replaces)
        if self.recorder is not None:
            self.recorder.abandon(run.turn, "", keep_question=not shown)
            if shown and asked and run.turn is not None and run.turn.created:
                conv.id = None  # the store dropped the conversation it began
        if not shown or not asked:  # after tool results they stay; elsewhere, so does the question
            self._finish_gauges(run, None)
            self._end_job()
            hint = " (the question is kept there: Edit last takes it back)" if asked else ""
            self.bar.show_message(where + kind + message + hint, level)
            self.reply_failed.emit(message)
            return
        got = conv.take_last_exchange()
        question = got[0] if got else ""
        self.view.truncate(len(conv.messages))
        typed = self.composer.text()
        self.composer.set_text(question + ("\n" + typed if typed.strip() else ""))
        self.composer.chips.give_back(run.pending)  # its attachments are chips again
        self._finish_gauges(run, None)
        self._end_job()
        hint = " (your message is back in the box)" if question else ""
        self.bar.show_message(kind + message + hint, level)
        self.reply_failed.emit(message)

