"""What answering a chat turn gives back, whichever engine answered it.

Apart from app.chat.engines (the Protocol and the factory that imports every
engine) so the engines themselves can name it without importing their own
factory.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from app.engine.message import ToolCall
from app.engine.stats import ReplyStats

# How a turn reaches a remote server: "chat" sends messages to /chat/completions and lets the
# server apply the model's template; "transcript" sends LlamaDesk's plain transcript to
# /completions, for a base model without a chat template.
PROMPT_FORMATS = ("chat", "transcript")


@dataclass
class Reply:
    text: str
    stats: ReplyStats
    dropped: list[int] = field(default_factory=list)  # history indices left out of context
    tool_calls: tuple[ToolCall, ...] = ()  # the calls it made (its text is then often empty)
    # JSON_REPLY: the text is JSON whatever the settings said (a tool-format reply cut short by
    # max_tokens, kept as it came); None: as the settings' constraint says.
    format: str | None = None
    # A thinking model's reasoning, split from `text` (the answer alone); "" when it had none.
    reasoning: str = ""
