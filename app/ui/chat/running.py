"""The reply being generated, as the chat flow keeps it while it runs: apart from the flow so
the flow's mixins (tool turns, documents, failures) can name its type without importing the flow."""

from __future__ import annotations

from app.chat.conversation import LiveConversation, LiveMessage
from app.chat.live_gauges import LiveGauges
from app.chat.recorder import Turn
from app.engine.message import DocsUse
from app.ui.chat.attachment_chips import Pending
from app.ui.chat.engine_thread import Job
from app.ui.chat.thinking import LiveThinking


class Running:
    """The reply being generated, with the conversation it belongs to (shown or not)."""

    def __init__(self, job: Job, conversation: LiveConversation, turn: Turn | None, gauges: LiveGauges,
                 opening: str) -> None:
        self.job, self.conversation, self.turn, self.gauges = job, conversation, turn, gauges
        self.opening = opening  # what its live text starts with (JSON_FENCE for a JSON reply)
        self.parts: list[str] = []
        self.painted = 0  # how many of `parts` the view shows (0 again once it shows another conversation)
        self.thinking = LiveThinking()  # a thinking model's reasoning, before its answer
        self.replaces: LiveMessage | None = None  # a regeneration: the reply it is written beside
        self.docs: DocsUse | None = None  # the documents the reply is given, and its sources
        self.pending: list[Pending] = []  # the chips sent with its question (back to the box if it fails)

    @property
    def title(self) -> str:
        return self.conversation.title or "a new conversation"


